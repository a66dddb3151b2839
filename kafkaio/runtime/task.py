"""The task a client's network driver runs in: a task of its own, not the caller's.

A client's ``start()`` and ``close()`` may run in different tasks and under the caller's cancel
scopes (``anyio.move_on_after`` around ``close()``), so the client must not enter a task group
in the caller's task: it spawns one task (asyncio: ``loop.create_task``; trio: a system task)
that owns the driver's task group, and ``close()`` waits for it, shielded.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc

from kafkaio.asynclib import running_asyncio

log = logging.getLogger("kafkaio.runtime")

__all__ = ["ClientTask"]


class _Started:
    """The ``task_status`` handed to the function: ``started()`` wakes ``ClientTask.start``."""

    def __init__(self, event: anyio.Event) -> None:
        self._event = event

    def started(self, value: object = None) -> None:
        self._event.set()


class ClientTask:
    """Runs one ``fn(task_status=...)`` in a task of its own (see the module docstring).

    ``start`` returns once ``fn`` called ``task_status.started()`` (or ended); ``wait``
    returns once it ended, even from a cancelled caller. ``fn`` is expected to return when
    told to stop (e.g. ``NetworkDriver.stop``); what it raises is kept in ``error`` (and
    logged), never raised into the event loop.
    """

    def __init__(self) -> None:
        self._done = anyio.Event()
        self._task: asyncio.Task[None] | None = None  # kept: asyncio holds tasks weakly
        self.error: BaseException | None = None

    async def start(self, fn: Callable[..., Awaitable[None]]) -> None:
        started = anyio.Event()

        async def run() -> None:
            try:
                await fn(task_status=_Started(started))
            except BaseException as exc:  # a system task must not raise (trio ends the run)
                if not isinstance(exc, anyio.get_cancelled_exc_class()):
                    log.exception("a kafkaio client task failed")
                self.error = exc
            finally:
                started.set()
                self._done.set()

        if not running_asyncio():  # trio (anyio's other backend)
            import trio  # only when running under trio

            trio.lowlevel.spawn_system_task(run)
        else:
            self._task = asyncio.get_running_loop().create_task(run())
        with anyio.CancelScope(shield=True):
            await started.wait()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    async def wait(self) -> None:
        """Wait (shielded from the caller's cancellation) until the task has ended."""
        with anyio.CancelScope(shield=True):
            await self._done.wait()
