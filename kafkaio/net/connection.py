"""One connection to one broker: a socket under the connection's state machine.

`ConnectionMachine` (state.py) holds the protocol: versions, SASL, correlation ids, requests
in flight and their deadlines. This module opens the socket (TCP or TLS, on asyncio or
trio), runs the machine's set-up steps, and takes requests one way: `Connection.submit`,
which never waits. A request is written at once when the connection can take it, else it
waits in the connection's queue (set-up or a SASL renewal under way, every in-flight slot
taken, a writer needed) and is written in its turn; its Completion is completed by the
machine when the response is read. The I/O is one of two adapters: `wire.AsyncioWire`
(plain TCP under asyncio: bytes are fed to the machine as they arrive, the queue moves from
those callbacks) or `stream.StreamIO` (anyio streams: TLS, trio; `Connection.serve` writes
the queue and reads the responses in a task of the connection's owner).
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
import math
import os
import socket
import ssl
from collections import deque
from collections.abc import Sequence
from typing import Any, TypeVar

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

from kafkaio.asynclib import running_asyncio
from kafkaio.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    SaslAuthenticationFailedError,
    SslAuthenticationError,
)
from kafkaio.net.config import ConnectionConfig
from kafkaio.net.io import ConnectionIO
from kafkaio.net.reauth import SessionTimer
from kafkaio.net.sasl import (
    OAuthBearerMechanism,
    PlainMechanism,
    SaslMechanism,
    ScramMechanism,
)
from kafkaio.net.state import (
    Closed,
    ConnectionMachine,
    ConnectionState,
    Event,
    MechanismNeeded,
    Ready,
    SaslChallenge,
    Write,
    api_name,
    describe_error,
    describe_node,
)
from kafkaio.net.stream import STREAM_ERRORS, StreamIO
from kafkaio.net.wire import AsyncioWire, open_wire
from kafkaio.protocol.api import Request
from kafkaio.runtime.completion import Completion

__all__ = ["Connection", "ConnectionState", "api_name", "describe_node"]

log = logging.getLogger("kafkaio.net")

_CLOSE_GRACE = 0.5  # seconds a close may take before the socket is dropped
# Plain TCP connections under asyncio use AsyncioWire; KAFKAIO_ASYNCIO_WIRE=0 switches to the
# anyio stream path that TLS and trio use (the tests run both).
USE_ASYNCIO_WIRE = os.environ.get("KAFKAIO_ASYNCIO_WIRE", "1") != "0"

R = TypeVar("R")


class _Queued:
    """A request submitted to a connection and not written yet."""

    __slots__ = ("request", "version", "queued_at", "deadline", "waiter", "expects")

    def __init__(
        self,
        request: Request[Any],
        version: int,
        queued_at: float,
        deadline: float,
        waiter: Completion[Any],
        expects: bool,
    ) -> None:
        self.request = request
        self.version = version
        self.queued_at = queued_at
        self.deadline = deadline
        self.waiter = waiter
        self.expects = expects  # False: the broker sends no response (acks=0)


class Connection:
    """A ready connection to one broker; create it with :meth:`connect`.

    Requests are handed over with :meth:`submit` (never waits; :meth:`send` awaits its
    outcome): they are pipelined up to ``max_in_flight_requests_per_connection`` and
    written in the order they were submitted. On anyio streams (TLS, trio) a task must run
    :meth:`serve`, or callers await :meth:`send`, for them to be written. A
    request that gets no answer within its timeout raises KafkaTimeoutError and closes the
    connection (the position in the response stream is lost, as in the Java client), whether
    or not its caller still waits. When the connection breaks or the broker breaks the
    protocol, every in-flight request fails with KafkaConnectionError and the connection is
    closed; make a new one.
    """

    def __init__(
        self,
        transport: anyio.abc.ByteStream | AsyncioWire,
        host: str,
        port: int,
        config: ConnectionConfig,
        node_id: int | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.config = config
        self._machine = machine = ConnectionMachine(config, host, port, node_id)
        self._request_timeout = config.request_timeout_ms / 1000
        self.last_used = 0.0
        self._announced = False  # connected and said so: a close is logged from now on
        # requests submitted and not written yet, in the order they came: written in that
        # order (by `_pump` on asyncio, by the writer, `_write_queued`, on anyio streams)
        self._queue: deque[_Queued] = deque()
        self._renewal: asyncio.Task[None] | None = None  # asyncio: a SASL renewal under way
        self._served = False  # anyio streams: a task runs `serve`
        self._write_lock = anyio.Lock()  # anyio streams: one writer at a time
        self._wake: anyio.Event | None = None  # anyio streams: wakes the writer and reader
        # set-up events (versions, SASL) for the task running the set-up; None otherwise
        self._setup_events: list[Event] | None = None
        self._progress: Completion[None] | None = None
        self._io: ConnectionIO
        if isinstance(transport, AsyncioWire):
            self._io = transport
            transport.attach(self)
        else:
            self._io = StreamIO(transport, machine, self)
        self.last_used = self._io.now()
        _set_buffer_sizes(self._io.socket(), config)

    # -- construction -------------------------------------------------------------------

    @classmethod
    async def connect(
        cls, host: str, port: int, config: ConnectionConfig, *, node_id: int | None = None
    ) -> Connection:
        """Connect, negotiate API versions and authenticate; return a ready connection.

        The whole setup is bounded by ``connect_timeout_ms``. Raises KafkaConnectionError when
        the broker cannot be reached or drops the connection, SaslAuthenticationFailedError
        (or another broker error) when authentication is refused.
        """
        who = describe_node(host, port, node_id)
        _check_address(host, port, who)
        timeout = config.connect_timeout_ms / 1000
        conn: Connection | None = None
        try:
            with anyio.fail_after(timeout):
                transport = await _open_transport(host, port, config, who)
                conn = cls(transport, host, port, config, node_id)
                await conn._run_setup([conn._machine.start(conn._io.now())])
        except TimeoutError:
            if conn is not None:
                await conn._shutdown(None)
            raise KafkaConnectionError(
                f"could not connect to {who} within connect_timeout_ms={config.connect_timeout_ms}"
                f" ({'TCP/TLS setup' if conn is None else 'broker handshake'} did not finish); "
                "check that the broker is up and reachable and that security_protocol matches "
                "its listener"
            ) from None
        except KafkaError:
            if conn is not None:
                await conn._shutdown(None)
            raise
        except Exception as exc:  # any other failure of the setup is one of this connection
            if conn is not None:
                await conn._shutdown(None)
            raise KafkaConnectionError(
                f"could not set up the connection to {who}: {describe_error(exc)}; it is "
                "retried after a backoff"
            ) from exc
        except BaseException:
            if conn is not None:
                await conn._shutdown(None)
            raise
        conn._announced = True
        log.info(
            "connected to %s over %s (%d APIs)",
            who,
            config.security_protocol,
            len(conn.api_versions),
        )
        return conn

    async def reauthenticate(self) -> None:
        """Authenticate again on this connection (KIP-368): SaslHandshake and
        SaslAuthenticate, with a fresh token from ``sasl_oauth_token_provider``.

        The connection does it before writing a request once 85-95% of the session the
        broker granted has passed (`session`), as Java's client does. Requests in flight
        are answered first; requests submitted meanwhile wait in the queue (none is lost). Bounded by
        ``request_timeout_ms``. A failure (the broker refuses, the provider raises, the
        connection breaks or times out) closes the connection and raises a retriable
        KafkaConnectionError naming the cause (its ``__cause__``): the client retries on a
        new connection, which logs in from scratch. Raises KafkaError, leaving the
        connection as it is, if it does not use SASL."""
        if self.closed:
            raise self._closed_error()
        events = self._machine.reauthenticate(self._io.now())
        log.debug("%s: renewing the SASL session", self)
        try:
            with anyio.fail_after(self._request_timeout):
                await self._run_setup(events)
        except TimeoutError:
            failure: Exception = KafkaTimeoutError(
                f"it did not finish within {self._request_timeout:g} s"
            )
        except Exception as exc:
            failure = exc
        except BaseException:
            await self._shutdown(None)
            raise
        else:
            log.debug(
                "%s: re-authenticated (%d so far; session of %d ms)",
                self,
                self.session.reauthentications,
                self.session.lifetime_ms,
            )
            return
        # the machine (closed now, if it was not) names the failure, `failure` its cause
        await self._shutdown(failure)
        error = self._machine.close_reason
        raise error if isinstance(error, KafkaConnectionError) else self._closed_error()

    async def _run_setup(self, events: Sequence[Event]) -> None:
        """Run the machine's set-up steps (versions, SASL) until it is READY: write what it
        asks, make the SASL mechanism, run its steps; raise why it closed if it does."""
        machine = self._machine
        io = self._io
        self._setup_events = []
        try:
            while True:
                pending: list[Event] = []
                for event in events:
                    if isinstance(event, Write):
                        deadline = machine.next_deadline() or io.now()
                        await self._write(event.data, deadline, "a set-up request")
                        io.watch(deadline)
                    elif isinstance(event, MechanismNeeded):
                        mechanism = await self._make_mechanism()
                        pending.append(machine.sasl_start(mechanism, io.now()))
                    elif isinstance(event, SaslChallenge):
                        token = await self._sasl_step(event)
                        pending.append(machine.sasl_continue(token, io.now()))
                    elif isinstance(event, Ready):
                        return
                    else:
                        raise event.cause or self._closed_error()
                events = pending or await self._next_setup_events()
        finally:
            self._setup_events = self._progress = None
            self._pump()  # ready (or closed): the queue moves on

    async def _next_setup_events(self) -> list[Event]:
        """Wait until the machine has set-up events (it gets them from `received`)."""
        if not self._setup_events:
            self._progress = Completion()
            await self._io.wait(self._progress)
        events, self._setup_events = self._setup_events or [], []
        return events

    async def _sasl_step(self, event: SaslChallenge) -> bytes | None:
        try:
            return await _sasl_step(event.mechanism, event.challenge)
        except SaslAuthenticationFailedError as exc:
            raise SaslAuthenticationFailedError(
                exc.message, node=self.node_id, address=f"{self.host}:{self.port}"
            ) from None

    async def _make_mechanism(self) -> SaslMechanism:
        config = self.config
        name = config.sasl_mechanism
        if name == "OAUTHBEARER":
            provider = config.sasl_oauth_token_provider
            assert provider is not None  # checked by ConnectionConfig
            try:
                token = provider()
                if inspect.isawaitable(token):
                    token = await token
            except KafkaError:
                raise
            except Exception as exc:  # e.g. the identity provider's HTTP endpoint failed
                raise KafkaConnectionError(
                    f"the sasl_oauth_token_provider raised {describe_error(exc)} while "
                    f"connecting to {self}; the connection is retried after a backoff (raise "
                    "a KafkaError from the provider to fail callers at once instead)"
                ) from exc
            if not isinstance(token, str):
                raise KafkaError(
                    f"sasl_oauth_token_provider returned {type(token).__name__}, not a str token"
                )
            return OAuthBearerMechanism(token)
        username = config.sasl_plain_username or ""
        password = config.sasl_plain_password or ""
        if name == "PLAIN":
            return PlainMechanism(username, password)
        return ScramMechanism(
            name, username, password, max_iterations=config.sasl_scram_max_iterations
        )

    # -- state --------------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        return self._machine.state

    @property
    def closed(self) -> bool:
        return self._machine.state is ConnectionState.CLOSED

    @property
    def in_flight(self) -> int:
        """Requests written and not answered yet."""
        return self._machine.in_flight

    @property
    def queued(self) -> int:
        """Requests submitted and not written yet."""
        return len(self._queue)

    @property
    def api_versions(self) -> dict[int, tuple[int, int]]:
        """The broker's API versions: api key -> (min, max)."""
        return self._machine.api_versions

    @property
    def session_lifetime_ms(self) -> int:
        """How long the broker keeps the SASL session (0: no limit), from authentication."""
        return self._machine.session_lifetime_ms

    @property
    def session(self) -> SessionTimer:
        """The SASL session: when it is renewed, how often it was (KIP-368)."""
        return self._machine.session

    def supports(self, request_cls: type[Request[Any]]) -> bool:
        """True if this broker and kafkaio share a version of the request's API."""
        return self._machine.supports(request_cls)

    def version_for(self, request_cls: type[Request[Any]]) -> int:
        """The highest version of this API that both the broker and kafkaio support."""
        return self._machine.version_for(request_cls)

    # -- requests -----------------------------------------------------------------------

    def submit(
        self, request: Request[R], version: int | None = None, timeout: float | None = None
    ) -> Completion[R]:
        """Hand ``request`` to the connection without waiting; returns the Completion its
        response completes (an ``XRequest`` gets an ``XResponse``), or its failure:
        KafkaTimeoutError (no answer, or not written, within ``timeout`` seconds; default
        ``request_timeout_ms``), KafkaConnectionError (the connection is or becomes closed),
        KafkaProtocolError (the response cannot be decoded), KafkaError (it cannot be
        encoded). Requests are written in the order they were submitted: at once when the
        connection can take one (asyncio, plain TCP, ready, an in-flight slot free), else
        from the connection's queue as soon as it can (a slot is freed, the SASL session is
        renewed, a TLS or trio writer gets to it). ``version`` defaults to
        :meth:`version_for`."""
        waiter: Completion[R] = Completion()
        self._enqueue(request, version, timeout, waiter, True)
        return waiter

    def submit_no_response(
        self, request: Request[Any], version: int | None = None, timeout: float | None = None
    ) -> Completion[None]:
        """As :meth:`submit`, for a request the broker does not answer (Produce with
        acks=0): the Completion completes once the request is written. One not written
        within ``timeout`` (the broker is not reading) fails with KafkaTimeoutError and
        closes the connection."""
        written: Completion[None] = Completion()
        self._enqueue(request, version, timeout, written, False)
        return written

    async def send(
        self, request: Request[R], *, version: int | None = None, timeout: float | None = None
    ) -> R:
        """`submit` ``request`` and wait for its response (for callers in their own task:
        Admin, tools). Raises what the Completion fails with."""
        waiter = self.submit(request, version, timeout)
        try:
            if not waiter.done and not self._io.writes_at_once and not self._served:
                await self._write_queued(waiter)  # no writer task: this caller writes
            await self._io.wait(waiter)
        except BaseException:
            self._unqueue(waiter)  # cancelled before it was written: it never will be
            raise
        return waiter.result()

    def _enqueue(
        self,
        request: Request[Any],
        version: int | None,
        timeout: float | None,
        waiter: Completion[Any],
        expects: bool,
    ) -> None:
        io = self._io
        machine = self._machine
        now = io.now()
        if (machine.state is not ConnectionState.READY or not io.writes_at_once) and (
            self._closes(now)
        ):
            waiter.fail(self._closed_error())
            return
        if version is None:
            try:
                version = machine.version_for(type(request))
            except KafkaError as exc:
                waiter.fail(exc)
                return
        deadline = now + (self._request_timeout if timeout is None else timeout)
        if not self._queue and io.writes_at_once and self._may_write(expects, now):
            self._write_now(request, version, now, deadline, waiter, expects, now)  # nobody ahead
            return
        self._queue.append(_Queued(request, version, now, deadline, waiter, expects))
        io.watch(deadline)  # a request that waits too long in the queue fails (`expire`)
        self._pump()

    def _may_write(self, expects: bool, now: float) -> bool:
        """True if a request at the head of the queue may be written now: READY, an
        in-flight slot free if it `expects` a response, the asyncio transport not paused if
        it does not, and no SASL renewal due."""
        machine = self._machine
        if expects:
            if not machine.can_send:
                return False
        elif machine.state is not ConnectionState.READY or not self._io.writable:
            return False
        return not machine.renewal_due(now)

    def _write_now(
        self,
        request: Request[Any],
        version: int,
        since: float,
        deadline: float,
        waiter: Completion[Any],
        expects: bool,
        now: float,
    ) -> None:
        """Write a request from this call (asyncio: the transport buffers it) at `now`."""
        try:
            frame = self._frame(request, version, since, deadline, waiter, expects)
        except KafkaError as exc:
            waiter.fail(exc)
            return
        io = self._io
        io.write_now(frame)
        self.last_used = now
        if expects:
            io.watch(deadline)
        else:
            waiter.complete(None)

    def _frame(
        self,
        request: Request[Any],
        version: int,
        since: float,
        deadline: float,
        waiter: Completion[Any],
        expects: bool,
    ) -> bytes:
        """The request's frame, noted in flight (its timeout counted from `since`, when it
        was submitted); an encoding failure as a KafkaError."""
        try:
            return self._machine.send(
                request, version, since, deadline, waiter if expects else None
            )
        except KafkaError:
            raise
        except Exception as exc:  # e.g. a value this version's encoding cannot carry
            error = KafkaError(
                f"{type(request).__name__} could not be sent: {type(exc).__name__}: {exc}"
            )
            raise error from exc

    def _pump(self) -> None:
        """Make the queue move (after a submit, a response, the end of a set-up step, the
        transport resuming): on asyncio write the head while it may go, starting a SASL
        renewal if one is due; on anyio streams wake the writer."""
        queue = self._queue
        if not queue:
            return
        if self._machine.closed:
            self._fail_queued()
            return
        io = self._io
        if not io.writes_at_once:
            self._wake_writer()
            return
        while queue:
            now = io.now()
            head = queue[0]
            if not self._may_write(head.expects, now):
                if self._machine.renewal_due(now) and self._renewal is None:
                    self._renewal = asyncio.get_running_loop().create_task(self._renew())
                return
            queue.popleft()
            self._write_now(
                head.request,
                head.version,
                head.queued_at,
                head.deadline,
                head.waiter,
                head.expects,
                now,
            )

    async def _renew(self) -> None:
        """The asyncio adapter's SASL renewal (KIP-368), in its own task: the queue waits,
        then moves on (or fails with the connection if the renewal fails)."""
        try:
            await self.reauthenticate()
        except Exception:
            pass  # the connection closed, failing the queue; reauthenticate logged why
        finally:
            self._renewal = None
        self._pump()

    def _unqueue(self, waiter: Completion[Any]) -> None:
        for entry in self._queue:
            if entry.waiter is waiter:
                self._queue.remove(entry)
                return

    def _expire_queued(self, now: float) -> None:
        """Fail the queued requests past their deadline (KafkaTimeoutError); one the broker
        does not answer and that could not be written closes the connection (the broker is
        not reading)."""
        queue = self._queue
        if not queue or all(e.deadline > now for e in queue):
            return
        stuck = False
        for entry in [e for e in queue if e.deadline <= now]:
            queue.remove(entry)
            stuck = stuck or not entry.expects
            entry.waiter.fail(self._not_sent_error(entry, now))
        if stuck:
            event = self._machine.close(
                KafkaTimeoutError("the broker did not read a request in time")
            )
            if event is not None:
                self._on_closed(event)

    def _fail_queued(self) -> None:
        """The connection closed: every queued request fails, in order."""
        queue, self._queue = self._queue, deque()
        reason = self._machine.close_reason
        for entry in queue:
            if isinstance(reason, KafkaConnectionError):  # it says why (a failed renewal)
                error = copy.copy(reason)
                error.__cause__, error.__traceback__ = reason.__cause__, None
            else:
                error = self._closed_error()
            entry.waiter.fail(error)

    # -- the writer of anyio streams ----------------------------------------------------

    @property
    def needs_writer(self) -> bool:
        """True if queued requests need a task to write them (anyio streams: TLS, trio)
        and none runs yet: run :meth:`serve` in one."""
        return not self._io.writes_at_once and not self._served

    async def serve(self) -> None:
        """Write the queue and read the responses of an anyio-stream connection until it
        closes (run it in a task of the connection's owner). Returns at once on asyncio's
        plain TCP adapter (it needs no task)."""
        if self._served or self._io.writes_at_once:
            return
        self._served = True
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._read_responses)
                await self._write_queued(None)
                tg.cancel_scope.cancel()
        finally:
            self._served = False
            if self.closed:
                await self._io.aclose(_CLOSE_GRACE)

    async def _read_responses(self) -> None:
        while not self.closed:
            if self._machine.in_flight:
                await self._io.read_in_flight()
            else:
                await self._writer_event().wait()

    def _writer_event(self) -> anyio.Event:
        event = self._wake
        if event is None or event.is_set():
            event = self._wake = anyio.Event()
        return event

    def _wake_writer(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _write_queued(self, until: Completion[Any] | None) -> None:
        """Write queued requests in order as the connection takes them (anyio streams),
        until `until` is written or done (None: until the connection closes); one writer
        at a time. A due SASL renewal runs first, at the head of the queue."""
        async with self._write_lock:
            queue = self._queue
            while not self.closed and (until is None or not until.done):
                io = self._io
                now = io.now()
                self._expire_queued(now)
                if until is not None and not any(e.waiter is until for e in queue):
                    return  # written (or failed): its caller reads for it
                if queue and self._machine.renewal_due(now):
                    try:
                        await self.reauthenticate()
                    except KafkaError:
                        pass  # closed: the queue fails below
                    continue
                if queue and self._may_write(queue[0].expects, now):
                    entry = queue.popleft()
                    try:
                        frame = self._frame(
                            entry.request,
                            entry.version,
                            entry.queued_at,
                            entry.deadline,
                            entry.waiter,
                            entry.expects,
                        )
                    except KafkaError as exc:
                        entry.waiter.fail(exc)
                        continue
                    self.last_used = now
                    try:
                        await self._write(frame, entry.deadline, api_name(type(entry.request)))
                    except KafkaError as exc:  # closed: a request in flight failed with it
                        entry.waiter.fail(exc)
                        continue
                    if not entry.expects:
                        entry.waiter.complete(None)
                    self._wake_writer()  # the reader: a response is due
                    continue
                deadline = min((e.deadline for e in queue), default=math.inf)
                with anyio.move_on_after(max(deadline - now, 0.0) if queue else None):
                    await self._writer_event().wait()
            if self.closed:
                self._fail_queued()

    async def _write(self, frame: bytes, deadline: float, what: str) -> None:
        """Write a frame (the writer's turn: nobody else writes meanwhile)."""
        try:
            await self._io.write(frame, deadline)
        except TimeoutError:
            error = KafkaTimeoutError(
                f"{what} to {self} could not be written before its deadline (the broker is not "
                "reading); the connection was closed"
            )
            await self._shutdown(error)
            raise error from None
        except STREAM_ERRORS as exc:
            if not self.closed:
                await self._shutdown(exc)
            raise KafkaConnectionError(
                f"connection to {self} was lost while sending {what}: {describe_error(exc)}"
            ) from exc

    def _closes(self, now: float) -> bool:
        """True if closed. On anyio streams (no timer: waiting senders watch the deadlines)
        a request whose caller gave up may be past its deadline with nobody reading: it
        closes the connection now."""
        machine = self._machine
        if not self._io.writes_at_once and machine.in_flight:
            self.expire(now)
        return machine.state is ConnectionState.CLOSED

    def _closed_error(self) -> KafkaConnectionError:
        reason = self._machine.close_reason
        return KafkaConnectionError(
            f"connection to {self} is closed{f': {reason}' if reason is not None else ''}"
        )

    def _not_sent_error(self, entry: _Queued, now: float) -> KafkaTimeoutError:
        what = f"{api_name(type(entry.request))} request (v{entry.version}) to {self}"
        seconds = entry.deadline - entry.queued_at
        if not entry.expects:
            return KafkaTimeoutError(
                f"{what} could not be written within {seconds:g} s (the broker is not "
                "reading); the connection was closed"
            )
        return KafkaTimeoutError(
            f"{what} could not be sent within {seconds:g} s: "
            f"{self.config.max_in_flight_requests_per_connection} requests were in flight "
            "and none was answered"
        )

    # -- what the I/O reports (ConnectionEvents) ----------------------------------------

    def received(self, data: bytes, now: float) -> None:
        """Bytes arrived: the machine completes the requests they answer."""
        self.last_used = now
        events = self._machine.receive_data(data, now)
        if events:
            self._handle(events)
        self._pump()  # a slot may be free for the head of the queue

    def writable(self) -> None:
        self._pump()

    def lost(self, error: BaseException | None) -> None:
        self._handle(self._machine.connection_lost(error))

    def expire(self, now: float) -> None:
        self._expire_queued(now)
        machine = self._machine
        event = machine.expire(now)
        if event is not None:
            self._handle((event,))
        elif machine.in_flight:
            deadline = machine.next_deadline()
            if deadline is not None:
                self._io.watch(deadline)
        if self._queue:
            self._io.watch(min(e.deadline for e in self._queue))

    def _handle(self, events: Sequence[Event]) -> None:
        setup = self._setup_events
        for event in events:
            if isinstance(event, Closed):
                self._on_closed(event)
            if setup is not None:
                setup.append(event)
        if setup is not None and self._progress is not None:
            self._progress.complete(None)

    def _on_closed(self, event: Closed) -> None:
        """The machine closed (every request in flight failed): drop the socket."""
        self._io.abort()
        self._fail_queued()
        self._wake_writer()  # the writer and reader of anyio streams end
        renewal = self._renewal
        if renewal is not None and renewal is not asyncio.current_task():
            renewal.cancel()  # closed while it renewed the SASL session: nothing to renew
        if not self._announced:
            return  # connect() raises what went wrong
        if event.cause is None:
            log.info("closed connection to %s", self)
        else:
            log.warning(
                "connection to %s lost (%d in-flight requests failed): %s",
                self,
                event.failed,
                describe_error(event.cause),
            )

    # -- closing ------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the connection; requests still in flight fail with KafkaConnectionError.

        Completes promptly (at most about half a second for a TLS close), even when called
        from a cancelled task.
        """
        await self._shutdown(None)

    async def _shutdown(self, cause: BaseException | None) -> None:
        """Close the machine (failing every request in flight) and the socket. Idempotent."""
        event = self._machine.close(cause)
        if event is not None:
            self._on_closed(event)
        await self._io.aclose(_CLOSE_GRACE)

    # -- description --------------------------------------------------------------------

    def __str__(self) -> str:
        return self._machine.peer

    def __repr__(self) -> str:
        return (
            f"<Connection {self} {self.state.value} "
            f"{self.config.security_protocol} in_flight={self.in_flight}>"
        )


async def _sasl_step(mechanism: SaslMechanism, challenge: bytes) -> bytes | None:
    """``mechanism.step(challenge)``, with SCRAM's PBKDF2 run in a worker thread: thousands of
    iterations take milliseconds, and the event loop keeps serving other connections."""
    if isinstance(mechanism, ScramMechanism) and mechanism.awaits_server_first:
        first = mechanism.server_first(challenge)
        salted = await anyio.to_thread.run_sync(mechanism.salted_password, first)
        return mechanism.client_final(first, salted)
    return mechanism.step(challenge)


def _check_address(host: object, port: object, who: str) -> None:
    """Refuse an address no socket can reach (a broker's metadata may carry any value)."""
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise KafkaConnectionError(
            f"cannot connect to {who}: port {port!r} is not in 1-65535; check "
            "bootstrap_servers and the brokers' advertised listeners"
        )
    if not isinstance(host, str) or not host or "\x00" in host or not host.isprintable():
        raise KafkaConnectionError(
            f"cannot connect to {who}: host {host!r} is not a valid host name; check "
            "bootstrap_servers and the brokers' advertised listeners"
        )


def _wire_possible(config: ConnectionConfig) -> bool:
    """Plain TCP under asyncio takes the AsyncioWire fast path (unless turned off)."""
    if config.uses_tls or not USE_ASYNCIO_WIRE:
        return False
    return running_asyncio()


async def _open_transport(
    host: str, port: int, config: ConnectionConfig, who: str
) -> anyio.abc.ByteStream | AsyncioWire:
    try:
        transport: anyio.abc.ByteStream | AsyncioWire
        if _wire_possible(config):
            transport = await open_wire(host, port)
        elif config.uses_tls:
            transport = await anyio.connect_tcp(
                host,
                port,
                tls=True,
                ssl_context=config.ssl_context,
                tls_hostname=host,
                tls_standard_compatible=False,
            )
        else:
            transport = await anyio.connect_tcp(host, port)
    except ssl.SSLCertVerificationError as exc:
        raise SslAuthenticationError(
            f"TLS: the certificate of {who} was rejected ({exc.verify_message}); check that "
            "ssl_context trusts the broker's CA and that the certificate names the host you "
            "connect to"
        ) from exc
    except ssl.SSLError as exc:
        raise SslAuthenticationError(
            f"TLS handshake with {who} failed ({exc.reason or exc}); check that the listener "
            "uses TLS (security_protocol SSL/SASL_SSL) and accepts this client"
        ) from exc
    except UnicodeError as exc:  # the name cannot be looked up (an empty or 64+ char label)
        raise KafkaConnectionError(
            f"could not connect to {who}: {host!r} is not a valid host name ({exc}); check "
            "bootstrap_servers and the brokers' advertised listeners"
        ) from exc
    except STREAM_ERRORS as exc:
        hint = "check that the broker is running and reachable at this address"
        if config.uses_tls and isinstance(exc, (anyio.EndOfStream, anyio.BrokenResourceError)):
            hint = "the peer closed during the TLS handshake; is this a TLS listener?"
        raise KafkaConnectionError(
            f"could not connect to {who}: {describe_error(exc)}; {hint}"
        ) from exc
    return transport


def _set_buffer_sizes(raw: Any, config: ConnectionConfig) -> None:
    if raw is None:
        return
    if config.receive_buffer_bytes is not None:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, config.receive_buffer_bytes)
    if config.send_buffer_bytes is not None:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, config.send_buffer_bytes)
