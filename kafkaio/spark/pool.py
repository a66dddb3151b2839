"""Clients kept per Python process: one event loop thread, and idle Admins, Consumers and
Producers that later tasks of the same settings reuse (as Spark's Kafka connector caches its
consumers and producers per executor), so a task does not pay for connecting and fetching
metadata again: short micro-batches and many small tasks are the cases it matters for.

Spark reuses its Python workers between tasks (``spark.python.worker.reuse``, on by
default); the driver's streaming planner is one long-lived process too. A client that
raised is closed, not kept; idle clients are closed after ``IDLE_TIMEOUT_S`` (Spark's cache
timeout is 5 minutes too) and when the process exits. A consumer is handed back
assigned to its partition and position: the next task reading on from there (the next
micro-batch of that partition) keeps the records it had fetched ahead.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import anyio.abc
from anyio.from_thread import BlockingPortal

from kafkaio.admin import Admin
from kafkaio.consumer import Consumer
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.producer import Producer
from kafkaio.spark.settings import ClientSettings

log = logging.getLogger("kafkaio.spark")

T = TypeVar("T")
IDLE_TIMEOUT_S = 300.0
MAX_IDLE_PER_KEY = 2  # idle clients of one kind and settings (consumers: of one partition)
MAX_IDLE = 64  # idle clients in all (Spark's consumer cache holds 64 too)
SOURCE_FETCH_MAX_WAIT_MS = 50


class _Runtime:
    """A daemon thread running an anyio event loop, reached through a BlockingPortal."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        ready: queue.Queue[BlockingPortal | BaseException] = queue.Queue()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="kafkaio-spark", daemon=True
        )
        self._thread.start()
        got = ready.get()
        if isinstance(got, BaseException):
            raise got
        self.portal = got
        self.tasks: anyio.abc.TaskGroup = self._tasks
        self._idle: dict[tuple[str, str], list[tuple[float, Any]]] = {}
        self._lock = threading.Lock()

    def _run(self, ready: queue.Queue[BlockingPortal | BaseException]) -> None:
        async def main() -> None:
            async with BlockingPortal() as portal, anyio.create_task_group() as tasks:
                self._tasks = tasks
                ready.put(portal)
                await portal.sleep_until_stopped()
                tasks.cancel_scope.cancel()

        try:
            anyio.run(main)
        except BaseException as exc:  # pragma: no cover - the loop could not start
            ready.put(exc)

    def take(self, key: tuple[str, str]) -> tuple[Any, list[Any]]:
        """The most recently used idle client of `key` (or None), and the expired ones of
        every key (to close)."""
        now = time.monotonic()
        with self._lock:
            expired = []
            for idle in self._idle.values():
                expired += [c for t, c in idle if now - t > IDLE_TIMEOUT_S]
                idle[:] = [(t, c) for t, c in idle if now - t <= IDLE_TIMEOUT_S]
            mine = self._idle.get(key)
            client = mine.pop()[1] if mine else None
        return client, expired

    def give(self, key: tuple[str, str], client: Any) -> list[Any]:
        """Keep `client` idle; returns the clients to close when there are too many (the
        least recently used)."""
        with self._lock:
            self._idle.setdefault(key, []).append((time.monotonic(), client))
            surplus = []
            idle = self._idle[key]
            while len(idle) > MAX_IDLE_PER_KEY:
                surplus.append(idle.pop(0)[1])
            entries = sorted(
                ((t, k, c) for k, v in self._idle.items() for t, c in v), key=lambda e: e[0]
            )
            for _, k, c in entries[: max(0, len(entries) - MAX_IDLE)]:
                self._idle[k] = [(t, x) for t, x in self._idle[k] if x is not c]
                surplus.append(c)
        return surplus

    def close(self) -> None:
        with self._lock:
            clients = [c for idle in self._idle.values() for _, c in idle]
            self._idle.clear()

        async def close_all() -> None:
            await _close_quietly(clients)

        with contextlib.suppress(Exception):
            self.portal.call(close_all)
            self.portal.call(self.portal.stop)


_runtime: _Runtime | None = None
_runtime_lock = threading.Lock()


def runtime() -> _Runtime:
    """This process's runtime (a forked child starts its own)."""
    global _runtime
    with _runtime_lock:
        if _runtime is None or _runtime.pid != os.getpid():
            _runtime = _Runtime()
            atexit.register(_runtime.close)
        return _runtime


def blocking(fn: Callable[..., Awaitable[T]], *args: object) -> T:
    """Run ``fn(*args)`` on the process's event loop and wait for it (from Spark's
    synchronous calls)."""
    return runtime().portal.call(fn, *args)


def _key(kind: str, settings: ClientSettings) -> tuple[str, str]:
    options = sorted((k, repr(v)) for k, v in settings.options.items())
    return kind, repr((settings.bootstrap_servers, options, settings.ssl_files))


class _Owned:
    """A client entered (``async with``) by a task of its own on the runtime's task group, so
    that tasks borrowing it may come and go; ``close()`` makes that task leave it."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._stop = anyio.Event()
        self._done = anyio.Event()

    async def start(self, tasks: anyio.abc.TaskGroup) -> None:
        await tasks.start(self._own)

    async def _own(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        started = False
        try:
            async with self.client:
                task_status.started()
                started = True
                await self._stop.wait()
        except Exception as exc:
            if not started:
                raise  # start() failed: the borrower gets the error
            log.debug("closing a pooled client failed: %r", exc)
        finally:
            self._done.set()

    async def close(self) -> None:
        self._stop.set()
        await self._done.wait()


async def _close_quietly(handles: list[_Owned]) -> None:
    with anyio.CancelScope(shield=True):
        for handle in handles:
            await handle.close()


@asynccontextmanager
async def _borrow(
    kind: str,
    settings: ClientSettings,
    make: Callable[[], Any],
    scope: str = "",
    *,
    on_take: Callable[[Any], None] = lambda _: None,
    on_give: Callable[[Any], None] = lambda _: None,
) -> AsyncIterator[Any]:
    rt = runtime()
    key = (kind, _key(kind, settings)[1] + scope)
    handle, expired = rt.take(key)
    await _close_quietly(expired)
    if handle is None:
        handle = _Owned(make())
        await handle.start(rt.tasks)
    else:
        on_take(handle.client)
    try:
        yield handle.client
        on_give(handle.client)
    except BaseException:
        await _close_quietly([handle])
        raise
    await _close_quietly(rt.give(key, handle))


def admin(settings: ClientSettings) -> contextlib.AbstractAsyncContextManager[Admin]:
    """A started Admin of `settings`, returned to the pool afterwards."""
    return _borrow(
        "admin",
        settings,
        lambda: Admin(
            settings.bootstrap_servers, client_id="kafkaio-spark", **settings.admin_options()
        ),
    )


def consumer(
    settings: ClientSettings, tp: TopicPartition
) -> contextlib.AbstractAsyncContextManager[Consumer]:
    """A started Consumer of `settings` (no group, no auto reset) for reading `tp`: one per
    partition, as Spark's connector keys its cache. An idle one is paused (no fetches while
    no task reads; what it had fetched is kept), and resumed when a task borrows it. Unless
    kafka.fetch.max.wait.ms says otherwise, the broker may hold a fetch 50 ms (not Kafka's
    500): a task only asks for offsets that exist, and a seek waits for the fetch in flight.
    """
    options: dict[str, Any] = {
        "client_id": "kafkaio-spark",
        "fetch_max_wait_ms": SOURCE_FETCH_MAX_WAIT_MS,
        **settings.consumer_options(),
    }
    options["auto_offset_reset"] = "none"
    return _borrow(
        "consumer",
        settings,
        lambda: Consumer(bootstrap_servers=settings.bootstrap_servers, **options),
        f" {tp.topic} {tp.partition}",
        on_take=lambda c: c.resume(*c.assignment()),
        on_give=lambda c: c.pause(*c.assignment()),
    )


def producer(
    settings: ClientSettings, extra: dict[str, Any] | None = None
) -> contextlib.AbstractAsyncContextManager[Producer]:
    """A started Producer of `settings` (+ `extra` options, part of the pool's key)."""
    options: dict[str, Any] = {
        "client_id": "kafkaio-spark",
        **settings.producer_options(),
        **(extra or {}),
    }
    key_settings = ClientSettings(
        settings.bootstrap_servers, {**settings.options, **(extra or {})}, settings.ssl_files
    )
    return _borrow(
        "producer", key_settings, lambda: Producer(settings.bootstrap_servers, **options)
    )
