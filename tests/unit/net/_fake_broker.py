"""A scripted fake Kafka broker on 127.0.0.1 for connection tests (anyio, asyncio or trio).

Each accepted connection runs the test's handler with a ``FakeClient`` that reads requests
and writes responses, well-formed or deliberately broken.
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from kafkaio.protocol import messages as m
from kafkaio.protocol._codec import _r_uvarint
from kafkaio.protocol.frames import is_flexible

if TYPE_CHECKING:
    from typing import Self  # Python 3.11+; only an annotation here

DEFAULT_APIS: dict[int, tuple[int, int]] = {
    0: (0, 11),  # Produce
    3: (0, 12),  # Metadata
    17: (0, 1),  # SaslHandshake
    18: (0, 4),  # ApiVersions
    36: (0, 2),  # SaslAuthenticate
}


@dataclass
class Received:
    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    request: Any


class FakeClient:
    """The broker side of one client connection."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self._buffer = bytearray()

    async def _read_exactly(self, n: int) -> bytes:
        while len(self._buffer) < n:
            self._buffer += await self.stream.receive()
        data = bytes(self._buffer[:n])
        del self._buffer[:n]
        return data

    async def read_request(self) -> Received:
        (size,) = struct.unpack(">i", await self._read_exactly(4))
        return decode_request(await self._read_exactly(size))

    async def respond(self, received: Received, response: Any, version: int | None = None) -> None:
        version = received.version if version is None else version
        await self.send_raw(
            encode_response(received.correlation_id, received.api_key, version, response)
        )

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send(data)

    async def answer_api_versions(self, apis: dict[int, tuple[int, int]] | None = None) -> Received:
        received = await self.read_request()
        assert received.api_key == 18
        await self.respond(received, api_versions_response(apis or DEFAULT_APIS))
        return received

    async def wait_closed(self) -> None:
        """Return when the client closes its end."""
        try:
            while True:
                await self.stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return


def decode_request(frame: bytes) -> Received:
    """A request frame (without its size prefix), as a broker reads it."""
    view = memoryview(frame)
    api_key, version, cid, name_len = struct.unpack_from(">hhih", view, 0)
    pos = 10
    client_id = None
    if name_len >= 0:
        client_id = bytes(view[pos : pos + name_len]).decode()
        pos += name_len
    cls = m.REQUESTS[api_key][0]
    if is_flexible(cls, version):
        ntags, pos = _r_uvarint(view, pos)
        assert ntags == 0
    return Received(api_key, version, cid, client_id, cls.decode(view[pos:], version))


def api_versions_response(apis: dict[int, tuple[int, int]], error_code: int = 0) -> Any:
    return m.ApiVersionsResponse(
        error_code=error_code,
        api_keys=[m.ApiVersionsResponse.ApiVersion(k, lo, hi) for k, (lo, hi) in apis.items()],
    )


def encode_response(correlation_id: int, api_key: int, version: int, response: Any) -> bytes:
    body = bytearray(struct.pack(">i", correlation_id))
    if api_key != 18 and is_flexible(m.REQUESTS[api_key][1], version):
        body.append(0)  # response header v1: no tagged fields
    response.encode_into(version, body)
    return struct.pack(">i", len(body)) + bytes(body)


def metadata_response(cluster_id: str, *topics: str) -> Any:
    return m.MetadataResponse(
        cluster_id=cluster_id,
        controller_id=1,
        brokers=[m.MetadataResponse.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=9)],
        topics=[m.MetadataResponse.MetadataResponseTopic(name=t) for t in topics],
    )


def metadata_request(*topics: str) -> Any:
    return m.MetadataRequest(
        topics=[m.MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    )


GUARD = 10  # seconds: a scenario taking longer than this has hung


def run(backend: str, scenario: Callable[[], Awaitable[None]]) -> None:
    """Run ``scenario`` on ``backend`` under a hang guard (``anyio.fail_after``)."""

    async def guarded() -> None:
        with anyio.fail_after(GUARD):
            await scenario()

    anyio.run(guarded, backend=backend)


async def echo_metadata(client: FakeClient) -> None:
    """Answer every Metadata request with the topics it asked for."""
    while True:
        received = await client.read_request()
        names = [t.name for t in received.request.topics or []]
        await client.respond(received, metadata_response("fake", *names))


def topics(response: Any) -> list[str]:
    return [t.name for t in response.topics]


Handler = Callable[[FakeClient], Awaitable[None]]


class LoopbackServer:
    """Listens on 127.0.0.1:<free port> while entered (``async with``); subclasses serve each
    accepted connection in ``_serve``."""

    def __init__(self) -> None:
        self.port = 0
        self._tg: anyio.abc.TaskGroup | None = None
        self._listener: anyio.abc.Listener[Any] | None = None

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def _serve(self, stream: anyio.abc.SocketStream) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self._listener = listener
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(listener.serve, self._serve)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(exc_type, exc, tb)
        if self._listener is not None:
            await self._listener.aclose()


class FakeBroker(LoopbackServer):
    """Runs ``handler`` for every accepted connection."""

    def __init__(self, handler: Handler) -> None:
        super().__init__()
        self.handler = handler
        self.accepted = 0
        self.errors: list[BaseException] = []

    async def _serve(self, stream: anyio.abc.SocketStream) -> None:
        self.accepted += 1
        client = FakeClient(stream)
        try:
            await self.handler(client)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the client went away: normal in these tests
        except Exception as exc:  # surfaced by the test through .errors
            self.errors.append(exc)
        finally:
            await anyio.aclose_forcefully(stream)


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
