"""MemoryBudget: reservations are bounded; waiters wake when memory is released. The waits
run on asyncio (loop futures) and trio (anyio Event)."""

from __future__ import annotations

import anyio
import pytest

from kafkaio.errors import KafkaTimeoutError
from kafkaio.producer.memory import MemoryBudget

BACKENDS = ["asyncio", "trio"]


def test_try_reserve_is_bounded() -> None:
    m = MemoryBudget(100)
    assert m.try_reserve(60)
    assert not m.try_reserve(50)
    assert m.try_reserve(40)
    assert m.available == 0
    m.release(100)
    assert m.used == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_reserve_waits_for_release(backend: str) -> None:
    async def main() -> tuple[list[int], int]:
        m = MemoryBudget(100)
        assert m.try_reserve(100)
        got: list[int] = []

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
        return got, m.waiters

    assert anyio.run(main, backend=backend) == ([90], 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_waiter_gets_its_turn(backend: str) -> None:
    async def main() -> tuple[list[str], int]:
        m = MemoryBudget(100)
        assert m.try_reserve(100)
        got: list[str] = []

        async def waiter(name: str, size: int) -> None:
            await m.reserve(size, timeout_ms=10_000)
            got.append(name)

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter, "a", 50)
            tg.start_soon(waiter, "b", 50)
            await anyio.wait_all_tasks_blocked()
            m.release(100)
        return sorted(got), m.used

    assert anyio.run(main, backend=backend) == (["a", "b"], 100)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reserve_times_out(backend: str) -> None:
    async def main() -> tuple[int, int]:
        m = MemoryBudget(10)
        assert m.try_reserve(10)
        with pytest.raises(KafkaTimeoutError, match="buffer_memory"):
            await m.reserve(5, timeout_ms=10)
        return m.used, m.waiters

    assert anyio.run(main, backend=backend) == (10, 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cancelled_wait_reserves_nothing(backend: str) -> None:
    async def main() -> tuple[int, int]:
        m = MemoryBudget(10)
        assert m.try_reserve(10)
        with anyio.move_on_after(0.01):
            await m.reserve(5)
        m.release(10)  # nobody waits any more: nothing is reserved for the cancelled wait
        return m.used, m.waiters

    assert anyio.run(main, backend=backend) == (0, 0)
