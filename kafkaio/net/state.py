"""The protocol state of one broker connection, sans I/O: versions, SASL, requests in flight.

`ConnectionMachine` owns correlation ids, the in-flight table (with deadlines), response
framing, request headers, the ApiVersions exchange and the SASL steps. It is fed bytes and the
time and returns bytes to write and events; it never touches a socket, reads a clock or
awaits. `kafkaio.net.connection` runs it over a socket.

States (one transition table, `_NEXT`)::

    CONNECTING -> VERSIONS -> (AUTHENTICATING ->) READY -> CLOSED
                                   ^               |
                                   +---------------+  re-authentication (KIP-368)

Any state may go to CLOSED: a protocol error, a request past its deadline, a refusal during
set-up or a lost socket fails every request in flight.

The SASL session the broker granted is timed by a `SessionTimer` (kafkaio.net.reauth):
`renewal_due` says when the I/O side must call `reauthenticate` before its next request. A
failure while re-authenticating closes the machine with a retriable KafkaConnectionError
naming the cause; the client retries on a new connection, which logs in from scratch.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from kafkaio.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
    NotKafkaPeerError,
    UnsupportedVersionError,
    error_for_code,
)
from kafkaio.net.framing import FrameReader
from kafkaio.net.inflight import CorrelationIds, InFlightRequest, InFlightRequests
from kafkaio.net.reauth import SessionTimer
from kafkaio.protocol.api import Request
from kafkaio.protocol.frames import decode_response, encode_request, peek_correlation_id
from kafkaio.protocol.messages import (
    REQUESTS,
    ApiVersionsRequest,
    ApiVersionsResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

if TYPE_CHECKING:
    from kafkaio.net.config import ConnectionConfig
    from kafkaio.net.sasl import SaslMechanism
    from kafkaio.runtime.completion import Completion

log = logging.getLogger("kafkaio.net")

_UNSUPPORTED_VERSION = 35
R = TypeVar("R")


class ConnectionState(enum.Enum):
    CONNECTING = "connecting"  # the socket is being opened: nothing sent yet
    VERSIONS = "versions"  # ApiVersions sent: negotiating versions
    AUTHENTICATING = "authenticating"  # the SASL exchange (first, or a re-authentication)
    READY = "ready"  # requests may be sent
    CLOSED = "closed"  # closed or failed: every request in flight failed


_S = ConnectionState
_NEXT: dict[ConnectionState, frozenset[ConnectionState]] = {
    _S.CONNECTING: frozenset({_S.VERSIONS, _S.CLOSED}),
    _S.VERSIONS: frozenset({_S.AUTHENTICATING, _S.READY, _S.CLOSED}),
    _S.AUTHENTICATING: frozenset({_S.READY, _S.CLOSED}),
    _S.READY: frozenset({_S.AUTHENTICATING, _S.CLOSED}),
    _S.CLOSED: frozenset(),
}


# -- events: what the machine asks of its I/O ----------------------------------------------


@dataclass(frozen=True, slots=True)
class Write:
    """Bytes of a request the machine makes itself (ApiVersions, SASL): write them."""

    data: bytes


@dataclass(frozen=True, slots=True)
class MechanismNeeded:
    """The broker accepted the SASL mechanism: make it (a token provider may be awaited)
    and hand it to `ConnectionMachine.sasl_start`."""

    name: str


@dataclass(frozen=True, slots=True)
class SaslChallenge:
    """The broker answered a SaslAuthenticate: run ``mechanism.step(challenge)`` (SCRAM's
    PBKDF2 is slow: off the event loop) and hand the result to `sasl_continue`."""

    mechanism: SaslMechanism
    challenge: bytes


@dataclass(frozen=True, slots=True)
class Ready:
    """Versions are negotiated and the client authenticated: requests may be sent."""


@dataclass(frozen=True, slots=True)
class Closed:
    """The machine closed: `cause` says why (None: closed on purpose), `failed` requests in
    flight were failed. Close the socket; during set-up, `cause` is the error to raise."""

    cause: BaseException | None
    failed: int


Event = Write | MechanismNeeded | SaslChallenge | Ready | Closed
_NO_EVENTS: tuple[Event, ...] = ()


def api_name(request_cls: type) -> str:
    """``MetadataRequest`` -> ``Metadata``."""
    name = request_cls.__name__
    return name[: -len("Request")] if name.endswith("Request") else name


def api_name_for_key(api_key: int) -> str:
    pair = REQUESTS.get(api_key)
    return api_name(pair[0]) if pair else f"api key {api_key}"


def describe_node(host: str, port: int, node_id: int | None) -> str:
    if not isinstance(host, str) or not host.isprintable():  # metadata may carry anything
        host = repr(host)
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return f"node {node_id} ({address})" if node_id is not None else f"broker {address}"


def describe_error(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ConnectionMachine:
    """The Kafka protocol on one connection, as a state machine (see the module docstring).

    Set-up: `start` returns the ApiVersions request; `receive_data` then returns `Write`
    events for the next set-up requests, `MechanismNeeded` / `SaslChallenge` for the SASL
    steps the I/O side runs (`sasl_start`, `sasl_continue`), and `Ready` at the end.

    Requests: `send` returns a request's frame and notes it in flight with its deadline and
    its waiter (a Completion, completed by `receive_data` with the response or failed with
    an error); `expire` closes the machine once a request is past its deadline. `Closed`
    says the machine closed itself (the socket must be closed too).
    """

    __slots__ = (
        "state",
        "api_versions",
        "session",
        "close_reason",
        "peer",
        "_node_id",
        "_address",
        "_client_id",
        "_request_timeout",
        "_sasl_mechanism",
        "_ids",
        "_inflight",
        "_reader",
        "_mechanism",
        "_reauthenticating",
        "_renewing",
        "_auth_started",
        "_granted_ms",
    )

    def __init__(
        self, config: ConnectionConfig, host: str, port: int, node_id: int | None = None
    ) -> None:
        self.state = ConnectionState.CONNECTING
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.session = SessionTimer()  # the SASL session: when to re-authenticate (KIP-368)
        self.close_reason: BaseException | None = None
        self.peer = describe_node(host, port, node_id)
        self._node_id = node_id
        self._address = f"{host}:{port}"
        self._client_id = config.client_id
        self._request_timeout = config.request_timeout_ms / 1000
        self._sasl_mechanism = config.sasl_mechanism if config.uses_sasl else None
        self._ids = CorrelationIds()
        self._inflight: InFlightRequests[Completion[Any] | None] = InFlightRequests(
            config.max_in_flight_requests_per_connection
        )
        self._reader = FrameReader(config.max_response_size)
        self._mechanism: SaslMechanism | None = None
        self._reauthenticating = False  # a re-authentication waits for the table to empty
        self._renewing = False  # re-authenticating (from READY) until READY again
        self._auth_started = 0.0  # when the SaslHandshake of the current exchange went out
        self._granted_ms = 0  # session_lifetime_ms of the last SaslAuthenticate answer

    def __repr__(self) -> str:
        return f"<ConnectionMachine {self.peer} {self.state.value} in_flight={len(self._inflight)}>"

    # -- state ------------------------------------------------------------------------------

    def _to(self, state: ConnectionState) -> None:
        if state not in _NEXT[self.state]:
            raise KafkaError(
                f"connection to {self.peer}: cannot go from {self.state.value} to {state.value}"
            )
        self.state = state

    @property
    def closed(self) -> bool:
        return self.state is ConnectionState.CLOSED

    @property
    def in_flight(self) -> int:
        """Requests written and not answered yet."""
        return len(self._inflight)

    @property
    def can_send(self) -> bool:
        """True when `send` takes a request expecting a response now (READY, and fewer
        than the in-flight limit are unanswered)."""
        return self.state is ConnectionState.READY and not self._inflight.full

    @property
    def mid_frame(self) -> bool:
        """Part of a response has been received (a loss now cuts a response in half)."""
        return self._reader.mid_frame

    @property
    def session_lifetime_ms(self) -> int:
        """How long the broker keeps the SASL session (0: no limit), from authentication."""
        return self.session.lifetime_ms

    def renewal_due(self, now: float) -> bool:
        """True when the SASL session must be renewed (`reauthenticate`) before the next
        request: 85-95% of the lifetime the broker granted has passed at `now`."""
        return self.session.due(now) and self.state is ConnectionState.READY

    def next_deadline(self) -> float | None:
        """The earliest deadline of a request in flight (None: nothing is in flight)."""
        return self._inflight.next_deadline()

    # -- versions ---------------------------------------------------------------------------

    def supports(self, request_cls: type[Request[Any]]) -> bool:
        """True if this broker and kafkaio share a version of the request's API."""
        try:
            self.version_for(request_cls)
        except UnsupportedVersionError:
            return False
        return True

    def version_for(self, request_cls: type[Request[Any]]) -> int:
        """The highest version of this API that both the broker and kafkaio support."""
        key = request_cls.API_KEY
        low = request_cls.MIN_VERSION
        high = request_cls.MAX_STABLE_VERSION
        theirs = self.api_versions.get(key)
        if theirs is not None:
            low, high = max(low, theirs[0]), min(high, theirs[1])
            if low <= high:
                return high
        ours = (request_cls.MIN_VERSION, request_cls.MAX_STABLE_VERSION)
        name = api_name(request_cls)
        if theirs is None:
            raise UnsupportedVersionError(
                f"{self.peer} does not support {name} (api key {key}) at all; kafkaio speaks "
                f"v{ours[0]}-{ours[1]}. Use a broker that implements it",
                api=name,
            )
        raise UnsupportedVersionError(
            f"{self.peer} supports {name} (api key {key}) v{theirs[0]}-{theirs[1]}, "
            f"kafkaio speaks v{ours[0]}-{ours[1]}: no version in common",
            api=name,
        )

    # -- inputs -----------------------------------------------------------------------------

    def start(self, now: float) -> Write:
        """The socket is open: CONNECTING -> VERSIONS; the ApiVersions request to write.

        Each set-up request must be answered within ``request_timeout_ms`` (`expire`); the
        I/O side bounds the whole set-up (``connect_timeout_ms``, opening the socket too)."""
        self._to(ConnectionState.VERSIONS)
        version = ApiVersionsRequest.MAX_STABLE_VERSION
        return self._setup_request(_api_versions_request(), version, now)

    def send(
        self,
        request: Request[R],
        version: int,
        now: float,
        deadline: float,
        waiter: Completion[R] | None,
    ) -> bytes:
        """The frame of `request` to write now. With a `waiter` it is noted in flight until
        its response completes the waiter (or `deadline` passes); without, the broker sends
        no response (Produce with acks=0). Raises KafkaConnectionError when closed, KafkaError
        when not ready or the in-flight table is full, and what encoding raises."""
        if self.state is not ConnectionState.READY:
            raise self._not_ready()
        correlation_id = self._ids.next()
        frame = encode_request(request, version, correlation_id, self._client_id)
        if waiter is not None:
            self._inflight.add(correlation_id, request.API_KEY, version, now, deadline, waiter)
        return frame

    def receive_data(self, data: bytes, now: float) -> Sequence[Event]:
        """Bytes received at `now`: complete the waiters of the responses they finish, in
        order; return events (set-up steps; `Closed` after a protocol error)."""
        if self.state is ConnectionState.CLOSED:
            return _NO_EVENTS
        try:
            frames = self._reader.feed(data)
        except KafkaProtocolError as exc:
            return self._fail(exc)
        events: Sequence[Event] = _NO_EVENTS
        inflight = self._inflight
        for frame in frames:
            try:
                entry = inflight.pop_response(peek_correlation_id(frame))
            except KafkaProtocolError as exc:
                return [*events, *self._fail(exc)]
            # the response class of the request in flight (its waiter was typed by `send`)
            response: object
            try:
                response = decode_response(entry.api_key, entry.api_version, frame)
            except Exception as exc:  # a codec failure of any kind is a protocol error
                response = _unsupported_api_versions(entry, frame)
                if response is None:
                    error = _as_protocol_error(exc, entry)
                    if entry.slot is not None:
                        entry.slot.fail(error)
                    return [*events, *self._fail(error)]
            slot = entry.slot
            if slot is None:
                events = [*events, *self._on_setup_response(entry, response, now)]
                if self.closed:
                    return events
                continue
            try:
                slot.complete(response)
            except Exception:  # a done-callback's bug: the connection reads on
                log.exception("a response callback failed")
        if self._reauthenticating and not inflight:
            events = [*events, self._begin_handshake(now)]
        return events

    def expire(self, now: float) -> Closed | None:
        """Close if a request in flight is past its deadline at `now`: it fails with
        KafkaTimeoutError (so does any other past its deadline), the rest with
        KafkaConnectionError (the position in the response stream is lost, as in Java's
        client). None if nothing is overdue."""
        if not self._inflight or self.state is ConnectionState.CLOSED:
            return None
        expired = self._inflight.expired(now)
        if not expired:
            return None

        def timeout_error(entry: InFlightRequest[Any]) -> BaseException:
            what = (
                f"{api_name_for_key(entry.api_key)} request (v{entry.api_version}) to {self.peer}"
            )
            return KafkaTimeoutError(
                f"{what} got no response within {entry.timeout:g} s; the connection was "
                "closed. Check the broker's health, or raise request_timeout_ms for slow "
                "requests"
            )

        first = expired[0]
        if first.slot is None:  # a set-up request: what connect() raises
            cause = timeout_error(first)
        else:
            cause = KafkaTimeoutError(f"a request got no response within {first.timeout:g} s")
        return self._close(cause, {id(e) for e in expired}, timeout_error)

    def connection_lost(self, error: BaseException | None) -> Sequence[Event]:
        """The socket broke or the broker closed it (`error` None: an orderly end)."""
        if self.state is ConnectionState.CLOSED:
            return _NO_EVENTS
        if error is None:
            where = " in the middle of a response" if self._reader.mid_frame else ""
            error = KafkaConnectionError(f"the broker closed the connection{where}")
        return self._fail(error)

    def close(self, cause: BaseException | None = None) -> Closed | None:
        """Close on purpose (`cause` None: requests in flight fail as "still in flight when
        the connection was closed"), or because the I/O side failed (`cause`). None if it
        was closed already."""
        if self.state is ConnectionState.CLOSED:
            return None
        if cause is not None and self.state is not ConnectionState.READY:
            cause = self._setup_error(cause)
        return self._close(cause)

    # -- SASL -------------------------------------------------------------------------------

    def sasl_start(self, mechanism: SaslMechanism, now: float) -> Write:
        """After `MechanismNeeded`: the first SaslAuthenticate request, of `mechanism`."""
        if self.state is not ConnectionState.AUTHENTICATING or self._mechanism is not None:
            raise KafkaError(
                f"connection to {self.peer}: SASL started out of turn ({self.state.value})"
            )
        self._mechanism = mechanism
        return self._authenticate(mechanism.initial_response(), now)

    def sasl_continue(self, token: bytes | None, now: float) -> Write | Ready:
        """After `SaslChallenge`: the mechanism's answer (`token`), or None once it is done:
        then READY again (requests may be sent)."""
        if self.state is not ConnectionState.AUTHENTICATING or self._mechanism is None:
            raise KafkaError(
                f"connection to {self.peer}: SASL continued out of turn ({self.state.value})"
            )
        if token is not None:
            return self._authenticate(token, now)
        self._mechanism = None
        self._to(ConnectionState.READY)
        self.session.authenticated(self._auth_started, self._granted_ms, renewal=self._renewing)
        self._renewing = False
        return Ready()

    def reauthenticate(self, now: float) -> Sequence[Event]:
        """READY -> AUTHENTICATING: authenticate again on this connection (KIP-368, when
        `renewal_due`). New requests wait (`can_send` is False) until `Ready`; the
        SaslHandshake goes out once the requests in flight are answered (a `Write` now, or
        later from `receive_data`), then the steps run as at set-up. A failure from now
        until `Ready` closes the machine with a KafkaConnectionError saying the
        re-authentication failed, its ``__cause__`` the reason."""
        if self._sasl_mechanism is None:
            raise KafkaError(f"connection to {self.peer} does not use SASL")
        self._to(ConnectionState.AUTHENTICATING)
        self._reauthenticating = self._renewing = True
        if self._inflight:
            return _NO_EVENTS
        return [self._begin_handshake(now)]

    # -- set-up -----------------------------------------------------------------------------

    def _setup_request(self, request: Request[Any], version: int, now: float) -> Write:
        correlation_id = self._ids.next()
        frame = encode_request(request, version, correlation_id, self._client_id)
        deadline = now + self._request_timeout
        self._inflight.add(correlation_id, request.API_KEY, version, now, deadline, None)
        return Write(frame)

    def _on_setup_response(
        self, entry: InFlightRequest[Any], response: object, now: float
    ) -> Sequence[Event]:
        state = self.state
        if isinstance(response, ApiVersionsResponse) and state is ConnectionState.VERSIONS:
            return self._on_api_versions(entry.api_version, response, now)
        if isinstance(response, SaslHandshakeResponse) and state is ConnectionState.AUTHENTICATING:
            return self._on_handshake(response)
        if isinstance(response, SaslAuthenticateResponse) and self._mechanism is not None:
            return self._on_authenticate(response, self._mechanism)
        return self._fail(
            KafkaProtocolError(
                f"an unexpected {api_name_for_key(entry.api_key)} response in {state.value}"
            )
        )

    def _on_api_versions(
        self, version: int, response: ApiVersionsResponse, now: float
    ) -> Sequence[Event]:
        if response.error_code == _UNSUPPORTED_VERSION and version > 0:
            theirs = [k.max_version for k in response.api_keys if k.api_key == 18]
            fallback = max(min(theirs[0] if theirs else 0, version - 1), 0)
            log.debug("%s: ApiVersions v%d unsupported, retrying v%d", self.peer, version, fallback)
            return [self._setup_request(_api_versions_request(), fallback, now)]
        if response.error_code:
            return self._fail(
                error_for_code(response.error_code)(
                    "ApiVersions failed", node=self._node_id, address=self._address
                )
            )
        self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        if self._sasl_mechanism is None:
            self._to(ConnectionState.READY)
            return [Ready()]
        self._to(ConnectionState.AUTHENTICATING)
        return [self._begin_handshake(now)]

    def _begin_handshake(self, now: float) -> Event:
        self._reauthenticating = False
        self._auth_started = now  # the session starts later: renewing from here errs early
        try:
            version = self.version_for(SaslHandshakeRequest)
        except UnsupportedVersionError as exc:
            return self._fail(exc)[0]
        if version < 1:
            return self._fail(
                UnsupportedVersionError(
                    f"{self.peer} only supports SaslHandshake v0 (Kafka before 1.0); kafkaio "
                    "needs v1"
                )
            )[0]
        assert self._sasl_mechanism is not None
        request = SaslHandshakeRequest(mechanism=self._sasl_mechanism)
        return self._setup_request(request, version, now)

    def _on_handshake(self, response: SaslHandshakeResponse) -> Sequence[Event]:
        name = self._sasl_mechanism
        if response.error_code:
            return self._fail(
                error_for_code(response.error_code)(
                    f"{name} was refused; the broker offers {response.mechanisms}",
                    node=self._node_id,
                )
            )
        assert name is not None
        return [MechanismNeeded(name)]

    def _authenticate(self, token: bytes, now: float) -> Write:
        version = self.version_for(SaslAuthenticateRequest)
        return self._setup_request(SaslAuthenticateRequest(auth_bytes=token), version, now)

    def _on_authenticate(
        self, response: SaslAuthenticateResponse, mechanism: SaslMechanism
    ) -> Sequence[Event]:
        if response.error_code:
            detail = response.error_message or ""
            server_error = getattr(mechanism, "server_error", None)
            if server_error:
                detail = f"{detail} ({server_error})".strip()
            return self._fail(
                error_for_code(response.error_code)(
                    detail or None, node=self._node_id, mechanism=mechanism.name
                )
            )
        self._granted_ms = response.session_lifetime_ms
        return [SaslChallenge(mechanism, response.auth_bytes)]

    def _setup_error(self, cause: BaseException) -> BaseException:
        """What a failure during set-up raises: it names the step that failed (a failed
        re-authentication is described by `_close`)."""
        if self._renewing or not isinstance(cause, KafkaConnectionError | KafkaProtocolError):
            return cause  # a refusal (an error code) says what it is
        if isinstance(cause, NotKafkaPeerError) or any(e.slot is not None for e in self._inflight):
            return cause  # said already, or requests of the application are in flight
        pending = next(iter(self._inflight), None)
        state = self.state
        if state is ConnectionState.VERSIONS and isinstance(cause, KafkaProtocolError):
            error: KafkaError = NotKafkaPeerError(
                f"{self.peer} does not speak the Kafka protocol: its answer to ApiVersions is "
                f"not a Kafka response ({cause}); check bootstrap_servers (the port) and "
                "security_protocol"
            )
        elif state is ConnectionState.VERSIONS:
            error = KafkaConnectionError(
                f"ApiVersions request to {self.peer} failed because the connection was lost "
                f"({cause}); retry on a new connection"
            )
        elif state is not ConnectionState.AUTHENTICATING:
            return cause
        elif pending is not None and pending.api_key == SaslHandshakeRequest.API_KEY:
            error = KafkaConnectionError(
                f"{self.peer} closed the connection when asked for SASL {self._sasl_mechanism} "
                f"({cause}); check that its listener enables {self._sasl_mechanism} and "
                "expects SASL at all"
            )
        else:
            error = KafkaConnectionError(
                f"{self.peer} closed the connection during SASL {self._sasl_mechanism} "
                f"authentication ({cause}); check that its listener enables "
                f"{self._sasl_mechanism}"
            )
        error.__cause__ = cause
        return error

    # -- closing ----------------------------------------------------------------------------

    def _fail(self, cause: BaseException) -> list[Event]:
        """Close because of `cause` (a protocol error, a lost socket, a set-up refusal)."""
        if self.state is not ConnectionState.READY:
            cause = self._setup_error(cause)
        return [self._close(cause)]

    def _close(
        self,
        cause: BaseException | None,
        timed_out: set[int] | None = None,
        timeout_error: Callable[[InFlightRequest[Any]], BaseException] | None = None,
    ) -> Closed:
        if self._renewing and cause is not None:
            cause = self._renewal_error(cause)
        self.state = ConnectionState.CLOSED
        self.close_reason = cause
        self._reauthenticating = self._renewing = False

        def error_for(entry: InFlightRequest[Any]) -> BaseException:
            if timed_out is not None and timeout_error is not None and id(entry) in timed_out:
                return timeout_error(entry)
            name = api_name_for_key(entry.api_key)
            if cause is None:
                error = KafkaConnectionError(
                    f"{name} request to {self.peer} was still in flight when the connection "
                    "was closed"
                )
            else:
                why = (
                    str(cause) if isinstance(cause, KafkaConnectionError) else describe_error(cause)
                )
                error = KafkaConnectionError(
                    f"{name} request to {self.peer} failed because the connection was lost "
                    f"({why}); retry on a new connection"
                )
            error.__cause__ = cause
            return error

        failed = self._inflight.fail_all(error_for)
        return Closed(cause, sum(1 for e in failed if e.slot is not None))

    def _renewal_error(self, cause: BaseException) -> KafkaConnectionError:
        """Re-authenticating failed (the broker refused, the token provider raised, the
        connection broke or timed out): retriable, so the client retries on a new
        connection, which logs in from scratch."""
        error = KafkaConnectionError(
            f"re-authenticating with {self.peer} (the broker ends SASL sessions after "
            f"{self.session.lifetime_ms} ms) failed: {describe_error(cause)}; the connection "
            "was closed and its requests are retried on a new one"
        )
        error.__cause__ = cause
        return error

    def _not_ready(self) -> KafkaError:
        if self.state is ConnectionState.CLOSED:
            reason = f": {self.close_reason}" if self.close_reason is not None else ""
            return KafkaConnectionError(f"connection to {self.peer} is closed{reason}")
        return KafkaError(
            f"connection to {self.peer} is {self.state.value}: requests wait until it is ready"
        )


def _api_versions_request() -> ApiVersionsRequest:
    import kafkaio  # at call time: kafkaio/__init__ imports modules that import this one

    return ApiVersionsRequest(
        client_software_name="kafkaio", client_software_version=kafkaio.__version__
    )


def _unsupported_api_versions(
    entry: InFlightRequest[Any], frame: memoryview
) -> ApiVersionsResponse | None:
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


def _as_protocol_error(exc: Exception, entry: InFlightRequest[Any]) -> KafkaProtocolError:
    name = api_name_for_key(entry.api_key)
    if isinstance(exc, KafkaProtocolError):
        return KafkaProtocolError(
            f"could not decode the {name} v{entry.api_version} response: {exc}"
        )
    return KafkaProtocolError(
        f"could not decode the {name} v{entry.api_version} response ({describe_error(exc)})"
    )
