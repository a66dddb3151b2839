"""The network task's wake-up flag, on asyncio (futures) and trio (anyio Event)."""

from __future__ import annotations

import anyio
import pytest

from kafkaio.runtime.wakeup import Wakeup

BACKENDS = ["asyncio", "trio"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_wait_returns_when_set_from_another_task(backend: str) -> None:
    async def main() -> float:
        wakeup = Wakeup()
        async with anyio.create_task_group() as tg:

            async def setter() -> None:
                await anyio.sleep(0.05)
                wakeup.set()

            tg.start_soon(setter)
            start = anyio.current_time()
            await wakeup.wait(10.0)
            return anyio.current_time() - start

    waited = anyio.run(main, backend=backend)
    assert waited < 5.0  # woken by set(), not by the 10 s timeout


@pytest.mark.parametrize("backend", BACKENDS)
def test_wait_times_out_and_the_flag_stays_clear(backend: str) -> None:
    async def main() -> bool:
        wakeup = Wakeup()
        await wakeup.wait(0.02)
        return wakeup.is_set()

    assert anyio.run(main, backend=backend) is False


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_set_before_wait_is_not_lost_until_cleared(backend: str) -> None:
    async def main() -> tuple[bool, bool]:
        wakeup = Wakeup()
        wakeup.set()
        wakeup.set()  # idempotent
        with anyio.fail_after(5):
            await wakeup.wait(10.0)  # returns at once
        before = wakeup.is_set()
        wakeup.clear()
        await wakeup.wait(0.01)
        return before, wakeup.is_set()

    assert anyio.run(main, backend=backend) == (True, False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cancelled_wait_leaves_no_waiter_behind(backend: str) -> None:
    async def main() -> bool:
        wakeup = Wakeup()
        with anyio.move_on_after(0.02):
            await wakeup.wait(10.0)
        wakeup.set()  # nobody waits: must not fail
        return wakeup.is_set()

    assert anyio.run(main, backend=backend) is True


def test_set_from_a_loop_callback_outside_any_task() -> None:
    import asyncio

    async def main() -> None:
        wakeup = Wakeup()
        asyncio.get_running_loop().call_later(0.02, wakeup.set)
        await asyncio.wait_for(wakeup.wait(10.0), 5)

    asyncio.run(main())
