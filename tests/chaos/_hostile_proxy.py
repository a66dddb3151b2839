"""A loopback proxy in front of a real broker that can turn hostile on command.

Requests pass through untouched; responses pass (Metadata and FindCoordinator rewritten so
clients keep coming through the proxy) or, per ``mode``: ``garbage`` (random bytes),
``huge`` (a 2 GiB size prefix), ``negative`` (a negative size), ``wrong_cid`` (another
request's correlation id), ``slowloris`` (one byte every 0.2 s) or ``blackhole`` (dropped).
"""

from __future__ import annotations

import random
import struct
from typing import Any

import anyio
import anyio.abc

from kafkaio.protocol import messages as m
from kafkaio.protocol.frames import decode_response, response_header_flexible
from tests.unit.net._fake_broker import LoopbackServer

MODES = ("garbage", "huge", "negative", "wrong_cid", "slowloris", "blackhole")


async def _read_frame(stream: anyio.abc.ByteStream, buffer: bytearray) -> bytes:
    while len(buffer) < 4 or len(buffer) < 4 + struct.unpack_from(">i", buffer)[0]:
        buffer += await stream.receive()
    size = struct.unpack_from(">i", buffer)[0]
    frame = bytes(buffer[4 : 4 + size])
    del buffer[: 4 + size]
    return frame


class HostileProxy(LoopbackServer):
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        super().__init__()
        self.upstream = (upstream_host, upstream_port)
        self.mode = "pass"
        self.hostile_frames = 0
        self.hostile_produce_answers = 0  # Produce answers the hostile modes replaced
        self.max_produce_in_flight = 0  # the most Produce requests a client had unanswered
        self._rnd = random.Random(7)

    def _rewrite(self, api_key: int, version: int, frame: bytes) -> bytes:
        if api_key not in (3, 10):
            return frame
        message = decode_response(api_key, version, frame)
        host, port = self.upstream
        if api_key == 3:
            for b in message.brokers:
                if b.port == port:
                    b.host, b.port = "127.0.0.1", self.port
        elif version < 4:
            if message.port == port:
                message.host, message.port = "127.0.0.1", self.port
        else:
            for c in message.coordinators:
                if c.port == port:
                    c.host, c.port = "127.0.0.1", self.port
        out = bytearray(frame[:4])
        if response_header_flexible(api_key, version):
            out.append(0)
        message.encode_into(version, out)
        return bytes(out)

    async def _hostile(self, client: anyio.abc.ByteStream, frame: bytes) -> None:
        self.hostile_frames += 1
        mode = self.mode
        if mode == "garbage":
            await client.send(self._rnd.randbytes(64))
        elif mode == "huge":
            await client.send(struct.pack(">i", 0x7FFFFFFF) + frame)
        elif mode == "negative":
            await client.send(struct.pack(">i", -5) + frame)
        elif mode == "wrong_cid":
            cid = struct.unpack_from(">i", frame)[0]
            bad = struct.pack(">i", cid ^ 0x5A5A) + frame[4:]
            await client.send(struct.pack(">i", len(bad)) + bad)
        elif mode == "slowloris":
            data = struct.pack(">i", len(frame)) + frame
            for i in range(len(data)):
                await client.send(data[i : i + 1])
                await anyio.sleep(0.2)
        # blackhole: nothing

    async def _serve(self, client: anyio.abc.SocketStream) -> None:
        pending: dict[int, tuple[int, int]] = {}
        # Produce requests whose answer the client has not had (a dropped answer stays here):
        # what the client has in flight, however fast the broker answers
        unanswered: set[int] = set()
        try:
            upstream = await anyio.connect_tcp(*self.upstream)
        except OSError:
            await client.aclose()
            return

        async def client_to_broker() -> None:
            buffer = bytearray()
            while True:
                frame = await _read_frame(client, buffer)
                api_key, version, cid = struct.unpack_from(">hhi", frame)
                pending[cid] = (api_key, version)
                if api_key == 0:
                    unanswered.add(cid)
                    self.max_produce_in_flight = max(self.max_produce_in_flight, len(unanswered))
                await upstream.send(struct.pack(">i", len(frame)) + frame)

        async def broker_to_client() -> None:
            buffer = bytearray()
            while True:
                frame = await _read_frame(upstream, buffer)
                cid = struct.unpack_from(">i", frame)[0]
                api_key, version = pending.pop(cid, (-1, -1))
                if self.mode != "pass":
                    if api_key == 0:
                        self.hostile_produce_answers += 1
                    await self._hostile(client, frame)
                    continue
                frame = self._rewrite(api_key, version, frame)
                await client.send(struct.pack(">i", len(frame)) + frame)
                unanswered.discard(cid)

        try:
            async with anyio.create_task_group() as tg:  # noqa: SIM117

                async def run(fn: Any) -> None:
                    try:
                        await fn()
                    except (
                        anyio.EndOfStream,
                        anyio.BrokenResourceError,
                        anyio.ClosedResourceError,
                        OSError,
                    ):
                        pass  # one side closed: close the other
                    finally:
                        tg.cancel_scope.cancel()

                tg.start_soon(run, client_to_broker)
                tg.start_soon(run, broker_to_client)
        finally:
            await anyio.aclose_forcefully(upstream)
            await anyio.aclose_forcefully(client)


__all__ = ["MODES", "HostileProxy", "m"]
