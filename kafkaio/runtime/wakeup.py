"""A flag a task sleeps on: the network task (set by application events, responses and
callbacks) and the consumer's poll waiting for records.

A resettable anyio.Event with a timeout, cheaper on asyncio (one loop future and one timer
per sleep instead of a new anyio Event and cancel scope), and safe to set from a transport
callback that runs outside any task.
"""

from __future__ import annotations

import asyncio

import anyio


def release(waiter: asyncio.Future[None]) -> None:
    """Complete a loop-future waiter unless it is done (cancelled, or already released)."""
    if not waiter.done():
        waiter.set_result(None)


class Wakeup:
    """``set()`` wakes ``wait()``; the flag stays set until ``clear()``."""

    __slots__ = ("_set", "_waiter", "_event")

    def __init__(self) -> None:
        self._set = False
        self._waiter: asyncio.Future[None] | None = None  # asyncio
        self._event: anyio.Event | None = None  # other backends (trio)

    def set(self) -> None:
        if self._set:
            return
        self._set = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if self._event is not None:
            self._event.set()

    def is_set(self) -> bool:
        return self._set

    def clear(self) -> None:
        self._set = False

    async def wait(self, timeout_s: float) -> None:
        """Return when the flag is set, or after ``timeout_s`` seconds."""
        if self._set:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not asyncio
            self._event = anyio.Event()
            try:
                with anyio.move_on_after(timeout_s):
                    await self._event.wait()
            finally:
                self._event = None
            return
        waiter: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(timeout_s, release, waiter)
        self._waiter = waiter
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None
