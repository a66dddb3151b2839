"""The anyio-stream I/O of a connection (TLS, and every connection under trio): frames are
written whole under the connection's line, and responses are read by whichever waiting
task holds the read lock, so no background task outlives a call.

A waiting task reads (or waits for the lock) until the earliest deadline of the requests in
flight when it started waiting, and then reports it (`ConnectionEvents.expire`), so a request
is timed out even while another task reads.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from anyio.streams.tls import TLSStream

from kafkaio.clock import monotonic
from kafkaio.errors import KafkaConnectionError

if TYPE_CHECKING:
    from kafkaio.net.io import ConnectionEvents
    from kafkaio.net.state import ConnectionMachine
    from kafkaio.runtime.completion import Completion

_READ_CHUNK = 256 * 1024
STREAM_ERRORS = (OSError, anyio.BrokenResourceError, anyio.EndOfStream, anyio.ClosedResourceError)


class StreamIO:
    """One connection's anyio byte stream; received bytes go to ``events``."""

    writes_at_once = False  # a write may wait for the socket: one writer at a time
    writable = True  # `write` waits for the socket itself

    def __init__(
        self, stream: anyio.abc.ByteStream, machine: ConnectionMachine, events: ConnectionEvents
    ) -> None:
        self.stream = stream
        self._machine = machine
        self._events = events
        self._read_lock = anyio.Lock()
        self._closed = False

    def now(self) -> float:
        return monotonic()

    def write_now(self, data: bytes) -> None:
        raise RuntimeError("an anyio stream is written with `write`")

    async def write(self, data: bytes, deadline: float) -> None:
        # A frame cut in half would desynchronise the stream: never cancel mid-write,
        # except at the request's own deadline (the connection then closes).
        with anyio.CancelScope(deadline=deadline, shield=True) as scope:
            await self.stream.send(data)
        if scope.cancelled_caught:
            raise TimeoutError

    async def wait(self, completion: Completion[Any]) -> None:
        await self._read_until(lambda: completion.done)
        if not completion.done:
            completion.fail(KafkaConnectionError(f"connection to {self._machine.peer} is closed"))

    async def read_in_flight(self) -> None:
        """Read until no request is in flight (or the connection closed)."""
        machine = self._machine
        await self._read_until(lambda: not machine.in_flight)

    async def _read_until(self, done: Callable[[], bool]) -> None:
        """Read (taking turns with other readers) until ``done()`` or the connection closed;
        report the deadlines of the requests in flight as they pass."""
        machine = self._machine
        lock = self._read_lock
        while not done():
            if machine.closed:
                return
            # until the earliest deadline in flight (this request's, or an earlier one)
            with anyio.CancelScope(deadline=_deadline(machine)) as scope:
                while not done() and not machine.closed:
                    if not _take(lock):
                        await lock.acquire()
                    try:
                        if not done() and not machine.closed:
                            await self._read_once()
                    finally:
                        lock.release()
            if scope.cancelled_caught:  # a request may be due: close if one is
                self._events.expire(monotonic())
                await self._close_if_needed()

    async def _read_once(self) -> None:
        try:
            data = await self.stream.receive(_READ_CHUNK)
        except anyio.EndOfStream:
            self._events.lost(None)
        except STREAM_ERRORS as exc:
            self._events.lost(exc)
        else:
            self._events.received(data, monotonic())
        await self._close_if_needed()

    async def _close_if_needed(self) -> None:
        if self._machine.closed and not self._closed:
            await self.aclose(0.5)

    def watch(self, deadline: float) -> None:
        return None  # the reader reads until the earliest deadline

    def abort(self) -> None:
        return None  # closed by the task that saw the machine close (`_close_if_needed`)

    async def aclose(self, grace: float) -> None:
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(grace):
                try:
                    await self.stream.aclose()
                except Exception:  # closing a broken stream may fail; it is closed anyway
                    pass
                return
            await anyio.aclose_forcefully(self.stream)

    def socket(self) -> Any:
        raw = self.stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
        if raw is None and isinstance(self.stream, TLSStream):
            raw = self.stream.transport_stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
        return raw


def _deadline(machine: ConnectionMachine) -> float:
    deadline = machine.next_deadline()
    return math.inf if deadline is None else deadline


def _take(lock: anyio.Lock) -> bool:
    """Take a free lock now (anyio's own ``acquire`` always yields once); False if taken."""
    try:
        lock.acquire_nowait()
    except anyio.WouldBlock:
        return False
    return True
