"""The I/O driver: the one task that runs sans-I/O request managers against real connections.

Each turn of the loop (`run_once`) polls every manager at the current time, sends what they
ask for, and then sleeps until the earliest time a manager asked to be polled again, or until
a response, a failure or an application event wakes it (`wakeup`).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
import anyio.abc
import anyio.lowlevel

from kafkaio.asynclib import enter_asyncio_callback, exit_asyncio_callback, running_asyncio
from kafkaio.clock import monotonic
from kafkaio.errors import KafkaError, UnsupportedVersionError
from kafkaio.metadata.manager import MetadataManager
from kafkaio.net.manager import ConnectionManager
from kafkaio.runtime.completion import Completion
from kafkaio.runtime.requests import ClosingRequestManager, RequestManager, UnsentRequest
from kafkaio.runtime.wakeup import Wakeup

if TYPE_CHECKING:
    from kafkaio.metrics.sensor import Sensor
    from kafkaio.net.connection import Connection

log = logging.getLogger("kafkaio.runtime")

R = TypeVar("R")

# Extra node addresses (e.g. the group coordinator's own connection id) to keep registered.
NodeAddresses = Mapping[int, tuple[str, int]]

# Upper bound of one sleep, so a lost wake-up can never stall the loop for long.
MAX_IDLE_MS = 1000.0


def now_ms() -> float:
    """The driver's clock: anyio's monotonic time in milliseconds."""
    return monotonic() * 1000.0


class DriverStoppedError(KafkaError):
    """The client's network task has stopped (the client was closed, or a bug stopped it)."""


class NetworkDriver:
    """Runs `managers` (and the metadata manager) against `connections` in one task.

    Start it with ``await task_group.start(driver.run)``; stop it with `stop`. Every request
    goes to its connection one way (`_dispatch`, `_submit`: ``Connection.submit``, which
    never waits); a task is started only to open a connection (`_connect`). Application
    code never calls managers while a request is being handled: handlers are plain
    synchronous functions that run on the same event loop: from event-loop callbacks on
    asyncio, in the network task's loop on trio.
    """

    def __init__(
        self,
        connections: ConnectionManager,
        metadata: MetadataManager,
        managers: Sequence[RequestManager] = (),
        *,
        extra_nodes: Callable[[], NodeAddresses] | None = None,
        io_wait: Sensor | None = None,
    ) -> None:
        self.connections = connections
        self.metadata = metadata
        self._managers: list[RequestManager] = [metadata, *managers]
        # per manager: when (ms) its last poll asked to be polled again
        self._due = [-math.inf] * len(self._managers)
        # per manager: its handlers change no other manager (RequestManager.self_contained)
        self._contained = [getattr(m, "self_contained", False) is True for m in self._managers]
        # ``extra_nodes()`` is merged into every node table published to `connections`, so
        # synthetic ids (the group coordinator's connection) survive metadata updates
        self._extra_nodes = extra_nodes
        self._published_extra: dict[int, tuple[str, int]] = {}
        self._wake = Wakeup()
        # when the main loop's current sleep ends (ms; -inf while it is not sleeping)
        self._sleep_until = -math.inf
        self._metadata_event = anyio.Event()
        self._metadata_version = metadata.version
        self._stopping = False
        self._running = False
        self._fatal: BaseException | None = None
        # the last connection set-up error retrying cannot fix (credentials refused, a TLS
        # certificate rejected): the next application call raises it (once)
        self._setup_error: KafkaError | None = None
        self._logged_setup_error = ""  # logged at ERROR once, until the cause changes
        self._tg: anyio.abc.TaskGroup | None = None
        self._asyncio = True  # handlers run from event-loop callbacks (else in the loop)
        # per node (None: any node): requests waiting for a connection to be opened, in
        # the order they were made; later ones to the node line up behind them. Once it is
        # open they go to it, which keeps that order (the producer relies on it when
        # several batches of a partition are in flight)
        self._waiting: dict[int | None, list[UnsentRequest[Any]]] = {}
        self._connecting: set[int | None] = set()  # nodes whose set-up task runs
        self._done: list[tuple[UnsentRequest[Any], Completion[Any]]] = []  # see _on_completion
        # seconds the loop sleeps waiting for work, recorded once per sleep (io-wait-*)
        self._io_wait = io_wait
        # the close phase (`close`): managers' poll_on_close instead of poll, until done
        self._closing = False
        self._close_done: anyio.Event | None = None

    # -- control --------------------------------------------------------------------------

    def wakeup(self) -> None:
        """Make the loop run again now (after an application event or a response)."""
        self._wake.set()

    @property
    def running(self) -> bool:
        return self._running

    @property
    def fatal_error(self) -> BaseException | None:
        """The error that stopped the driver, if one did."""
        return self._fatal

    def check(self) -> None:
        """Raise if the driver is not running (for application-side calls), or (once) the
        error that kept it from connecting (SaslAuthenticationFailedError,
        SslAuthenticationError...): the network task goes on, and the connection is tried
        again after a backoff when a call needs it, as Java's clients do."""
        error = self._setup_error
        if error is not None and self._fatal is None and self._running:
            self._setup_error = None  # raised once, as Java's clients do: the next call retries
            raise _copy_error(error)
        if self._fatal is not None:
            raise DriverStoppedError(f"the client's network task failed: {self._fatal!r}") from (
                self._fatal
            )
        if not self._running:
            raise DriverStoppedError(
                "the client is not started or already closed; use `async with` or start()"
            )

    def stop(self) -> None:
        self._stopping = True
        self.wakeup()

    async def close(self, timeout_s: float | None) -> None:
        """The close phase (Java's ``runAtClose``): from now on the loop polls the managers
        that have last requests to send (ClosingRequestManager.poll_on_close: close fetch
        sessions, send acknowledgements, leave) instead of polling them as usual, sends what
        they return, and ends the phase once every one of them is done or after
        ``timeout_s``. Call `stop` after it."""
        if not self._running:
            return
        if self._close_done is None:
            self._close_done = anyio.Event()
        self._closing = True
        self.wakeup()
        with anyio.move_on_after(timeout_s) as scope:
            await self._close_done.wait()
        if scope.cancelled_caught:
            log.warning("the close phase did not end within %g s; stopping anyway", timeout_s)

    async def wait_for_metadata(self, newer_than: int) -> None:
        """Wait until the metadata snapshot's version is greater than `newer_than`.

        Raises the driver's fatal error itself if it is a KafkaError (e.g. the brokers
        refused the credentials), so ``start()`` can re-raise what went wrong.
        """
        while self.metadata.version <= newer_than:
            if isinstance(self._fatal, KafkaError):
                raise self._fatal
            if self._setup_error is not None:
                raise _copy_error(self._setup_error)
            self.check()
            await self._metadata_event.wait()

    # -- the loop -------------------------------------------------------------------------

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        if log.isEnabledFor(logging.DEBUG):
            from kafkaio.about import current_backend, installation

            log.debug(
                "network task starting on %s: %s", current_backend(), installation().summary()
            )
        self._asyncio = running_asyncio()
        async with anyio.create_task_group() as tg:
            self._tg = tg
            self._running = True
            task_status.started()
            try:
                while not self._stopping:
                    wait_ms = min(self.run_once(), MAX_IDLE_MS)
                    if self._wake.is_set():
                        await anyio.lowlevel.checkpoint()  # let the other tasks run first
                    else:
                        start = now_ms()
                        self._sleep_until = start + wait_ms
                        await self._wake.wait(wait_ms / 1000.0)
                        self._sleep_until = -math.inf
                        if self._io_wait is not None:
                            end = now_ms()
                            self._io_wait.record((end - start) / 1000.0, end)
                    self._wake.clear()
            except Exception as exc:  # a manager bug: stop, and make every caller see it
                log.exception("kafkaio network task stopped by an unexpected error")
                self._fatal = exc
            finally:
                self._running = False
                self._metadata_event.set()
                tg.cancel_scope.cancel()

    def run_once(self) -> float:
        """Handle what is done, poll every manager once and hand their requests to the
        connections (starting those to open); returns ms to sleep."""
        if self._done:
            self._handle_done()
        requests, wait = self._poll_managers()
        for request in requests:
            self._dispatch(request)
        if self._waiting:
            self._start_connecting()
        return wait

    def _poll_managers(
        self, answered: int = -1, now: float | None = None
    ) -> tuple[list[UnsentRequest[Any]], float]:
        """Poll the managers; returns the requests to send and ms until the next poll is due.

        ``answered``: the position of the manager whose handler just ran (-1: none). If that
        manager is ``self_contained``, only it is polled, with the metadata manager if it
        wants to update now and the managers whose last poll asked for a poll by now.
        ``now``: the clock, when the caller has just read it.
        """
        if now is None:
            now = now_ms()
        if self._closing:
            return self._poll_on_close(now)
        wait = math.inf
        requests: list[UnsentRequest[Any]] = []
        self._publish_extra_nodes()
        due = self._due
        some = answered >= 0 and self._contained[answered]
        metadata_wait = self.metadata.time_to_next_update(now) if some else 0.0
        for index, manager in enumerate(self._managers):
            if some and index != answered and due[index] > now and (
                index != 0 or metadata_wait > 0
            ):
                next_poll = due[index] - now
            else:
                result = manager.poll(now)
                if result.requests:
                    for request in result.requests:
                        request.manager = index
                    requests.extend(result.requests)
                next_poll = result.next_poll_ms
                due[index] = now + next_poll
            if next_poll < wait:
                wait = next_poll
        # A manager polled after the metadata manager (the application events' processor
        # handling an assign, a reset missing a leader) may have asked it for a topic or a
        # refresh: turn again at once rather than sleep on that until something else wakes us.
        wait = min(wait, self.metadata.time_to_next_update(now))
        self._publish_metadata()
        return requests, max(wait, 0.0)

    def _poll_on_close(self, now: float) -> tuple[list[UnsentRequest[Any]], float]:
        """A turn of the close phase: the closing managers' last requests."""
        wait = math.inf
        requests: list[UnsentRequest[Any]] = []
        done = True
        for manager in self._managers:
            closing = getattr(manager, "inner", manager)  # through a TimedManager
            if not isinstance(closing, ClosingRequestManager):
                continue
            result = closing.poll_on_close(now, self._connected)
            requests.extend(result.requests)
            wait = min(wait, result.next_poll_ms)
            done = done and closing.close_done
        if done and not requests and self._close_done is not None:
            self._close_done.set()
        return requests, max(wait, 0.0)

    def _connected(self, node: int) -> bool:
        return self.connections.ready(node) is not None

    def _poll_after_response(
        self, answered: UnsentRequest[Any], now: float
    ) -> list[UnsentRequest[Any]]:
        """Poll the managers right after `answered`'s handler ran at `now`; the requests to
        send now.

        Saves the main loop a wake-up per response: new requests start at once, and the
        loop is woken only if a manager wants to be polled before its current sleep ends.
        """
        if self._stopping or not self._running:
            self.wakeup()
            return []
        requests, wait = self._poll_managers(answered.manager, now)
        if now + wait < self._sleep_until:
            self.wakeup()
        return requests

    def _publish_metadata(self) -> None:
        version = self.metadata.version
        if version == self._metadata_version:
            return
        self._metadata_version = version
        self._update_nodes()
        event, self._metadata_event = self._metadata_event, anyio.Event()
        event.set()

    def _publish_extra_nodes(self) -> None:
        """Register extra nodes that appeared or moved since the last publish."""
        if self._extra_nodes is not None and dict(self._extra_nodes()) != self._published_extra:
            self._update_nodes()

    def _update_nodes(self) -> None:
        cluster = self.metadata.cluster
        nodes = {b.node_id: (b.host, b.port) for b in cluster.brokers.values()}
        if self._extra_nodes is not None:
            self._published_extra = dict(self._extra_nodes())
            nodes.update(self._published_extra)
        self.connections.update_nodes(nodes)

    def _dispatch(self, unsent: UnsentRequest[Any]) -> None:
        """Hand `unsent` to its connection (`_submit`), or, with no connection ready for
        its node (or requests already waiting for it), put it in line for the connection
        that the loop's set-up task opens (`_connect`). Never waits: callable from the
        loop, a handler or an event-loop callback."""
        node = unsent.node_id
        if node not in self._waiting:
            connections = self.connections
            conn = connections.ready(node) if node is not None else connections.least_loaded_ready()
            if conn is not None and not conn.needs_writer:
                if unsent.any_connection and node is not None and (conn.in_flight or conn.queued):
                    peer = connections.idle_peer(node)
                    if peer is not None:
                        self._submit_on_peer(peer, conn, unsent)
                        return
                self._submit(conn, unsent)
                return
        waiting = self._waiting.get(node)
        if waiting is None:
            waiting = self._waiting[node] = []
        waiting.append(unsent)
        if node not in self._connecting:
            self.wakeup()  # the loop starts the set-up task (`_start_connecting`)

    def _submit(self, conn: Connection, unsent: UnsentRequest[R]) -> None:
        """The one hand-off: the connection writes `unsent` at once or in its turn, and its
        Completion brings the outcome to `_on_completion`."""
        timeout = None if unsent.timeout_ms is None else unsent.timeout_ms / 1000.0
        done: Completion[R]
        try:
            version = self._version(conn, unsent)
        except UnsupportedVersionError as exc:
            done = Completion()
            done.fail(exc)
        else:
            if unsent.expect_response:
                done = conn.submit(unsent.request, version, timeout)
            else:  # completes with None once written: a handler of R | None takes it
                done = cast("Completion[R]", conn.submit_no_response(unsent.request, version, timeout))
        done.add_done_callback(functools.partial(self._on_completion, unsent))

    def _submit_on_peer(self, peer: Connection, own: Connection, unsent: UnsentRequest[R]) -> None:
        """Send `unsent` (``any_connection``) on `peer`, another connection to its node's
        broker, rather than behind the requests in flight on the node's own connection
        `own`. If it fails there, it is sent on the node's own connection if that is still
        open (its handler gets the error otherwise)."""
        node = unsent.node_id
        assert node is not None
        handler = unsent.handler
        name = type(unsent.request).__name__
        log.debug(
            "node %d: %s sent on %s, not behind %d request(s) in flight on %s",
            node,
            name,
            peer,
            own.in_flight + own.queued,
            own,
        )

        def fall_back(now: float, response: R | None, error: BaseException | None) -> None:
            if error is not None and self.connections.ready(node) is not None:
                log.debug("node %d: %s failed on %s (%s); sending it on %s", node, name, peer, error, own)
                self._dispatch(dataclasses.replace(unsent, any_connection=False))
                return
            handler(now, response, error)

        self._submit(peer, dataclasses.replace(unsent, handler=fall_back))

    def _start_connecting(self) -> None:
        """Start a set-up task for each node that has requests waiting and none yet."""
        if len(self._connecting) == len(self._waiting):
            return
        assert self._tg is not None
        for node in self._waiting:
            if node not in self._connecting:
                self._connecting.add(node)
                self._tg.start_soon(self._connect, node)

    async def _connect(self, node: int | None) -> None:
        """Open the connection to `node` (None: the least loaded one) and hand it the
        requests waiting for it, in order, or fail them with why it could not be opened.
        On anyio streams (TLS, trio) the task goes on as the connection's writer and
        reader (`Connection.serve`) until it closes."""
        error: KafkaError | None = None
        try:
            try:
                if node is None:
                    conn = await self.connections.least_loaded()
                else:
                    conn = await self.connections.get(node)
            except KafkaError as exc:
                error = exc
                if not exc.retriable:
                    self._fail_setup(exc)
        finally:
            self._connecting.discard(node)
        waiting = self._waiting.pop(node, [])
        if error is not None:
            for unsent in waiting:
                failed: Completion[Any] = Completion()
                failed.fail(_copy_error(error))
                self._on_completion(unsent, failed)
            return
        self._setup_error = None  # connected (or connected before): callers may go on
        self._logged_setup_error = ""
        for unsent in waiting:  # no yield from `get` to here: they go first, in order
            self._submit(conn, unsent)
        if conn.needs_writer:
            await conn.serve()

    def _on_completion(self, unsent: UnsentRequest[R], done: Completion[R]) -> None:
        """A request is done. On asyncio its handler runs from an event-loop callback, in
        turn with the others a read made ready; with ``handle_on_read`` a response is
        handled at once, from the read. (An error always goes through the loop: it may come
        from inside the connection's own bookkeeping, e.g. while it closes, or from the
        hand-off itself.) Elsewhere (trio) the network task handles it in its next turn."""
        if not self._asyncio:
            self._done.append((unsent, done))
            self.wakeup()
        elif unsent.handle_on_read and done.error is None and unsent.expect_response:
            self._on_response(unsent, done.value, None)
        else:
            asyncio.get_running_loop().call_soon(
                self._on_response, unsent, done.value, done.error
            )

    def _on_response(
        self, unsent: UnsentRequest[R], response: R | None, error: BaseException | None
    ) -> None:
        """A request's outcome (an event-loop callback, outside any task): run its handler
        and hand over what the managers want next. Dropped once the driver has stopped."""
        if not self._running:
            return
        # anyio may ask sniffio for its backend, which finds no task here: say it is asyncio,
        # so handlers may use anyio (events, the clock) as they do in a task
        token = enter_asyncio_callback()
        try:
            now = now_ms()
            self._handle(unsent, response, error, now)
            for request in self._poll_after_response(unsent, now):
                self._dispatch(request)
        except Exception as exc:  # a manager bug, raised outside the driver's tasks
            log.exception("polling the request managers failed; stopping the network task")
            self._crash(exc)
        finally:
            exit_asyncio_callback(token)

    def _handle_done(self) -> None:
        """The outcomes `_on_completion` left for the loop (trio)."""
        done, self._done = self._done, []
        for unsent, completion in done:
            self._handle(unsent, completion.value, completion.error, now_ms())

    @staticmethod
    def _version(conn: Connection, unsent: UnsentRequest[Any]) -> int:
        """The version to send `unsent` in on `conn` (its cap applied); raises
        UnsupportedVersionError if the cap is below what the broker speaks."""
        version = conn.version_for(type(unsent.request))
        if unsent.max_version is not None and unsent.max_version < version:
            version = unsent.max_version
            low = conn.api_versions.get(type(unsent.request).API_KEY, (0, 0))[0]
            if version < low:
                raise UnsupportedVersionError(
                    f"{conn} speaks {type(unsent.request).__name__} v{low} or newer, but "
                    f"this request can be sent only as v{version} or older"
                )
        return version

    def _handle(
        self,
        unsent: UnsentRequest[R],
        response: R | None,
        error: BaseException | None,
        now: float,
    ) -> None:
        """Run `unsent`'s handler at `now`; a handler that raises stops the driver."""
        try:
            unsent.handler(now, response, error)
        except Exception as exc:
            log.exception("a request handler failed; stopping the network task")
            self._crash(exc)

    def _crash(self, exc: BaseException) -> None:
        self._fatal = exc
        self._stopping = True
        self.wakeup()

    def _fail_setup(self, error: KafkaError) -> None:
        """A connection could not be set up for a reason retrying cannot fix (the brokers
        refused the credentials, a TLS certificate was rejected, ...): application calls
        raise ``error`` now rather than time out. The network task goes on (connections are
        retried after the reconnect backoff), so the client works again once the cause is
        fixed, as Java's clients do."""
        if str(error) != self._logged_setup_error:
            self._logged_setup_error = str(error)
            log.error("kafkaio cannot connect: %s", error)
        self._setup_error = error
        event, self._metadata_event = self._metadata_event, anyio.Event()
        event.set()  # start() waiting for metadata raises it
        self.wakeup()


def _copy_error(error: KafkaError) -> KafkaError:
    """A copy of `error` to raise (each raise gets its own traceback)."""
    clone = copy.copy(error)
    clone.__cause__ = error.__cause__
    clone.__traceback__ = None
    return clone
