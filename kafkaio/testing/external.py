"""Brokers that are not started in-process: an external cluster named by an environment
variable, and Apache Kafka in a container (testcontainers) when a Docker engine answers.
"""

from __future__ import annotations

import functools
import os
import socket
from types import TracebackType
from typing import Any
from urllib.parse import urlparse

from kafkaio.testing.errors import ContainerStartError

EXTERNAL_BOOTSTRAP_ENV = "KAFKAIO_TEST_BOOTSTRAP"
KAFKA_IMAGE_ENV = "KAFKAIO_TEST_KAFKA_IMAGE"
DEFAULT_KAFKA_IMAGE = "confluentinc/cp-kafka:7.6.0"


def external_bootstrap() -> str | None:
    """The bootstrap list in ``KAFKAIO_TEST_BOOTSTRAP`` ("host:port,..."), or None if unset."""
    value = os.environ.get(EXTERNAL_BOOTSTRAP_ENV, "").strip()
    return value or None


def _docker_address() -> tuple[int, Any, str]:
    """(socket family, address, description) of the Docker engine from DOCKER_HOST."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    url = urlparse(host)
    if url.scheme == "unix":
        return socket.AF_UNIX, url.path, host
    if url.scheme in ("tcp", "http") and url.hostname:
        return socket.AF_INET, (url.hostname, url.port or 2375), host
    raise OSError(f"DOCKER_HOST={host!r} is neither unix:// nor tcp://")


@functools.lru_cache(maxsize=1)
def docker_unavailable_reason(timeout: float = 0.5) -> str | None:
    """None when a Docker engine answers ``GET /_ping`` within ``timeout`` s, else why not.

    Quiet and quick: no Docker client library is imported. The result is cached.
    """
    try:
        family, address, description = _docker_address()
    except OSError as exc:
        return str(exc)
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(address)
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            answer = sock.recv(256)
    except OSError as exc:
        return f"no Docker engine answered at {description} ({exc.strerror or exc})"
    if not answer.startswith(b"HTTP/1.") or b" 200 " not in answer.split(b"\r\n", 1)[0]:
        first_line = answer.split(b"\r\n", 1)[0].decode("latin-1")
        return f"Docker engine at {description} answered /_ping with {first_line!r}"
    return None


class KafkaContainerBroker:
    """Apache Kafka (KRaft) in a container through testcontainers; needs a Docker engine.

    The image is ``KAFKAIO_TEST_KAFKA_IMAGE`` or confluentinc/cp-kafka:7.6.0.
    """

    def __init__(self, image: str | None = None) -> None:
        self.image = image or os.environ.get(KAFKA_IMAGE_ENV, DEFAULT_KAFKA_IMAGE)
        self._container: Any = None
        self._bootstrap: str | None = None

    @property
    def bootstrap(self) -> str:
        if self._bootstrap is None:
            raise ContainerStartError("the Kafka container is not started; call start() first")
        return self._bootstrap

    def start(self) -> KafkaContainerBroker:
        reason = docker_unavailable_reason()
        if reason is not None:
            raise ContainerStartError(f"cannot start Kafka in a container: {reason}")
        try:
            from testcontainers.community.kafka import KafkaContainer
        except ImportError:
            try:
                from testcontainers.kafka import KafkaContainer
            except ImportError as exc:
                raise ContainerStartError(
                    "testcontainers is not installed; `pip install testcontainers`"
                ) from exc
        container = KafkaContainer(self.image).with_kraft()
        try:
            container.start()
        except Exception as exc:  # docker/testcontainers raise many unrelated types
            raise ContainerStartError(
                f"Kafka container {self.image} did not start: {type(exc).__name__}: {exc}"
            ) from exc
        self._container = container
        self._bootstrap = str(container.get_bootstrap_server())
        return self

    def stop(self) -> None:
        container, self._container = self._container, None
        if container is not None:
            container.stop()

    def __enter__(self) -> KafkaContainerBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
