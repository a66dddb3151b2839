"""A minimal, blocking ApiVersions v0 probe used to see that a test broker answers.

Hand-written on purpose: the test-broker helpers must not depend on the client they test.
"""

from __future__ import annotations

import socket
import struct

from kafkaio.errors import KafkaConnectionError, KafkaProtocolError

API_VERSIONS_KEY = 18
_CORRELATION_ID = 0x6B696F  # arbitrary; checked on the response
_CLIENT_ID = b"kafkaio-testing-probe"


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


def api_versions(host: str, port: int, timeout: float = 2.0) -> dict[int, tuple[int, int]]:
    """Send ApiVersions v0 to one broker and return {api_key: (min_version, max_version)}.

    Raises KafkaConnectionError when the broker cannot be reached or does not answer in
    ``timeout`` seconds, and KafkaProtocolError when the answer is not an ApiVersions response.
    """
    header = struct.pack(">hhih", API_VERSIONS_KEY, 0, _CORRELATION_ID, len(_CLIENT_ID))
    request = header + _CLIENT_ID
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(struct.pack(">i", len(request)) + request)
            (size,) = struct.unpack(">i", _read_exactly(sock, 4))
            if not 10 <= size <= 1 << 20:
                raise KafkaProtocolError(f"ApiVersions response from {host}:{port} has size {size}")
            body = _read_exactly(sock, size)
    except OSError as exc:
        raise KafkaConnectionError(f"no ApiVersions answer from {host}:{port}: {exc}") from exc
    correlation_id, error_code, count = struct.unpack_from(">ihi", body, 0)
    if correlation_id != _CORRELATION_ID:
        raise KafkaProtocolError(
            f"ApiVersions response from {host}:{port} has correlation id {correlation_id}, "
            f"expected {_CORRELATION_ID}"
        )
    if error_code != 0:
        raise KafkaProtocolError(f"ApiVersions v0 to {host}:{port} failed with error {error_code}")
    if count < 0 or 10 + 6 * count > len(body):
        raise KafkaProtocolError(f"ApiVersions response from {host}:{port} is truncated")
    versions: dict[int, tuple[int, int]] = {}
    for index in range(count):
        key, low, high = struct.unpack_from(">hhh", body, 10 + 6 * index)
        versions[key] = (low, high)
    return versions


def free_loopback_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago (another process may take it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
