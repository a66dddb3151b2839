"""Ctrl-C for the long-running commands: SIGINT cancels only the command's work, so the
command can still flush, commit and close its clients before it exits with code 130."""

from __future__ import annotations

import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import anyio.abc

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup  # type: ignore[import-not-found]


@dataclass(slots=True)
class Interrupt:
    """Whether Ctrl-C stopped the work of an ``interruptible()`` block."""

    interrupted: bool = False


@asynccontextmanager
async def interruptible() -> AsyncIterator[Interrupt]:
    """Run the block until it ends or SIGINT arrives; SIGINT cancels the block, which then
    ends normally with ``.interrupted`` set. Outside the main thread (no signal handler can
    be installed) the block simply runs. An error in the block is raised as itself."""
    state = Interrupt()
    try:
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as body:
                await tg.start(_watch_sigint, body, state)
                yield state
            tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:  # the block's own error, wrapped by the task group
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


async def _watch_sigint(
    body: anyio.CancelScope,
    state: Interrupt,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    previous = signal.getsignal(signal.SIGINT)
    try:
        receiver = anyio.open_signal_receiver(signal.SIGINT)
        signals = receiver.__enter__()
    except (ValueError, RuntimeError, NotImplementedError):  # not the main thread
        task_status.started()
        return
    try:
        task_status.started()
        async for _ in signals:
            state.interrupted = True
            body.cancel()
            return
    finally:  # the handler from before is back (asyncio's: a second Ctrl-C stops at once)
        receiver.__exit__(None, None, None)
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
