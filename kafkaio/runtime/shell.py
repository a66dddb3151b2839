"""The client shell: what every kafkaio client is made of, and its one lifecycle.

Producer, Consumer, ShareConsumer and Admin each hold a `ClientShell`: the connection manager,
the network driver running the client's request managers in a task of its own
(`ClientTask`, so ``start()`` and ``close()`` may run in different tasks and under the
caller's cancel scopes), the wait for cluster metadata at start, and close. The contract is
the same for every client:

- ``start()`` once; a second start raises KafkaError. When no broker answers metadata within
  the start deadline it raises `BootstrapError` (a KafkaConnectionError and a
  KafkaTimeoutError, so code written against either catches it) after releasing everything.
  A fatal error (a refused login, a rejected certificate) is raised as it is.
- ``close(timeout_ms=...)`` runs the client's orderly steps (flush, leave the group, send
  acknowledgements) for at most ``timeout_ms`` while the network task still runs, then stops
  the task and closes every connection, whatever happened (also when the caller is
  cancelled). Closing twice is harmless: a second caller waits for the first close to end.
- After close, calls raise ClientClosedError.
"""

from __future__ import annotations

import enum
import logging
import math
import warnings
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import TypeVar

import anyio
import anyio.abc

from kafkaio.errors import BootstrapError, ClientClosedError, KafkaError, KafkaTimeoutError
from kafkaio.metadata.manager import MetadataManager
from kafkaio.metrics import ConnectionHealth
from kafkaio.metrics.connection import ConnectionMetrics
from kafkaio.net.config import ConnectionConfig
from kafkaio.net.manager import ConnectionManager
from kafkaio.runtime.driver import NetworkDriver
from kafkaio.runtime.requests import RequestManager
from kafkaio.runtime.task import ClientTask
from kafkaio.validate import check_wait_ms

__all__ = [
    "DEFAULT_CLOSE_TIMEOUT_MS",
    "AsyncClient",
    "ClientShell",
    "Lifecycle",
    "timeout_ms_arg",
]

# How long a consumer's close() may take by default (Java's DEFAULT_CLOSE_TIMEOUT_MS)
DEFAULT_CLOSE_TIMEOUT_MS = 30_000.0

log = logging.getLogger("kafkaio.runtime")


_C = TypeVar("_C", bound="AsyncClient")


class AsyncClient:
    """``async with client:`` for every client: start on entry, close on exit.

    When the body raised, an error from close is logged rather than raised over the body's
    own exception (which is the one the caller needs to see)."""

    async def start(self) -> None:
        raise NotImplementedError

    async def close(self, timeout_ms: float | None = None) -> None:
        raise NotImplementedError

    async def __aenter__(self: _C) -> _C:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self.close()
        except Exception as error:
            if exc is None:
                raise
            log.warning("closing %s after %r: %r", type(self).__name__, exc, error)


class Lifecycle(enum.Enum):
    """Where a client is in its life (``health().state`` reports it)."""

    NEW = "new"  # created, not started
    STARTING = "starting"  # start() is connecting and loading metadata
    RUNNING = "running"
    CLOSING = "closing"  # close() is running its steps or stopping the network task
    CLOSED = "closed"


def timeout_ms_arg(
    timeout_ms: float | None, timeout: float | None, default_ms: float | None, call: str
) -> float | None:
    """The ``timeout_ms`` of ``call`` (e.g. "Producer.close"), accepting the deprecated
    ``timeout`` in seconds some clients take; None means `default_ms`."""
    method = call.rpartition(".")[2]
    if timeout is not None:
        warnings.warn(
            f"{call}(timeout=...) in seconds is deprecated; use {method}(timeout_ms=...)",
            DeprecationWarning,
            stacklevel=3,
        )
        if timeout_ms is None:
            timeout_ms = timeout * 1000.0
    if timeout_ms is None:
        return default_ms
    check_wait_ms(timeout_ms, f"{call}()")
    return float(timeout_ms)


class ClientShell:
    """One client's connections, network task and lifecycle (see the module docstring).

    ``kind`` names the client in messages ("producer", "consumer", ...). With no
    ``managers`` and no ``metadata`` there is no network task (the Admin client talks to
    connections directly).
    """

    def __init__(
        self,
        kind: str,
        bootstrap_servers: str | Sequence[str],
        conn_config: ConnectionConfig,
        *,
        metadata: MetadataManager | None = None,
        managers: Sequence[RequestManager] = (),
        extra_nodes: Callable[[], dict[int, tuple[str, int]]] | None = None,
        conn_metrics: ConnectionMetrics | None = None,
        on_task_end: Callable[[BaseException | None], None] | None = None,
        connections: ConnectionManager | None = None,
    ) -> None:
        self.kind = kind
        self.bootstrap_servers = bootstrap_servers
        self.conn_config = conn_config
        self.metadata = metadata
        self.managers = list(managers)
        self._extra_nodes = extra_nodes
        self._conn_metrics = conn_metrics
        self._on_task_end = on_task_end
        self.state = Lifecycle.NEW
        # made by start(), unless the client made them (the Admin client, which uses them
        # directly)
        self.connections: ConnectionManager | None = connections
        self.driver: NetworkDriver | None = None
        self._task: ClientTask | None = None
        self._closed: anyio.Event | None = None

    # -- state ----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Started, not closing, and its network task (if any) is alive."""
        if self.state is not Lifecycle.RUNNING:
            return False
        return self.driver is None or self.driver.running

    @property
    def task_alive(self) -> bool:
        """The network task runs (also while close() runs the client's steps)."""
        return self.driver is not None and self.driver.running

    @property
    def closed(self) -> bool:
        return self.state in (Lifecycle.CLOSING, Lifecycle.CLOSED)

    def check(self, *, closing_ok: bool = False) -> NetworkDriver:
        """The running network task; raises what a call on this client should raise now.
        With ``closing_ok`` calls still work while close() runs its steps (a rebalance
        listener may commit while the consumer leaves its group)."""
        if self.state is Lifecycle.CLOSED or (self.closed and not closing_ok):
            raise ClientClosedError(f"the {self.kind} is closed; create a new one")
        driver = self.driver
        if driver is None or self.state is Lifecycle.NEW:
            raise KafkaError(
                f"the {self.kind} is not started; use `async with` or await start() first"
            )
        driver.check()
        return driver

    def wakeup(self) -> None:
        if self.driver is not None:
            self.driver.wakeup()

    # -- start ----------------------------------------------------------------------------

    async def start(
        self,
        timeout_ms: float,
        connect: Callable[[ConnectionManager], Awaitable[None]] | None = None,
    ) -> None:
        """Create the connections and the network task, and wait up to `timeout_ms` for
        cluster metadata (or run `connect` with the connections, for a client without a
        network task). Raises BootstrapError when no broker answered in time."""
        if self.state is not Lifecycle.NEW:
            raise KafkaError(f"a {self.kind} can be started once; make a new one")
        self.state = Lifecycle.STARTING
        self._closed = anyio.Event()
        if self.connections is None:
            self.connections = ConnectionManager(
                self.bootstrap_servers, self.conn_config, metrics=self._conn_metrics
            )
        try:
            if self.metadata is not None:
                await self._start_driver(timeout_ms)
            if connect is not None:
                with anyio.fail_after(timeout_ms / 1000.0 if timeout_ms < math.inf else None):
                    await connect(self.connections)
        except (TimeoutError, KafkaTimeoutError) as exc:
            cause: BaseException | None = None
            if isinstance(exc, KafkaTimeoutError):
                cause = exc
            elif self.metadata is not None:
                cause = self.metadata.last_error
            await self._shutdown()
            raise self._bootstrap_error(timeout_ms, cause) from cause
        except BaseException:
            await self._shutdown()
            raise
        self.state = Lifecycle.RUNNING

    async def _start_driver(self, timeout_ms: float) -> None:
        assert self.connections is not None and self.metadata is not None
        io_wait = self._conn_metrics.io_wait if self._conn_metrics is not None else None
        self.driver = NetworkDriver(
            self.connections,
            self.metadata,
            self.managers,
            extra_nodes=self._extra_nodes,
            io_wait=io_wait,
        )
        self._task = ClientTask()
        await self._task.start(self._run_driver)
        with anyio.move_on_after(timeout_ms / 1000.0):
            await self.driver.wait_for_metadata(0)  # raises a fatal error as it is
        if self.metadata.version == 0:
            raise TimeoutError

    async def _run_driver(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        driver = self.driver
        assert driver is not None
        try:
            await driver.run(task_status=task_status)
        finally:
            if self._on_task_end is not None:
                self._on_task_end(driver.fatal_error)

    def _bootstrap_error(self, timeout_ms: float, cause: BaseException | None) -> BootstrapError:
        return BootstrapError(
            f"the {self.kind} got no cluster metadata from {self.bootstrap_servers!r} within "
            f"{timeout_ms:g} ms (last error: {cause or 'none'}); check bootstrap_servers and "
            "that the brokers are up and reachable"
        )

    # -- close ----------------------------------------------------------------------------

    async def close(
        self,
        timeout_ms: float | None,
        steps: Callable[[], Awaitable[None]] | None = None,
        finish: Callable[[], None] | None = None,
    ) -> None:
        """Run `steps` (the client's orderly shutdown) and then the network task's close
        phase (the request managers' last requests: NetworkDriver.close), together for at
        most `timeout_ms` (None: no limit), then `finish` (what must happen even when they
        did not end, e.g. failing undelivered records), then stop the network task and close
        every connection. Shielded from the caller's cancellation after the steps."""
        if self.state is Lifecycle.NEW:
            self.state = Lifecycle.CLOSED
            return
        if self.closed:
            if self._closed is not None:
                with anyio.CancelScope(shield=True):
                    await self._closed.wait()
            return
        running = self.running
        self.state = Lifecycle.CLOSING
        try:
            if running:
                seconds = None if timeout_ms is None else timeout_ms / 1000.0
                with anyio.move_on_after(seconds) as scope:
                    if steps is not None:
                        await steps()
                    if self.driver is not None:  # the managers' last requests (pollOnClose)
                        await self.driver.close(None)
                if scope.cancelled_caught:
                    log.warning(
                        "closing the %s: its orderly steps did not finish within %g ms",
                        self.kind,
                        timeout_ms,
                    )
        finally:
            try:
                if finish is not None:
                    finish()
            finally:
                await self._shutdown()

    async def _shutdown(self) -> None:
        """Stop the network task and close every connection (shielded); CLOSED after."""
        with anyio.CancelScope(shield=True):
            try:
                if self.driver is not None:
                    self.driver.stop()
                task, self._task = self._task, None
                if task is not None:
                    await task.wait()
                if self.connections is not None:
                    await self.connections.close()
            finally:
                self.state = Lifecycle.CLOSED
                if self._closed is not None:
                    self._closed.set()

    def connection_states(self) -> list[ConnectionHealth]:
        """Each connection's health (for health snapshots); [] before start."""
        return [] if self.connections is None else self.connections.connection_states()
