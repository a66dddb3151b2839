"""One connection to one broker: a socket under the connection's state machine.

`ConnectionMachine` (state.py) holds the protocol: versions, SASL, correlation ids, requests
in flight and their deadlines. This module opens the socket (TCP or TLS, on asyncio or
trio), runs the machine's set-up steps, and sends requests in one place: a sender waits for
its turn and a free in-flight slot in the connection's line, its frame is written, and its
waiter (a Completion) is completed by the machine when the response is read. The I/O is
one of two adapters: `wire.AsyncioWire` (plain TCP under asyncio: bytes are fed to the
machine as they arrive) or `stream.StreamIO` (anyio streams: TLS, trio).
"""

from __future__ import annotations

import inspect
import logging
import os
import socket
import ssl
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
from kafkaio.net.turns import Turns
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


class Connection:
    """A ready connection to one broker; create it with :meth:`connect`.

    Many tasks may call :meth:`send` at once: requests are pipelined up to
    ``max_in_flight_requests_per_connection`` and written in the order send was called. A
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
        # senders waiting to write, in the order they called: requests go out in that order
        self._line = Turns()
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

        :meth:`send` does it before a request once 85-95% of the session the broker granted
        has passed (`session`), as Java's client does. Requests in flight are answered
        first; requests sent meanwhile wait in line (none is lost). Bounded by
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
            if self._line:
                self._line.notify()  # ready: requests waiting in line go on

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

    async def send(
        self, request: Request[R], *, version: int | None = None, timeout: float | None = None
    ) -> R:
        """Send ``request`` and return the broker's response (an ``XRequest`` gets an
        ``XResponse``: generated requests are ``Request[XResponse]``).

        ``version`` defaults to :meth:`version_for`; ``timeout`` (seconds) to
        ``request_timeout_ms``. Raises KafkaTimeoutError (and closes the connection if the
        request was sent), KafkaConnectionError if the connection is or becomes closed,
        KafkaProtocolError if the response cannot be decoded.
        """
        io = self._io
        now, version = await self._before_sending(request, version)
        waiter: Completion[R] = Completion()
        await self._submit(request, version, now, self._deadline(now, timeout), waiter)
        await io.wait(waiter)
        return waiter.result()

    def send_soon(
        self, request: Request[R], version: int, timeout: float | None = None
    ) -> Completion[R] | None:
        """Write ``request`` now, without waiting, if the connection can take it at once (an
        open asyncio connection, nobody in line, an in-flight slot free); returns the
        Completion its response completes (or its failure: KafkaTimeoutError,
        KafkaConnectionError, as :meth:`send` raises them), from the read that got it.
        Returns None, having done nothing, when it cannot (TLS, trio, set-up or closed, every
        slot taken, others waiting: use :meth:`send`); raises what encoding raises."""
        io = self._io
        machine = self._machine
        if not io.writes_at_once or self._line or not machine.can_send:
            return None
        now = io.now()
        if machine.renewal_due(now):
            return None  # the session must be renewed first: `send` does it
        waiter: Completion[R] = Completion()
        self._write_now(request, version, now, self._deadline(now, timeout), waiter)
        return waiter

    async def send_no_response(self, request: Request[Any], version: int | None = None) -> None:
        """Write a request the broker does not answer (Produce with acks=0): in turn, as
        :meth:`send` does; returns once it is written (bounded by ``request_timeout_ms``)."""
        io = self._io
        now, version = await self._before_sending(request, version)
        deadline = self._deadline(now, None)
        with anyio.CancelScope(deadline=deadline) as scope:
            await self._submit(request, version, now, deadline, None)
            await io.drain()  # the broker is not reading: wait (bounded by the deadline)
        if scope.cancelled_caught:
            error = KafkaTimeoutError(
                f"{api_name(type(request))} request to {self} could not be written within "
                f"{deadline - now:g} s"
            )
            await self._shutdown(KafkaTimeoutError("the broker did not read a request in time"))
            raise error

    async def _before_sending(
        self, request: Request[Any], version: int | None
    ) -> tuple[float, int]:
        """What `send` and `send_no_response` do first: raise KafkaConnectionError if the
        connection is closed; the time and the version to send (``version`` or the highest
        both sides speak). A due SASL renewal is `_submit`'s, at the head of the line."""
        io = self._io
        now = io.now()
        if (self._machine.state is not ConnectionState.READY or not io.writes_at_once) and (
            self._closes(now)
        ):
            await io.aclose(_CLOSE_GRACE)
            raise self._closed_error()
        if version is None:
            version = self._machine.version_for(type(request))
        return now, version

    def _deadline(self, now: float, timeout: float | None) -> float:
        return now + (self._request_timeout if timeout is None else timeout)

    async def _submit(
        self,
        request: Request[Any],
        version: int,
        now: float,
        deadline: float,
        waiter: Completion[Any] | None,
    ) -> None:
        """The one way a request goes out: wait for its turn in the line (every sender that
        called before has written) and for the machine to take it (READY, and an in-flight
        slot free if it expects a response), renew the SASL session if it is due (KIP-368:
        a broker with ``connections.max.reauth.ms`` closes a connection that sends a request
        after its session ended), then write its frame."""
        await anyio.lowlevel.checkpoint_if_cancelled()  # no yield unless cancelled
        machine = self._machine
        if (
            self._io.writes_at_once
            and not self._line
            and machine.can_send
            and not machine.renewal_due(now)
        ):
            self._write_now(request, version, now, deadline, waiter)  # nobody to wait for
            return
        line = self._line
        turn = line.join()
        try:
            takes = self._takes_a_request if waiter is not None else self._takes_any
            if not (line.first(turn) and takes()):
                with anyio.CancelScope(deadline=deadline) as scope:
                    await line.wait(turn, takes)
                if scope.cancelled_caught:
                    raise self._not_sent_error(request, version, deadline - now)
            if machine.renewal_due(self._io.now()):
                # at the head of the line: those behind wait until it is done, in order
                await self.reauthenticate()
                now = self._io.now()
            frame = machine.send(request, version, now, deadline, waiter)
            self.last_used = now
            await self._write(frame, deadline, api_name(type(request)))
            self._io.watch(deadline)
        finally:
            line.leave(turn)

    def _write_now(
        self,
        request: Request[Any],
        version: int,
        now: float,
        deadline: float,
        waiter: Completion[Any] | None,
    ) -> None:
        io = self._io
        io.write_now(self._machine.send(request, version, now, deadline, waiter))
        io.watch(deadline)
        self.last_used = now

    async def _write(self, frame: bytes, deadline: float, what: str) -> None:
        """Write a frame (the writer's turn: no other sender writes meanwhile)."""
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

    def _takes_a_request(self) -> bool:
        """The head of the line may go: an in-flight slot is free (or it is closed: then the
        sender learns it)."""
        machine = self._machine
        return machine.can_send or machine.closed

    def _takes_any(self) -> bool:
        """The head of the line may go with a request the broker does not answer."""
        state = self._machine.state
        return state is ConnectionState.READY or state is ConnectionState.CLOSED

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

    def _not_sent_error(self, request: Any, version: int, seconds: float) -> KafkaTimeoutError:
        return KafkaTimeoutError(
            f"{api_name(type(request))} request (v{version}) to {self} could not be sent "
            f"within {seconds:g} s: {self.config.max_in_flight_requests_per_connection} "
            "requests were in flight and none was answered"
        )

    # -- what the I/O reports (ConnectionEvents) ----------------------------------------

    def received(self, data: bytes, now: float) -> None:
        """Bytes arrived: the machine completes the requests they answer."""
        self.last_used = now
        events = self._machine.receive_data(data, now)
        if self._line:
            self._line.notify()  # a slot may be free for the sender at the head
        if events:
            self._handle(events)

    def lost(self, error: BaseException | None) -> None:
        self._handle(self._machine.connection_lost(error))

    def expire(self, now: float) -> None:
        machine = self._machine
        event = machine.expire(now)
        if event is not None:
            self._handle((event,))
        elif machine.in_flight:
            deadline = machine.next_deadline()
            if deadline is not None:
                self._io.watch(deadline)

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
        if self._line:
            self._line.notify()  # senders waiting in line learn it
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
