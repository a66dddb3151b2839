"""The I/O driver: the one task that runs sans-I/O request managers against real connections.

Each turn of the loop (`run_once`) polls every manager at the current time, sends what they
ask for, and then sleeps until the earliest time a manager asked to be polled again, or until
a response, a failure or an application event wakes it (`wakeup`).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.lowlevel

from kafkaio.asynclib import asyncio_callback
from kafkaio.clock import monotonic
from kafkaio.errors import KafkaError, UnsupportedVersionError
from kafkaio.metadata.manager import MetadataManager
from kafkaio.net.manager import ConnectionManager
from kafkaio.net.turns import Turn, Turns
from kafkaio.runtime.completion import Completion
from kafkaio.runtime.requests import ClosingRequestManager, RequestManager, UnsentRequest
from kafkaio.runtime.wakeup import Wakeup

if TYPE_CHECKING:
    from kafkaio.metrics.sensor import Sensor
    from kafkaio.net.connection import Connection

log = logging.getLogger("kafkaio.runtime")

# Extra node addresses (e.g. the group coordinator's own connection id) to keep registered.
NodeAddresses = Mapping[int, tuple[str, int]]

# Upper bound of one sleep, so a lost wake-up can never stall the loop for long.
MAX_IDLE_MS = 1000.0


def now_ms() -> float:
    """The driver's clock: anyio's monotonic time in milliseconds."""
    return monotonic() * 1000.0


# A sender task with nothing to send ends after this long (a new one starts when needed).
_SENDER_IDLE_S = 30.0


class _IdleSender:
    """A sender task waiting for its next request."""

    __slots__ = ("request", "wakeup")

    def __init__(self) -> None:
        self.request: UnsentRequest[Any] | None = None
        self.wakeup = Wakeup()


class DriverStoppedError(KafkaError):
    """The client's network task has stopped (the client was closed, or a bug stopped it)."""


class NetworkDriver:
    """Runs `managers` (and the metadata manager) against `connections` in one task.

    Start it with ``await task_group.start(driver.run)``; stop it with `stop`. Application
    code never calls managers while a request is being handled: handlers are plain
    synchronous functions that run on the same event loop, in the driver's own tasks or (for
    requests written at once on an established asyncio connection, `_send_now`) in event-loop
    callbacks.
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
        self._idle: list[_IdleSender] = []  # sender tasks waiting for a request
        # requests a loop callback could neither write nor hand to an idle sender task (a
        # task cannot be started from a callback): the loop dispatches them
        self._deferred: list[UnsentRequest[Any]] = []
        # per node: requests that took the task path and have not reached their connection
        # yet. While there are any, later requests to the node take that path too, behind
        # them: requests reach a broker in the order the managers made them (the producer
        # relies on it when several batches of a partition are in flight)
        self._lines: dict[int, Turns] = {}
        self._turn_of: dict[int, Turn] = {}  # id() of a request in a line: its place there
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
        """Poll every manager once, start sending their requests; returns ms to sleep."""
        requests, wait = self._poll_managers()
        if self._deferred:
            deferred, self._deferred = self._deferred, []
            for request in deferred:
                self._to_task(request)  # queued already (`_queue`)
        for request in requests:
            self._dispatch(request)
        return wait

    def _poll_managers(self, answered: int = -1) -> tuple[list[UnsentRequest[Any]], float]:
        """Poll the managers; returns the requests to send and ms until the next poll is due.

        ``answered``: the position of the manager whose handler just ran (-1: none). If that
        manager is ``self_contained``, only it is polled, with the metadata manager if it
        wants to update now and the managers whose last poll asked for a poll by now.
        """
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

    def _poll_after_response(self, answered: UnsentRequest[Any]) -> list[UnsentRequest[Any]]:
        """Poll the managers right after `answered`'s handler ran; the requests to send now.

        Saves the main loop a wake-up per response: new requests start at once, and the
        loop is woken only if a manager wants to be polled before its current sleep ends.
        """
        if self._stopping or not self._running:
            self.wakeup()
            return []
        requests, wait = self._poll_managers(answered.manager)
        if now_ms() + wait < self._sleep_until:
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

    def _dispatch(self, request: UnsentRequest[Any]) -> None:
        """Write `request` at once if its connection can take it (`_send_now`); else hand
        it to an idle sender task, or start one (a task per request in flight, kept for
        reuse: starting a task costs more than waking one)."""
        if not self._send_now(request):
            self._queue(request)
            self._to_task(request)

    def _queue(self, request: UnsentRequest[Any]) -> None:
        """`request` takes the task path: later requests to its node line up behind it."""
        node_id = request.node_id
        if node_id is not None:
            line = self._lines.get(node_id)
            if line is None:
                line = self._lines[node_id] = Turns()
            self._turn_of[id(request)] = line.join()

    async def _wait_turn(self, request: UnsentRequest[Any]) -> None:
        """Wait until the requests queued before `request` to its node have left the line."""
        node_id = request.node_id
        if node_id is not None:
            await self._lines[node_id].wait(self._turn_of[id(request)])

    def _dequeue(self, request: UnsentRequest[Any]) -> None:
        """`request` reached its connection (it is written, or waits for an in-flight
        permit in line), or failed before: the next request to its node may go."""
        node_id = request.node_id
        if node_id is None:
            return
        line = self._lines[node_id]
        line.leave(self._turn_of.pop(id(request)))
        if not line:
            del self._lines[node_id]

    def _to_task(self, request: UnsentRequest[Any]) -> None:
        if self._idle:
            slot = self._idle.pop()
            slot.request = request
            slot.wakeup.set()
            return
        assert self._tg is not None
        self._tg.start_soon(self._sender_task, request)

    def _send_now(self, unsent: UnsentRequest[Any]) -> bool:
        """The fast path of an established asyncio connection: write `unsent` from this call,
        and run its handler from an event-loop callback once the response is read
        (`_on_response`), so neither waits for a sender task to be scheduled. False when
        the request needs a task: no open connection yet, every in-flight permit taken, any
        node, no response expected, trio or TLS, an error to hand to the handler, or an
        earlier request to the node still on its way in a task (see `_lines`)."""
        node_id = unsent.node_id
        if node_id is None or not unsent.expect_response or node_id in self._lines:
            return False
        conn = self.connections.ready(node_id)
        if conn is None:
            return False
        try:
            version = self._version(conn, unsent)
        except UnsupportedVersionError:
            return False  # the task path hands it to the handler
        timeout = None if unsent.timeout_ms is None else unsent.timeout_ms / 1000.0
        try:
            sent = conn.send_soon(unsent.request, version, timeout)
        except Exception:
            return False  # e.g. a field this version cannot carry: the task path reports it
        if sent is None:
            return False
        sent.add_done_callback(functools.partial(self._on_completion, unsent))
        return True

    def _on_completion(self, unsent: UnsentRequest[Any], sent: Completion[Any]) -> None:
        """A `_send_now` request is done (called from the read that completed it, or from
        the connection's failure): its handler runs from an event-loop callback, in turn
        with the others this read made ready; with ``handle_on_read`` a response is handled
        at once, from the read. (An error always goes through the loop: it may come from
        inside the connection's own bookkeeping, e.g. while it closes.)"""
        if unsent.handle_on_read and sent.error is None:
            self._on_response(unsent, sent.value, None)
        else:
            asyncio.get_running_loop().call_soon(
                self._on_response, unsent, sent.value, sent.error
            )

    def _on_response(
        self, unsent: UnsentRequest[Any], response: Any, error: BaseException | None
    ) -> None:
        """A `_send_now` request's outcome (an event-loop callback, outside any task): run its
        handler and send what the managers want next. Dropped once the driver has stopped
        (as a cancelled sender task drops its response)."""
        if not self._running:
            return
        # anyio may ask sniffio for its backend, which finds no task here: say it is asyncio,
        # so handlers may use anyio (events, the clock) as they do in a task
        with asyncio_callback():
            try:
                self._handle(unsent, response, error)
                for request in self._poll_after_response(unsent):
                    if self._send_now(request):
                        continue
                    self._queue(request)
                    if self._idle:
                        self._to_task(request)
                    else:
                        self._deferred.append(request)
                        self.wakeup()
            except Exception as exc:  # a manager bug, raised outside the driver's tasks
                log.exception("polling the request managers failed; stopping the network task")
                self._crash(exc)

    async def _sender_task(self, first: UnsentRequest[Any]) -> None:
        """Send requests (and the follow-ups their responses allow) until idle too long."""
        request = first
        while True:
            await self._send(request)
            if self._stopping or not self._running:
                return
            slot = _IdleSender()
            self._idle.append(slot)
            await slot.wakeup.wait(_SENDER_IDLE_S)
            if slot.request is None:  # idle for too long: end (dispatch saw it idle no more)
                self._idle.remove(slot)
                return
            request = slot.request

    async def _send(self, unsent: UnsentRequest[Any]) -> None:
        request: UnsentRequest[Any] | None = unsent
        while request is not None:
            if not await self._send_one(request):
                # a failure may come without any wait (no connection): yield before the
                # next request, so a manager retrying at once cannot starve the event loop
                await anyio.lowlevel.checkpoint()
            follow_ups = self._poll_after_response(request)
            request = None
            for follow_up in follow_ups:
                if self._send_now(follow_up):
                    continue
                self._queue(follow_up)
                if request is None:
                    request = follow_up  # sent from this task (it is here already)
                else:
                    self._to_task(follow_up)

    async def _send_one(self, unsent: UnsentRequest[Any]) -> bool:
        """Send one request and run its handler; False if it failed."""
        response: Any = None
        error: BaseException | None = None
        queued = True
        try:
            try:
                if unsent.node_id is None:
                    conn = await self.connections.least_loaded()
                else:
                    await self._wait_turn(unsent)
                    conn = await self.connections.get(unsent.node_id)
            except KafkaError as exc:
                if not exc.retriable:
                    self._fail_setup(exc)
                raise
            self._setup_error = None  # connected (or connected before): callers may go on
            self._logged_setup_error = ""
            queued = False
            self._dequeue(unsent)  # no yield from here until it is in the connection's line
            version = self._version(conn, unsent)
            if unsent.expect_response:
                timeout = None if unsent.timeout_ms is None else unsent.timeout_ms / 1000.0
                response = await conn.send(unsent.request, version=version, timeout=timeout)
            else:
                await conn.send_no_response(unsent.request, version=version)
        except KafkaError as exc:
            error = exc
        except Exception as exc:  # e.g. a value the request's encoding cannot carry
            error = KafkaError(
                f"{type(unsent.request).__name__} could not be sent: {type(exc).__name__}: {exc}"
            )
            error.__cause__ = exc
        finally:
            if queued:
                self._dequeue(unsent)
        self._handle(unsent, response, error)
        return error is None

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

    def _handle(self, unsent: UnsentRequest[Any], response: Any, error: BaseException | None) -> None:
        """Run `unsent`'s handler; a handler that raises stops the driver."""
        try:
            unsent.handler(now_ms(), response, error)
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
