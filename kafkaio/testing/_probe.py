"""Minimal, blocking ApiVersions v0 and Metadata v1 probes used to see that a test broker
answers and which brokers, leaders and replicas it reports.

Hand-written on purpose: the test-broker helpers must not depend on the client they test.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field

from kafkaio.errors import KafkaConnectionError, KafkaProtocolError

LIST_OFFSETS_KEY = 2
METADATA_KEY = 3
API_VERSIONS_KEY = 18
_CORRELATION_ID = 0x6B696F  # arbitrary; checked on the response
_CLIENT_ID = b"kafkaio-testing-probe"
_API_NAMES = {
    LIST_OFFSETS_KEY: "ListOffsets",
    METADATA_KEY: "Metadata",
    API_VERSIONS_KEY: "ApiVersions",
}


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """Split "host:port,host:port" into (host, port) pairs; brackets around IPv6 hosts are removed."""
    addresses: list[tuple[str, int]] = []
    for item in bootstrap.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise KafkaConnectionError(
                f"bootstrap address {item!r} is not host:port; give e.g. '127.0.0.1:9092'"
            )
        addresses.append((host.strip("[]"), int(port)))
    if not addresses:
        raise KafkaConnectionError(f"bootstrap {bootstrap!r} names no broker; give 'host:port,...'")
    return addresses


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise KafkaConnectionError("broker closed the connection before answering ApiVersions")
        chunks += chunk
    return bytes(chunks)


def _roundtrip(
    host: str, port: int, api_key: int, version: int, body: bytes, timeout: float
) -> bytes:
    """Send one request (header v1) and return the response after its correlation id."""
    header = struct.pack(">hhih", api_key, version, _CORRELATION_ID, len(_CLIENT_ID))
    request = header + _CLIENT_ID + body
    name = _API_NAMES.get(api_key, f"api key {api_key}")
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(struct.pack(">i", len(request)) + request)
            (size,) = struct.unpack(">i", _read_exactly(sock, 4))
            if not 6 <= size <= 64 << 20:
                raise KafkaProtocolError(f"{name} response from {host}:{port} has size {size}")
            response = _read_exactly(sock, size)
    except OSError as exc:
        raise KafkaConnectionError(f"no {name} answer from {host}:{port}: {exc}") from exc
    (correlation_id,) = struct.unpack_from(">i", response, 0)
    if correlation_id != _CORRELATION_ID:
        raise KafkaProtocolError(
            f"{name} response from {host}:{port} has correlation id {correlation_id}, "
            f"expected {_CORRELATION_ID}"
        )
    return response[4:]


def api_versions(host: str, port: int, timeout: float = 2.0) -> dict[int, tuple[int, int]]:
    """Send ApiVersions v0 to one broker and return {api_key: (min_version, max_version)}.

    Raises KafkaConnectionError when the broker cannot be reached or does not answer in
    ``timeout`` seconds, and KafkaProtocolError when the answer is not an ApiVersions response.
    """
    body = _roundtrip(host, port, API_VERSIONS_KEY, 0, b"", timeout)
    if len(body) < 6:
        raise KafkaProtocolError(f"ApiVersions response from {host}:{port} is truncated")
    error_code, count = struct.unpack_from(">hi", body, 0)
    if error_code != 0:
        raise KafkaProtocolError(f"ApiVersions v0 to {host}:{port} failed with error {error_code}")
    if count < 0 or 6 + 6 * count > len(body):
        raise KafkaProtocolError(f"ApiVersions response from {host}:{port} is truncated")
    versions: dict[int, tuple[int, int]] = {}
    for index in range(count):
        key, low, high = struct.unpack_from(">hhh", body, 6 + 6 * index)
        versions[key] = (low, high)
    return versions


@dataclass(frozen=True, slots=True)
class PartitionState:
    """One partition as Metadata reports it (leader -1: none)."""

    error_code: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MetadataAnswer:
    """What one broker's Metadata v1 answer says about the cluster."""

    brokers: dict[int, tuple[str, int]]
    controller_id: int
    topics: dict[str, dict[int, PartitionState]] = field(default_factory=dict)
    topic_errors: dict[str, int] = field(default_factory=dict)


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = data, 0, what

    def unpack(self, fmt: str) -> tuple[int, ...]:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise KafkaProtocolError(f"{self.what} is truncated")
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return values

    def string(self) -> str | None:
        (length,) = self.unpack(">h")
        if length < 0:
            return None
        text = self.data[self.pos : self.pos + length]
        self.pos += length
        return text.decode("utf-8", "replace")

    def int32_array(self) -> tuple[int, ...]:
        (count,) = self.unpack(">i")
        return self.unpack(f">{max(count, 0)}i")


def metadata(
    host: str, port: int, topics: list[str] | None = None, timeout: float = 2.0
) -> MetadataAnswer:
    """Send Metadata v1 to one broker: the brokers it knows and ``topics``' partitions.

    ``topics=None`` asks for every topic; ``[]`` for none (brokers only). Auto-creation is
    not requested (v1 creates only if the broker's auto.create.topics.enable says so:
    ask for no topics, or existing ones, to be sure).
    """
    if topics is None:
        body = struct.pack(">i", -1)
    else:
        body = struct.pack(">i", len(topics)) + b"".join(_string(name) for name in topics)
    answer_bytes = _roundtrip(host, port, METADATA_KEY, 1, body, timeout)
    reader = _Reader(answer_bytes, f"Metadata response from {host}:{port}")
    brokers: dict[int, tuple[str, int]] = {}
    for _ in range(reader.unpack(">i")[0]):
        (node_id,) = reader.unpack(">i")
        broker_host = reader.string() or ""
        (broker_port,) = reader.unpack(">i")
        reader.string()  # rack
        brokers[node_id] = (broker_host, broker_port)
    (controller_id,) = reader.unpack(">i")
    answer = MetadataAnswer(brokers=brokers, controller_id=controller_id)
    for _ in range(reader.unpack(">i")[0]):
        (error_code,) = reader.unpack(">h")
        name = reader.string() or ""
        reader.unpack(">b")  # is_internal
        partitions: dict[int, PartitionState] = {}
        for _ in range(reader.unpack(">i")[0]):
            partition_error, index, leader = reader.unpack(">hii")
            replicas = reader.int32_array()
            isr = reader.int32_array()
            partitions[index] = PartitionState(partition_error, leader, replicas, isr)
        answer.topics[name] = partitions
        if error_code:
            answer.topic_errors[name] = error_code
    return answer


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def list_offsets_errors(
    host: str, port: int, topic: str, partitions: list[int], timeout: float = 2.0
) -> dict[int, int]:
    """Send ListOffsets v1 (latest) for ``partitions`` of ``topic`` to one broker; return
    each partition's error code (0 once this broker leads it and serves requests for it).
    """
    body = struct.pack(">ii", -1, 1) + _string(topic) + struct.pack(">i", len(partitions))
    body += b"".join(struct.pack(">iq", partition, -1) for partition in partitions)
    answer_bytes = _roundtrip(host, port, LIST_OFFSETS_KEY, 1, body, timeout)
    reader = _Reader(answer_bytes, f"ListOffsets response from {host}:{port}")
    errors: dict[int, int] = {}
    for _ in range(reader.unpack(">i")[0]):
        reader.string()
        for _ in range(reader.unpack(">i")[0]):
            partition, error_code, _timestamp, _offset = reader.unpack(">ihqq")
            errors[partition] = error_code
    return errors


def free_loopback_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago (another process may take it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
