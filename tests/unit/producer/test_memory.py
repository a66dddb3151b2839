"""MemoryBudget: reservations are bounded; waiters wake when memory is released."""

from __future__ import annotations

import anyio
import pytest

from kafkaio.errors import KafkaTimeoutError
from kafkaio.producer.memory import MemoryBudget


def test_try_reserve_is_bounded() -> None:
    m = MemoryBudget(100)
    assert m.try_reserve(60)
    assert not m.try_reserve(50)
    assert m.try_reserve(40)
    assert m.available == 0
    m.release(100)
    assert m.used == 0


async def test_reserve_waits_for_release() -> None:
    m = MemoryBudget(100)
    assert m.try_reserve(100)
    got = []

    async def waiter() -> None:
        await m.reserve(30)
        got.append(m.used)

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        assert m.waiters == 1 and got == []
        assert not m.try_reserve(1)  # nobody jumps the queue
        m.release(20)  # not enough
        await anyio.wait_all_tasks_blocked()
        assert got == []
        m.release(20)
    assert got == [90]
    assert m.waiters == 0


async def test_reserve_times_out() -> None:
    m = MemoryBudget(10)
    assert m.try_reserve(10)
    with pytest.raises(KafkaTimeoutError, match="buffer_memory"):
        await m.reserve(5, timeout_ms=10)
    assert m.used == 10 and m.waiters == 0
