"""Memory accounting for backpressure: records reserve bytes until their batch completes.

``try_reserve``/``release`` are plain arithmetic; ``reserve`` waits (never polls) on a loop
future and timer on asyncio (an application blocked on a full buffer waits once per batch
the brokers acknowledge, so the wait is on the producer's hot path), on an anyio Event
elsewhere (trio).
"""

from __future__ import annotations

import asyncio
import math

import anyio

from kafkaio.errors import KafkaTimeoutError
from kafkaio.runtime.wakeup import release as release_waiter


class MemoryBudget:
    """At most ``limit`` bytes of records may wait in the producer at once.

    A record reserves its size when enqueued and gives it back when its batch is delivered
    or failed. When the budget is spent, ``reserve`` waits (first come, first served) until
    enough is released; the accumulator treats batches as ready while anyone waits, so
    memory is freed as fast as the brokers allow.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.waiters = 0
        self._futures: list[asyncio.Future[None]] = []  # asyncio waiters
        self._released: anyio.Event | None = None  # other backends: made by the first waiter

    @property
    def available(self) -> int:
        return self.limit - self.used

    def try_reserve(self, size: int) -> bool:
        """Reserve ``size`` bytes now if they are free and nobody waits before us."""
        if self.waiters or self.used + size > self.limit:
            return False
        self.used += size
        return True

    def release(self, size: int) -> None:
        self.used -= size
        if not self.waiters:
            return
        if self._futures:
            futures, self._futures = self._futures, []
            for future in futures:
                release_waiter(future)
        if self._released is not None:
            event, self._released = self._released, anyio.Event()
            event.set()

    async def reserve(self, size: int, timeout_ms: float = math.inf) -> None:
        """Reserve ``size`` bytes, waiting up to ``timeout_ms`` for them to be released."""
        if self.try_reserve(size):
            return
        self.waiters += 1
        try:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # not asyncio
                fits = await self._wait_anyio(size, timeout_ms)
            else:
                fits = await self._wait_asyncio(loop, size, timeout_ms)
        finally:
            self.waiters -= 1
        if not fits:
            raise KafkaTimeoutError(
                f"no room for a {size}-byte record in buffer_memory ({self.limit} bytes, "
                f"{self.used} in use) within max_block_ms ({timeout_ms:g} ms): the brokers "
                "are not acknowledging fast enough. Slow down, or raise buffer_memory or "
                "max_block_ms"
            )
        self.used += size

    async def _wait_asyncio(
        self, loop: asyncio.AbstractEventLoop, size: int, timeout_ms: float
    ) -> bool:
        """Wait until ``size`` bytes fit; False if ``timeout_ms`` passed first."""
        deadline = loop.time() + timeout_ms / 1000.0
        while self.used + size > self.limit:
            if loop.time() >= deadline:
                return False
            waiter: asyncio.Future[None] = loop.create_future()
            self._futures.append(waiter)
            timer = None if math.isinf(deadline) else loop.call_at(deadline, release_waiter, waiter)
            try:
                await waiter
            finally:
                if timer is not None:
                    timer.cancel()
        return True

    async def _wait_anyio(self, size: int, timeout_ms: float) -> bool:
        if self._released is None:
            self._released = anyio.Event()
        with anyio.move_on_after(timeout_ms / 1000.0):
            while self.used + size > self.limit:
                await self._released.wait()
            return True
        return False
