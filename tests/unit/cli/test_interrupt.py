"""Ctrl-C handling of the long-running commands: SIGINT cancels only the block (which then
ends with .interrupted set), errors come out unwrapped, and the handler is removed after."""

from __future__ import annotations

import signal

import anyio
import pytest

from kafkaio.cli.interrupt import interruptible


async def test_sigint_cancels_only_the_block() -> None:
    reached_end = False
    with anyio.fail_after(5):
        async with interruptible() as interrupt:
            signal.raise_signal(signal.SIGINT)
            await anyio.sleep(3)
            reached_end = True
    assert interrupt.interrupted and not reached_end
    await anyio.sleep(0)  # this task is not cancelled: cleanup can still await


async def test_block_that_ends_is_not_interrupted_and_errors_are_unwrapped() -> None:
    before = signal.getsignal(signal.SIGINT)
    async with interruptible() as interrupt:
        await anyio.sleep(0)
    assert not interrupt.interrupted
    with pytest.raises(KeyError, match="boom"):
        async with interruptible():
            raise KeyError("boom")
    assert signal.getsignal(signal.SIGINT) == before  # the handler from before is back
