"""One connection to one broker: TCP/TLS, ApiVersions, SASL, then pipelined requests.

Runs on anyio (asyncio or trio). Plain TCP under asyncio goes through an asyncio Protocol
(wire.py): responses complete their requests' futures as they arrive. Otherwise (TLS, trio)
requests are written under a lock and responses are read by whichever waiting task holds the
read lock. Either way no background task outlives a call.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
import os
import socket
import ssl
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread
from anyio.streams.tls import TLSStream

from kafkaio.asynclib import running_asyncio
from kafkaio.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
    NotKafkaPeerError,
    SaslAuthenticationFailedError,
    SslAuthenticationError,
    UnsupportedVersionError,
    error_for_code,
)
from kafkaio.net.config import ConnectionConfig
from kafkaio.net.framing import FrameReader
from kafkaio.net.inflight import CorrelationIds, InFlightRequest, InFlightRequests
from kafkaio.net.reauth import SessionTimer
from kafkaio.net.sasl import (
    OAuthBearerMechanism,
    PlainMechanism,
    SaslMechanism,
    ScramMechanism,
)
from kafkaio.net.turns import Turn, Turns
from kafkaio.net.wire import AsyncioWire, open_wire
from kafkaio.protocol.api import Request
from kafkaio.protocol.frames import decode_response, encode_request, peek_correlation_id
from kafkaio.protocol.messages import (
    REQUESTS,
    ApiVersionsRequest,
    ApiVersionsResponse,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)

log = logging.getLogger("kafkaio.net")

_READ_CHUNK = 256 * 1024
_CLOSE_GRACE = 0.5  # seconds a close may take before the socket is dropped
_UNSUPPORTED_VERSION = 35
_CONNECT_ERRORS = (OSError, anyio.BrokenResourceError, anyio.EndOfStream)
# Plain TCP connections under asyncio use AsyncioWire; KAFKAIO_ASYNCIO_WIRE=0 switches to the
# anyio stream path that TLS and trio use (the tests run both).
USE_ASYNCIO_WIRE = os.environ.get("KAFKAIO_ASYNCIO_WIRE", "1") != "0"

R = TypeVar("R")


class _Send(Protocol):
    """How `_authenticate` sends a request: `Connection.send` or `_send_in_line`."""

    async def __call__(self, request: Request[R], *, version: int) -> R: ...


# what `Connection.send_soon` calls with the outcome: (response, None) or (None, error)
ResponseCallback = Callable[[Any, "BaseException | None"], None]


class ConnectionState(enum.Enum):
    CONNECTING = "connecting"
    AUTHENTICATING = "authenticating"
    READY = "ready"
    CLOSED = "closed"


class _Waiter:
    """The response slot of one request; polled by its sender, filled by any reader."""

    __slots__ = ("done", "registered", "_value", "_error")

    def __init__(self) -> None:
        self.done = False
        self.registered = False  # in the in-flight table (so it holds an in-flight permit)
        self._value: Any = None
        self._error: BaseException | None = None

    def set_result(self, value: Any) -> None:
        if not self.done:
            self.done = True
            self._value = value

    def set_exception(self, error: BaseException) -> None:
        if not self.done:
            self.done = True
            self._error = error

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value


class _FutureWaiter:
    """The response slot of one request on an AsyncioWire: completes an asyncio future."""

    __slots__ = ("future",)

    def __init__(self, future: asyncio.Future[Any]) -> None:
        self.future = future

    @property
    def done(self) -> bool:
        return self.future.done()

    def set_result(self, value: Any) -> None:
        if not self.future.done():
            self.future.set_result(value)

    def set_exception(self, error: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(error)


class _CallbackWaiter:
    """The response slot of one request sent with `Connection.send_soon`: hands the outcome
    to ``on_done(response, None)`` or ``on_done(None, error)`` through ``loop.call_soon``
    (in turn with the other callbacks the same read made ready: no task switch, and no
    response jumps the queue). With ``on_read`` a response goes to ``on_done`` at once,
    from the read that completed it (an error still goes through the loop: failures come
    from inside the connection's own bookkeeping, e.g. while it closes)."""

    __slots__ = ("done", "loop", "on_done", "on_read", "timer")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, on_done: ResponseCallback, on_read: bool
    ) -> None:
        self.done = False
        self.loop = loop
        self.on_done = on_done
        self.on_read = on_read
        self.timer: asyncio.TimerHandle | None = None  # the request's deadline

    def set_result(self, value: Any) -> None:
        if self.done:
            return
        self._finish()
        if not self.on_read:
            self.loop.call_soon(self.on_done, value, None)
            return
        try:
            self.on_done(value, None)
        except Exception:  # as the loop would for a callback: log it, keep reading
            log.exception("a response callback failed")

    def set_exception(self, error: BaseException) -> None:
        if not self.done:
            self._finish()
            self.loop.call_soon(self.on_done, None, error)

    def _finish(self) -> None:
        self.done = True
        if self.timer is not None:
            self.timer.cancel()


Slot = _Waiter | _FutureWaiter | _CallbackWaiter


def api_name(request_cls: type) -> str:
    """``MetadataRequest`` -> ``Metadata``."""
    name = request_cls.__name__
    return name[: -len("Request")] if name.endswith("Request") else name


class Connection:
    """A ready connection to one broker; create it with :meth:`connect`.

    Many tasks may call :meth:`send` at once: requests are pipelined up to
    ``max_in_flight_requests_per_connection``. A request that gets no answer within its
    timeout raises KafkaTimeoutError and closes the connection (the position in the response
    stream is lost, as in the Java client). When the connection breaks or the broker breaks
    the protocol, every in-flight request fails with KafkaConnectionError and the connection
    is closed; make a new one.
    """

    def __init__(
        self,
        stream: anyio.abc.ByteStream | AsyncioWire,
        host: str,
        port: int,
        config: ConnectionConfig,
        node_id: int | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.config = config
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.session = SessionTimer()  # the SASL session: when to re-authenticate (KIP-368)
        self.state = ConnectionState.CONNECTING
        self.last_used = anyio.current_time()
        self._wire: AsyncioWire | None = None
        self._stream: anyio.abc.ByteStream | None = None
        if isinstance(stream, AsyncioWire):
            self._wire = stream
        else:
            self._stream = stream
        self._stream_closed = False
        self._reader = FrameReader(config.max_response_size)
        self._ids = CorrelationIds()
        limit = config.max_in_flight_requests_per_connection
        self._inflight: InFlightRequests[Slot] = InFlightRequests(limit)
        self._capacity = anyio.Semaphore(limit)
        # senders waiting to write, in the order they called: requests go out in that order
        self._turns = Turns()
        self._read_lock = anyio.Lock()
        self._close_reason: BaseException | None = None
        # the request of a session renewal in flight: it holds no in-flight permit
        self._renewal_slot: Slot | None = None
        if self._wire is not None:
            self._wire.attach(self._on_wire_data, self._on_wire_lost)

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
                stream = await _open_stream(host, port, config, who)
                conn = cls(stream, host, port, config, node_id)
                await conn._negotiate_api_versions()
                if config.uses_sasl:
                    await conn._authenticate()
        except TimeoutError:
            if conn is not None:
                await conn._shutdown(None, log_close=False)
            raise KafkaConnectionError(
                f"could not connect to {who} within connect_timeout_ms={config.connect_timeout_ms}"
                f" ({'TCP/TLS setup' if conn is None else 'broker handshake'} did not finish); "
                "check that the broker is up and reachable and that security_protocol matches "
                "its listener"
            ) from None
        except KafkaError:
            if conn is not None:
                await conn._shutdown(None, log_close=False)
            raise
        except Exception as exc:  # any other failure of the setup is one of this connection
            if conn is not None:
                await conn._shutdown(None, log_close=False)
            raise KafkaConnectionError(
                f"could not set up the connection to {who}: {_text(exc)}; it is retried "
                "after a backoff"
            ) from exc
        except BaseException:
            if conn is not None:
                await conn._shutdown(None, log_close=False)
            raise
        conn.state = ConnectionState.READY
        log.info(
            "connected to %s over %s (%d APIs)",
            who,
            config.security_protocol,
            len(conn.api_versions),
        )
        return conn

    async def _negotiate_api_versions(self) -> None:
        import kafkaio  # at call time: kafkaio/__init__ imports modules that import this one

        request = ApiVersionsRequest(
            client_software_name="kafkaio", client_software_version=kafkaio.__version__
        )
        version = ApiVersionsRequest.MAX_STABLE_VERSION
        while True:
            try:
                response = await self.send(request, version=version)
            except KafkaConnectionError as exc:
                reason = self._close_reason
                if isinstance(reason, KafkaProtocolError):  # the first answer was not Kafka
                    raise NotKafkaPeerError(
                        f"{self} does not speak the Kafka protocol: its answer to ApiVersions "
                        f"is not a Kafka response ({reason}); check bootstrap_servers (the "
                        "port) and security_protocol"
                    ) from exc
                raise
            if response.error_code == _UNSUPPORTED_VERSION and version > 0:
                theirs = [k.max_version for k in response.api_keys if k.api_key == 18]
                fallback = min(theirs[0] if theirs else 0, version - 1)
                log.debug("%s: ApiVersions v%d unsupported, retrying v%d", self, version, fallback)
                version = max(fallback, 0)
                continue
            if response.error_code:
                raise error_for_code(response.error_code)(
                    "ApiVersions failed", node=self.node_id, address=f"{self.host}:{self.port}"
                )
            self.api_versions = {
                k.api_key: (k.min_version, k.max_version) for k in response.api_keys
            }
            return

    async def _authenticate(self, send: _Send | None = None, *, renewal: bool = False) -> None:
        """The SASL exchange: SaslHandshake, then SaslAuthenticate until the mechanism is
        done. ``send`` carries each request (``self.send`` when connecting; a renewal sends
        from the head of the write line, see `_reauthenticate`)."""
        send = self.send if send is None else send
        started = anyio.current_time()
        if not renewal:
            self.state = ConnectionState.AUTHENTICATING
        mechanism_name = self.config.sasl_mechanism
        handshake_version = self.version_for(SaslHandshakeRequest)
        if handshake_version < 1:
            raise UnsupportedVersionError(
                f"{self} only supports SaslHandshake v0 (Kafka before 1.0); kafkaio needs v1"
            )
        try:
            handshake = await send(
                SaslHandshakeRequest(mechanism=mechanism_name), version=handshake_version
            )
        except KafkaConnectionError as exc:
            raise KafkaConnectionError(
                f"{self} closed the connection when asked for SASL {mechanism_name}; check "
                f"that its listener enables {mechanism_name} and expects SASL at all"
            ) from exc
        if handshake.error_code:
            raise error_for_code(handshake.error_code)(
                f"{mechanism_name} was refused; the broker offers {handshake.mechanisms}",
                node=self.node_id,
            )
        mechanism = await self._make_mechanism()
        version = self.version_for(SaslAuthenticateRequest)
        token: bytes | None = mechanism.initial_response()
        lifetime_ms = 0
        while token is not None:
            try:
                response = await send(SaslAuthenticateRequest(auth_bytes=token), version=version)
            except KafkaConnectionError as exc:
                raise KafkaConnectionError(
                    f"{self} closed the connection during SASL {mechanism_name} "
                    f"authentication; check that its listener enables {mechanism_name}"
                ) from exc
            if response.error_code:
                detail = response.error_message or ""
                server_error = getattr(mechanism, "server_error", None)
                if server_error:
                    detail = f"{detail} ({server_error})".strip()
                raise error_for_code(response.error_code)(
                    detail or None, node=self.node_id, mechanism=mechanism_name
                )
            try:
                token = await _sasl_step(mechanism, response.auth_bytes)
            except SaslAuthenticationFailedError as exc:
                raise SaslAuthenticationFailedError(
                    exc.message, node=self.node_id, address=f"{self.host}:{self.port}"
                ) from None
            lifetime_ms = response.session_lifetime_ms
        self.session.authenticated(started, lifetime_ms, renewal=renewal)

    @property
    def session_lifetime_ms(self) -> int:
        """How long the broker said the SASL session lasts (ms; 0: no limit)."""
        return self.session.lifetime_ms

    # -- re-authentication (KIP-368) ----------------------------------------------------

    def _renewal_due(self, now: float) -> bool:
        return self.state is ConnectionState.READY and self.session.due(now)

    async def _reauthenticate(self) -> None:
        """Renew the SASL session on this connection: SaslHandshake and SaslAuthenticate
        again (OAUTHBEARER with a fresh token from the provider), as Java's client does
        once 85-95% of the session lifetime has passed (kafkaio.net.reauth).

        The caller is at the head of the write line and holds no in-flight permit, so no
        other request goes out until the exchange is over; responses to the requests
        already in flight come first (the broker answers in order). A failure closes the
        connection: what is in flight fails with KafkaConnectionError and is retried on a
        new connection, which authenticates from scratch (so a provider that keeps failing
        fails calls as it does when connecting)."""
        try:
            await self._authenticate(self._send_in_line, renewal=True)
        except BaseException as exc:
            error = KafkaConnectionError(
                f"re-authenticating with {self} (the broker ends SASL sessions after "
                f"{self.session.lifetime_ms} ms) failed: {_text(exc)}; the connection was "
                "closed and its requests are retried on a new one"
            )
            error.__cause__ = exc
            await self._shutdown(error)
            if isinstance(exc, Exception):
                raise error from exc
            raise
        log.debug(
            "%s: re-authenticated (%d so far; session of %d ms)",
            self,
            self.session.reauthentications,
            self.session.lifetime_ms,
        )

    async def _send_in_line(self, request: Request[R], *, version: int) -> R:
        """`send` for the renewal exchange, at the head of the write line: no turn, and no
        in-flight permit (the sender that renews may hold the only one): the request is
        one more in flight than the permits allow, and its response frees none."""
        self._check_open()
        seconds = self.config.request_timeout_ms / 1000
        deadline = anyio.current_time() + seconds
        wire = self._wire
        slot = _Waiter() if wire is None else _FutureWaiter(wire.loop.create_future())
        self._renewal_slot = slot
        self._inflight.max_in_flight += 1
        try:
            if isinstance(slot, _FutureWaiter):
                assert wire is not None
                self._write_on_wire(wire, request, version, deadline, slot, metered=False)
                timer = wire.loop.call_at(
                    deadline, self._wire_deadline, slot, request, version, seconds
                )
                try:
                    response: R = await slot.future
                finally:
                    timer.cancel()
                return response
            with anyio.CancelScope(deadline=deadline) as scope:
                await self._write(request, version, slot, deadline)
                await self._wait_for(slot)
            if not slot.done and scope.cancelled_caught:
                cause, error = self._no_response_errors(request, version, seconds)
                await self._shutdown(cause, timed_out=slot, timeout_error=error)
            result: R = slot.result()
            return result
        finally:
            self._inflight.max_in_flight -= 1
            self._renewal_slot = None

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
                    f"the sasl_oauth_token_provider raised {_text(exc)} while connecting to "
                    f"{self}; the connection is retried after a backoff (raise a KafkaError "
                    "from the provider to fail callers at once instead)"
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

    # -- versions -----------------------------------------------------------------------

    def supports(self, request_cls: type) -> bool:
        """True if this broker and kafkaio share a version of the request's API."""
        try:
            self.version_for(request_cls)
        except UnsupportedVersionError:
            return False
        return True

    def version_for(self, request_cls: type) -> int:
        """The highest version of this API that both the broker and kafkaio support."""
        key: int = request_cls.API_KEY  # type: ignore[attr-defined]
        ours = (request_cls.MIN_VERSION, request_cls.MAX_STABLE_VERSION)  # type: ignore[attr-defined]
        theirs = self.api_versions.get(key)
        name = api_name(request_cls)
        if theirs is None:
            raise UnsupportedVersionError(
                f"{self} does not support {name} (api key {key}) at all; kafkaio speaks "
                f"v{ours[0]}-{ours[1]}. Use a broker that implements it",
                api=name,
            )
        low, high = max(ours[0], theirs[0]), min(ours[1], theirs[1])
        if low > high:
            raise UnsupportedVersionError(
                f"{self} supports {name} (api key {key}) v{theirs[0]}-{theirs[1]}, kafkaio "
                f"speaks v{ours[0]}-{ours[1]}: no version in common",
                api=name,
            )
        return int(high)

    # -- requests -----------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self.state is ConnectionState.CLOSED

    @property
    def in_flight(self) -> int:
        """Requests written and not answered yet."""
        return len(self._inflight)

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
        if self._overdue():
            await self._close_overdue()
        self._check_open()
        version = self.version_for(type(request)) if version is None else version
        seconds = self.config.request_timeout_ms / 1000 if timeout is None else timeout
        if self._wire is not None:
            response: R = await self._send_on_wire(self._wire, request, version, seconds)
            return response
        now = anyio.current_time()
        deadline = now + seconds
        self.last_used = now
        waiter = _Waiter()
        turn = self._turns.join()
        with anyio.CancelScope(deadline=deadline) as scope:
            try:
                await anyio.lowlevel.checkpoint_if_cancelled()  # no yield unless cancelled
                await self._permit_and_turn(turn)
                try:
                    await self._write(request, version, waiter, deadline)
                finally:
                    if not waiter.registered:
                        self._capacity.release()
            finally:
                self._turns.leave(turn)
            await self._wait_for(waiter)
        if not waiter.done and scope.cancelled_caught:
            if not waiter.registered:
                raise self._not_sent_error(request, version, seconds)
            cause, error = self._no_response_errors(request, version, seconds)
            await self._shutdown(cause, timed_out=waiter, timeout_error=error)
        self.last_used = anyio.current_time()
        result: R = waiter.result()
        return result

    async def _send_on_wire(
        self, wire: AsyncioWire, request: Any, version: int, seconds: float
    ) -> Any:
        """`send` over an AsyncioWire: write the frame, await the future its response fills."""
        loop = wire.loop
        now = loop.time()  # anyio's clock on asyncio
        deadline = now + seconds
        self.last_used = now
        await anyio.lowlevel.checkpoint_if_cancelled()  # no yield unless cancelled
        future: asyncio.Future[Any] = loop.create_future()
        slot = _FutureWaiter(future)
        # no one waits and a permit is free: write at once; else wait for both, in line
        # (and re-authenticate at the head of the line when the session is due)
        if self._turns or self._renewal_due(now) or not _take(self._capacity):
            turn: Turn | None = self._turns.join()
        else:
            turn = None
        try:
            if turn is not None:
                with anyio.CancelScope(deadline=deadline) as scope:
                    await self._permit_and_turn(turn)
                if scope.cancelled_caught:
                    raise self._not_sent_error(request, version, seconds) from None
                if self.state is ConnectionState.CLOSED:
                    self._capacity.release()
                    self._check_open()
            self._write_on_wire(wire, request, version, deadline, slot)
        finally:
            if turn is not None:
                self._turns.leave(turn)
        timer = loop.call_at(deadline, self._wire_deadline, slot, request, version, seconds)
        try:
            response = await future
        finally:
            timer.cancel()
        self.last_used = loop.time()
        return response

    def send_soon(
        self,
        request: Any,
        version: int,
        timeout: float | None,
        on_done: ResponseCallback,
        *,
        on_read: bool = False,
    ) -> bool:
        """Write ``request`` now, without waiting, if this is an open asyncio connection
        with an in-flight permit free; its outcome goes to ``on_done(response, None)`` or
        ``on_done(None, error)`` (a KafkaTimeoutError or KafkaConnectionError, as :meth:`send`
        raises them), called soon after the response is read, through the event loop (with
        ``on_read``, a response is handed over from the read itself, ahead of the callbacks
        already queued; ``on_done`` may then send on this connection).
        Returns False, having done nothing, when the request cannot go this way (TLS, trio,
        a closed connection, every permit taken: use :meth:`send`); raises what encoding
        the request raises."""
        wire = self._wire
        if wire is None or self.state is not ConnectionState.READY or self._turns:
            return False
        if self._overdue():
            self._fail(self._overdue_error())
            return False  # `send` then says the connection is closed
        loop = wire.loop
        now = loop.time()
        if self.session.due(now):
            return False  # `send` re-authenticates first
        if not _take(self._capacity):
            return False
        seconds = self.config.request_timeout_ms / 1000 if timeout is None else timeout
        deadline = now + seconds
        slot = _CallbackWaiter(loop, on_done, on_read)
        self._write_on_wire(wire, request, version, deadline, slot)
        self.last_used = now
        slot.timer = loop.call_at(deadline, self._wire_deadline, slot, request, version, seconds)
        return True

    def _write_on_wire(
        self,
        wire: AsyncioWire,
        request: Any,
        version: int,
        deadline: float,
        slot: _FutureWaiter | _CallbackWaiter,
        *,
        metered: bool = True,
    ) -> None:
        """Encode `request` under the next correlation id, note it in flight with `slot` and
        write its frame (an in-flight permit is held unless not ``metered``: released again
        if encoding fails)."""
        try:
            correlation_id = self._ids.next()
            frame = encode_request(request, version, correlation_id, self.config.client_id)
        except BaseException:
            if metered:
                self._capacity.release()
            raise
        self._inflight.add(correlation_id, request.API_KEY, version, deadline, slot)
        wire.write(frame)  # the transport buffers the whole frame: it is never cut in half

    def _wire_deadline(
        self, slot: _FutureWaiter | _CallbackWaiter, request: Any, version: int, seconds: float
    ) -> None:
        """A request on the wire got no response in time: fail it and close the connection."""
        if slot.done:
            return
        cause, error = self._no_response_errors(request, version, seconds)
        self._fail(cause, timed_out=slot, timeout_error=error)

    def _not_sent_error(self, request: Any, version: int, seconds: float) -> KafkaTimeoutError:
        return KafkaTimeoutError(
            f"{api_name(type(request))} request (v{version}) to {self} could not be sent "
            f"within {seconds:g} s: {self.config.max_in_flight_requests_per_connection} "
            "requests were in flight and none was answered"
        )

    def _no_response_errors(
        self, request: Any, version: int, seconds: float
    ) -> tuple[KafkaTimeoutError, KafkaTimeoutError]:
        """(why the connection closes, what the request that timed out raises)."""
        what = f"{api_name(type(request))} request (v{version}) to {self}"
        return KafkaTimeoutError(
            f"a request got no response within {seconds:g} s"
        ), KafkaTimeoutError(
            f"{what} got no response within {seconds:g} s; the connection was closed. "
            "Check the broker's health, or raise request_timeout_ms for slow requests"
        )

    def _on_wire_data(self, data: bytes) -> None:
        assert self._wire is not None
        self.last_used = self._wire.loop.time()
        error = self._dispatch(data)
        if error is not None:
            self._fail(error)

    def _on_wire_lost(self, exc: BaseException | None) -> None:
        if self.state is ConnectionState.CLOSED:
            return
        if exc is None:
            where = " in the middle of a response" if self._reader.mid_frame else ""
            exc = KafkaConnectionError(f"the broker closed the connection{where}")
        self._fail(exc)

    def _fail(
        self,
        cause: BaseException,
        *,
        timed_out: Slot | None = None,
        timeout_error: BaseException | None = None,
    ) -> None:
        """Close a wire connection from a callback: fail what is in flight, drop the socket."""
        self._mark_closed(cause, timed_out=timed_out, timeout_error=timeout_error)
        if self._wire is not None and not self._stream_closed:
            self._stream_closed = True
            self._wire.abort()

    async def send_no_response(self, request: Any, version: int | None = None) -> None:
        """Write a request the broker does not answer (Produce with acks=0)."""
        self._check_open()
        version = self.version_for(type(request)) if version is None else version
        seconds = self.config.request_timeout_ms / 1000
        now = anyio.current_time()
        deadline = now + seconds
        self.last_used = now
        with anyio.CancelScope(deadline=deadline) as scope:
            wire = self._wire
            due = self._renewal_due(now)
            turn = self._turns.join() if self._turns or wire is None or due else None
            try:
                if turn is not None:
                    await self._turns.wait(turn)
                    if self._renewal_due(anyio.current_time()):
                        await self._reauthenticate()
                if wire is not None:
                    self._check_open()
                    frame = encode_request(
                        request, version, self._ids.next(), self.config.client_id
                    )
                    wire.write(frame)
                else:
                    await self._write(request, version, None, deadline)
            finally:
                if turn is not None:
                    self._turns.leave(turn)
            if wire is not None and wire.paused:
                await wire.drained()  # the broker is not reading: wait (bounded by the deadline)
        if scope.cancelled_caught:
            if wire is not None:
                self._fail(KafkaTimeoutError("the broker did not read a request in time"))
            raise KafkaTimeoutError(
                f"{api_name(type(request))} request to {self} could not be written within "
                f"{seconds:g} s"
            )
        self.last_used = anyio.current_time()

    def _overdue(self) -> bool:
        """A request on the wire is past its deadline. Its sender gave up first (it was
        cancelled, e.g. by a shorter timeout of its own), so nothing closed the connection
        then; a broker that never answers would keep the request's in-flight permit for
        good. As Java's NetworkClient closes a connection at request_timeout_ms whoever
        waits, the next request closes it instead (and the caller's retry reconnects)."""
        if not self._inflight or self.state is ConnectionState.CLOSED:
            return False
        deadline = self._inflight.next_deadline()
        return deadline is not None and deadline <= anyio.current_time()

    def _overdue_error(self) -> KafkaTimeoutError:
        return KafkaTimeoutError(
            f"a request to {self} got no response within its timeout (its caller had given "
            "up waiting); the connection was closed"
        )

    async def _close_overdue(self) -> None:
        if self._wire is not None:
            self._fail(self._overdue_error())
        else:
            await self._shutdown(self._overdue_error())

    def _check_open(self) -> None:
        if self.state is ConnectionState.CLOSED:
            reason = f": {self._close_reason}" if self._close_reason is not None else ""
            raise KafkaConnectionError(f"connection to {self} is closed{reason}")

    async def _permit_and_turn(self, turn: Turn) -> None:
        """Take an in-flight permit, then wait for `turn`: every sender that called before
        has written (a sender woken for a permit may run after one that came later). At
        the head of the line, re-authenticate first if the SASL session is due."""
        await _acquire(self._capacity)
        try:
            await self._turns.wait(turn)
            if self._renewal_due(anyio.current_time()):
                await self._reauthenticate()
        except BaseException:
            self._capacity.release()
            raise

    async def _write(
        self, request: Any, version: int, waiter: _Waiter | None, deadline: float
    ) -> None:
        """Write `request` (the caller's turn: no other sender writes meanwhile)."""
        self._check_open()
        correlation_id = self._ids.next()
        frame = encode_request(request, version, correlation_id, self.config.client_id)
        if waiter is not None:
            self._inflight.add(correlation_id, request.API_KEY, version, deadline, waiter)
            waiter.registered = True
        # A frame cut in half would desynchronise the stream: never cancel mid-write,
        # except at the request's own deadline (which then closes the connection).
        with anyio.CancelScope(deadline=deadline, shield=True) as write_scope:
            try:
                assert self._stream is not None
                await self._stream.send(frame)
            except (anyio.ClosedResourceError, *_CONNECT_ERRORS) as exc:
                if self.state is not ConnectionState.CLOSED:
                    await self._shutdown(exc)
                raise KafkaConnectionError(
                    f"connection to {self} was lost while sending "
                    f"{api_name(type(request))}: {_text(exc)}"
                ) from exc
        if write_scope.cancelled_caught:
            error = KafkaTimeoutError(
                f"{api_name(type(request))} request to {self} could not be written before "
                "its deadline (the broker is not reading); the connection was closed"
            )
            await self._shutdown(error)
            raise error

    async def _wait_for(self, waiter: _Waiter) -> None:
        while not waiter.done:
            await _acquire(self._read_lock)
            try:
                if waiter.done:
                    return
                if self.state is ConnectionState.CLOSED:
                    waiter.set_exception(KafkaConnectionError(f"connection to {self} is closed"))
                    return
                await self._read_once()
            finally:
                self._read_lock.release()

    async def _read_once(self) -> None:
        assert self._stream is not None
        try:
            data = await self._stream.receive(_READ_CHUNK)
        except anyio.EndOfStream:
            where = " in the middle of a response" if self._reader.mid_frame else ""
            await self._shutdown(KafkaConnectionError(f"the broker closed the connection{where}"))
            return
        except (anyio.ClosedResourceError, *_CONNECT_ERRORS) as exc:
            if self.state is not ConnectionState.CLOSED:
                await self._shutdown(exc)
            return
        error = self._dispatch(data)
        if error is not None:
            await self._shutdown(error)

    def _dispatch(self, data: bytes) -> KafkaProtocolError | None:
        """Complete the requests whose responses `data` finishes; a protocol error (the
        connection must then close) is returned."""
        try:
            for frame in self._reader.feed(data):
                entry = self._inflight.pop_response(peek_correlation_id(frame))
                if entry.slot is not self._renewal_slot:
                    self._capacity.release()
                try:
                    response = decode_response(entry.api_key, entry.api_version, frame)
                except Exception as exc:  # a codec failure of any kind is a protocol error
                    response = _unsupported_api_versions(entry, frame)
                    if response is None:
                        error = _as_protocol_error(exc, entry)
                        entry.slot.set_exception(error)
                        return error
                entry.slot.set_result(response)
        except KafkaProtocolError as exc:
            return exc
        return None

    # -- closing ------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the connection; requests still in flight fail with KafkaConnectionError.

        Completes promptly (at most about half a second for a TLS close), even when called
        from a cancelled task.
        """
        await self._shutdown(None)

    async def _shutdown(
        self,
        cause: BaseException | None,
        *,
        timed_out: Slot | None = None,
        timeout_error: BaseException | None = None,
        log_close: bool = True,
    ) -> None:
        """Mark closed, fail every in-flight request, close the stream. Idempotent."""
        self._mark_closed(
            cause, timed_out=timed_out, timeout_error=timeout_error, log_close=log_close
        )
        await self._close_stream()

    def _mark_closed(
        self,
        cause: BaseException | None,
        *,
        timed_out: Slot | None = None,
        timeout_error: BaseException | None = None,
        log_close: bool = True,
    ) -> None:
        if self.state is ConnectionState.CLOSED:
            return
        self.state = ConnectionState.CLOSED
        self._close_reason = cause

        def error_for(entry: InFlightRequest[Slot]) -> BaseException:
            if entry.slot is timed_out and timeout_error is not None:
                return timeout_error
            name = _api_name_for_key(entry.api_key)
            if cause is None:
                error = KafkaConnectionError(
                    f"{name} request to {self} was still in flight when the connection was closed"
                )
            else:
                why = str(cause) if isinstance(cause, KafkaConnectionError) else _text(cause)
                error = KafkaConnectionError(
                    f"{name} request to {self} failed because the connection was lost "
                    f"({why}); retry on a new connection"
                )
            error.__cause__ = cause
            return error

        failed = self._inflight.fail_all(error_for)
        for entry in failed:
            if entry.slot is not self._renewal_slot:
                self._capacity.release()
        if not log_close:
            pass
        elif cause is None:
            log.info("closed connection to %s", self)
        else:
            log.warning(
                "connection to %s lost (%d in-flight requests failed): %s",
                self,
                len(failed),
                _text(cause),
            )

    async def _close_stream(self) -> None:
        wire = self._wire
        if wire is not None:
            if not self._stream_closed:
                self._stream_closed = True
                wire.close()
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(_CLOSE_GRACE):
                    await wire.closed()  # the socket is closed once the transport says so
                    return
                wire.abort()
                await anyio.lowlevel.checkpoint()
            return
        if self._stream_closed:
            return
        self._stream_closed = True
        assert self._stream is not None
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(_CLOSE_GRACE):
                try:
                    await self._stream.aclose()
                except Exception:  # closing a broken stream may fail; it is closed anyway
                    pass
                return
            await anyio.aclose_forcefully(self._stream)

    # -- description --------------------------------------------------------------------

    def __str__(self) -> str:
        return describe_node(self.host, self.port, self.node_id)

    def __repr__(self) -> str:
        return (
            f"<Connection {self} {self.state.value} "
            f"{self.config.security_protocol} in_flight={len(self._inflight)}>"
        )


def _take(resource: anyio.Lock | anyio.Semaphore) -> bool:
    """Take a free lock or permit now; False if it is taken."""
    try:
        resource.acquire_nowait()
    except anyio.WouldBlock:
        return False
    return True


async def _acquire(resource: anyio.Lock | anyio.Semaphore) -> None:
    """Take a free lock or permit without a trip through the event loop (anyio's own
    ``acquire`` always yields once); wait in line only when it is taken."""
    if not _take(resource):
        await resource.acquire()


async def _sasl_step(mechanism: SaslMechanism, challenge: bytes) -> bytes | None:
    """``mechanism.step(challenge)``, with SCRAM's PBKDF2 run in a worker thread: thousands of
    iterations take milliseconds, and the event loop keeps serving other connections."""
    if isinstance(mechanism, ScramMechanism) and mechanism.awaits_server_first:
        first = mechanism.server_first(challenge)
        salted = await anyio.to_thread.run_sync(mechanism.salted_password, first)
        return mechanism.client_final(first, salted)
    return mechanism.step(challenge)


def describe_node(host: str, port: int, node_id: int | None) -> str:
    if not isinstance(host, str) or not host.isprintable():  # metadata may carry anything
        host = repr(host)
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return f"node {node_id} ({address})" if node_id is not None else f"broker {address}"


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


def _text(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _api_name_for_key(api_key: int) -> str:
    pair = REQUESTS.get(api_key)
    return api_name(pair[0]) if pair else f"api key {api_key}"


def _unsupported_api_versions(entry: InFlightRequest[Slot], frame: memoryview) -> Any:
    """An ApiVersions answer of UNSUPPORTED_VERSION whose body does not decode, else None.

    Some brokers (librdkafka's mock cluster) answer a too-new ApiVersions request with a body
    in neither the requested version nor v0; only its leading error code is reliable. The
    negotiation then falls back to v0, which every broker speaks.
    """
    if entry.api_key != ApiVersionsRequest.API_KEY or len(frame) < 6:
        return None
    if int.from_bytes(frame[4:6], "big", signed=True) != _UNSUPPORTED_VERSION:
        return None
    return ApiVersionsResponse(error_code=_UNSUPPORTED_VERSION)


def _as_protocol_error(exc: Exception, entry: InFlightRequest[Slot]) -> KafkaProtocolError:
    name = _api_name_for_key(entry.api_key)
    if isinstance(exc, KafkaProtocolError):
        return KafkaProtocolError(
            f"could not decode the {name} v{entry.api_version} response: {exc}"
        )
    return KafkaProtocolError(
        f"could not decode the {name} v{entry.api_version} response ({_text(exc)})"
    )


def _wire_possible(config: ConnectionConfig) -> bool:
    """Plain TCP under asyncio takes the AsyncioWire fast path (unless turned off)."""
    if config.uses_tls or not USE_ASYNCIO_WIRE:
        return False
    return running_asyncio()


async def _open_stream(
    host: str, port: int, config: ConnectionConfig, who: str
) -> anyio.abc.ByteStream | AsyncioWire:
    try:
        stream: anyio.abc.ByteStream | AsyncioWire
        if _wire_possible(config):
            stream = await open_wire(host, port)
        elif config.uses_tls:
            stream = await anyio.connect_tcp(
                host,
                port,
                tls=True,
                ssl_context=config.ssl_context,
                tls_hostname=host,
                tls_standard_compatible=False,
            )
        else:
            stream = await anyio.connect_tcp(host, port)
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
    except (*_CONNECT_ERRORS, anyio.ClosedResourceError) as exc:
        hint = "check that the broker is running and reachable at this address"
        if config.uses_tls and isinstance(exc, (anyio.EndOfStream, anyio.BrokenResourceError)):
            hint = "the peer closed during the TLS handshake; is this a TLS listener?"
        raise KafkaConnectionError(f"could not connect to {who}: {_text(exc)}; {hint}") from exc
    _set_buffer_sizes(stream, config)
    return stream


def _set_buffer_sizes(stream: anyio.abc.ByteStream | AsyncioWire, config: ConnectionConfig) -> None:
    if config.receive_buffer_bytes is None and config.send_buffer_bytes is None:
        return
    if isinstance(stream, AsyncioWire):
        raw = stream.socket()
    else:
        raw = stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
    if raw is None and isinstance(stream, TLSStream):
        raw = stream.transport_stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
    if raw is None:
        return
    if config.receive_buffer_bytes is not None:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, config.receive_buffer_bytes)
    if config.send_buffer_bytes is not None:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, config.send_buffer_bytes)
