"""Memory accounting for backpressure: records reserve bytes until their batch completes.

``try_reserve``/``release`` are plain arithmetic; ``reserve`` waits on an anyio Event (never polls).
"""

from __future__ import annotations

import math

import anyio

from kafkaio.errors import KafkaTimeoutError


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
        self._released: anyio.Event | None = None  # made by the first waiter

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
        if self.waiters and self._released is not None:
            event, self._released = self._released, anyio.Event()
            event.set()

    async def reserve(self, size: int, timeout_ms: float = math.inf) -> None:
        """Reserve ``size`` bytes, waiting up to ``timeout_ms`` for them to be released."""
        if self.try_reserve(size):
            return
        if self._released is None:
            self._released = anyio.Event()
        self.waiters += 1
        try:
            with anyio.move_on_after(timeout_ms / 1000.0) as scope:
                while self.used + size > self.limit:
                    await self._released.wait()
        finally:
            self.waiters -= 1
        if scope.cancelled_caught:
            raise KafkaTimeoutError(
                f"no room for a {size}-byte record in buffer_memory ({self.limit} bytes, "
                f"{self.used} in use) within max_block_ms ({timeout_ms:g} ms): the brokers "
                "are not acknowledging fast enough. Slow down, or raise buffer_memory or "
                "max_block_ms"
            )
        self.used += size
