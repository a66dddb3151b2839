"""A Schema Registry for tests: Apicurio Registry (in-memory storage) on a loopback port,
serving the Confluent API at ``/apis/ccompat/v7``.

``make schema-registry`` builds it with Maven from ``tools/schema-registry/pom.xml`` into
``~/.cache/kafkaio/apicurio-registry-<version>/`` (Maven Central ships the application's
plain jar only; the pom runs the Quarkus build over it). It needs Java 17+.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from kafkaio.testing._logfile import LogFile
from kafkaio.testing._probe import free_loopback_port
from kafkaio.testing._process import popen_tied
from kafkaio.testing.errors import BrokerStartError

APICURIO_VERSION = "2.4.2.Final"
JAR_ENV = "KAFKAIO_SCHEMA_REGISTRY_JAR"
URL_ENV = "KAFKAIO_TEST_SCHEMA_REGISTRY_URL"
CCOMPAT_PATH = "/apis/ccompat/v7"


def default_jar() -> Path:
    """Where ``make schema-registry`` puts the registry's runner jar."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return (
        cache
        / "kafkaio"
        / f"apicurio-registry-{APICURIO_VERSION}"
        / "kafkaio-schema-registry-1-runner.jar"
    )


def unavailable_reason(jar: Path | None = None) -> str | None:
    """Why the registry cannot start here (None: it can)."""
    jar = jar or Path(os.environ.get(JAR_ENV) or default_jar())
    if shutil.which("java") is None:
        return "Java is not installed (Apicurio Registry needs Java 17+)"
    if not jar.is_file():
        return (
            f"the Apicurio Registry jar {jar} is not built: run `make schema-registry` "
            "(needs Maven and Java 17+)"
        )
    return None


class ApicurioRegistry:
    """``with ApicurioRegistry() as registry: registry.url`` (the Confluent-compatible URL)."""

    def __init__(
        self, jar: Path | None = None, *, start_timeout: float = 90.0, keep_log: bool = False
    ) -> None:
        self.jar = jar or Path(os.environ.get(JAR_ENV) or default_jar())
        self.start_timeout = start_timeout
        self.keep_log = keep_log
        self.port: int | None = None
        self.startup_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: LogFile | None = None

    @property
    def url(self) -> str:
        """The Confluent Schema Registry API's base URL."""
        if self.port is None:
            raise BrokerStartError("the registry is not started")
        return f"http://127.0.0.1:{self.port}{CCOMPAT_PATH}"

    def start(self) -> ApicurioRegistry:
        reason = unavailable_reason(self.jar)
        if reason is not None:
            raise BrokerStartError(reason)
        self.port = free_loopback_port()
        self._log = LogFile("kafkaio-apicurio-", keep=self.keep_log)
        command = [
            "java",
            "-Xmx512m",
            "-XX:TieredStopAtLevel=1",
            f"-Dquarkus.http.port={self.port}",
            "-Dquarkus.http.host=127.0.0.1",
            "-Dquarkus.log.level=WARN",
            "-Dregistry.events.kafka.topic=",
            "-jar",
            str(self.jar),
        ]
        started = time.monotonic()
        self._process = popen_tied(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log.file,
            stderr=subprocess.STDOUT,
        )
        deadline = started + self.start_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                tail = self._log.tail()
                self.stop()
                raise BrokerStartError(f"Apicurio Registry exited at start-up:\n{tail}")
            try:
                with urllib.request.urlopen(self.url + "/subjects", timeout=2) as response:
                    if response.status == 200:
                        self.startup_seconds = time.monotonic() - started
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.2)
        tail = self._log.tail()
        self.stop()
        raise BrokerStartError(
            f"Apicurio Registry did not answer within {self.start_timeout:g} s:\n{tail}"
        )

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> ApicurioRegistry:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
