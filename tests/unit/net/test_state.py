"""ConnectionMachine alone: bytes in, bytes and events out, a fake clock; no socket.

Set-up (versions, SASL), pipelined requests with deadlines, and a hostile peer: frames
split anywhere, oversized or negative sizes, unknown or out-of-order correlation ids,
undecodable bodies, a peer that is not Kafka, a loss in the middle of a response.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from kafkaio.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
    NotKafkaPeerError,
    SaslAuthenticationFailedError,
    UnknownServerError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
)
from kafkaio.net.config import ConnectionConfig
from kafkaio.net.sasl import PlainMechanism
from kafkaio.net.state import (
    Closed,
    ConnectionMachine,
    ConnectionState,
    Event,
    MechanismNeeded,
    Ready,
    SaslChallenge,
    Write,
)
from kafkaio.protocol import messages as m
from kafkaio.runtime.completion import Completion

from ._fake_broker import (
    DEFAULT_APIS,
    Received,
    api_versions_response,
    decode_request,
    encode_response,
    metadata_request,
    metadata_response,
    topics,
)

CONFIG = ConnectionConfig(max_in_flight_requests_per_connection=3)
SASL = ConnectionConfig(
    security_protocol="SASL_PLAINTEXT",
    sasl_mechanism="PLAIN",
    sasl_plain_username="alice",
    sasl_plain_password="secret",
)
S = ConnectionState


def written(data: bytes) -> Received:
    """The request in one frame the machine asked to write."""
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    return decode_request(data[4:])


def answer(request: Received, response: Any, version: int | None = None) -> bytes:
    version = request.version if version is None else version
    return encode_response(request.correlation_id, request.api_key, version, response)


def only(events: Sequence[Event]) -> Event:
    (event,) = events
    return event


def ready_machine(
    config: ConnectionConfig = CONFIG, apis: dict[int, tuple[int, int]] | None = None
) -> ConnectionMachine:
    machine = ConnectionMachine(config, "broker", 9092, node_id=1)
    request = written(machine.start(0.0).data)
    assert only(
        machine.receive_data(answer(request, api_versions_response(apis or DEFAULT_APIS)), 0.0)
    )
    assert machine.state is S.READY
    return machine


def send(
    machine: ConnectionMachine, topic: str, now: float = 0.0, timeout: float = 30.0
) -> tuple[Received, Completion[Any]]:
    waiter: Completion[Any] = Completion()
    frame = machine.send(metadata_request(topic), 12, now, now + timeout, waiter)
    return written(frame), waiter


def reply(request: Received) -> bytes:
    return answer(request, metadata_response("c", *request.request.topics[0].name.split()))


# -- set-up -----------------------------------------------------------------------------------


def test_versions_then_ready() -> None:
    machine = ConnectionMachine(CONFIG, "broker", 9092, node_id=1)
    assert machine.state is S.CONNECTING and not machine.can_send
    request = written(machine.start(0.0).data)
    assert machine.state is S.VERSIONS and not machine.can_send
    assert request.api_key == 18 and request.version == m.ApiVersionsRequest.MAX_STABLE_VERSION
    assert request.request.client_software_name == "kafkaio"
    assert machine.in_flight == 1 and machine.next_deadline() == 30.0  # request_timeout_ms
    assert machine.receive_data(answer(request, api_versions_response(DEFAULT_APIS)), 0.0) == [
        Ready()
    ]
    assert machine.state is S.READY and machine.can_send and machine.in_flight == 0
    assert machine.api_versions == DEFAULT_APIS
    assert machine.version_for(m.MetadataRequest) == 12
    with pytest.raises(KafkaError, match="cannot go from ready to versions"):
        machine.start(0.0)


def test_versions_fall_back_to_what_the_broker_speaks() -> None:
    machine = ConnectionMachine(CONFIG, "broker", 9092)
    first = written(machine.start(0.0).data)
    old = {18: (0, 2), 3: (0, 9)}
    event = only(
        machine.receive_data(answer(first, api_versions_response(old, 35), version=0), 0.0)
    )
    assert isinstance(event, Write)
    second = written(event.data)
    assert second.version == 2 and machine.state is S.VERSIONS
    # an error body in no real version (librdkafka's mock): only its error code counts
    machine = ConnectionMachine(CONFIG, "broker", 9092)
    first = written(machine.start(0.0).data)
    body = b"\x00\x23\x01\x00\x12\x00\x00\x00\x02\x00\x00\x00\x00"
    event = only(machine.receive_data(_frame(first.correlation_id, body), 0.0))
    assert isinstance(event, Write) and written(event.data).version == 0


def test_versions_error_closes_with_the_broker_error() -> None:
    machine = ConnectionMachine(CONFIG, "broker", 9092, node_id=4)
    first = written(machine.start(0.0).data)
    event = only(machine.receive_data(answer(first, api_versions_response({}, -1)), 0.0))
    assert isinstance(event, Closed) and isinstance(event.cause, UnknownServerError)
    assert "ApiVersions failed" in str(event.cause) and machine.state is S.CLOSED


@pytest.mark.parametrize(
    ("answer_bytes", "hint"),
    [
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "HTTP response"),
        (b"\x15\x03\x03\x00\x02\x02\x46", "TLS record"),
    ],
)
def test_a_peer_that_is_not_kafka_is_named(answer_bytes: bytes, hint: str) -> None:
    machine = ConnectionMachine(CONFIG, "broker", 9092)
    machine.start(0.0)
    event = only(machine.receive_data(answer_bytes, 0.0))
    assert isinstance(event, Closed) and isinstance(event.cause, NotKafkaPeerError)
    assert "does not speak the Kafka protocol" in str(event.cause) and hint in str(event.cause)


def test_a_set_up_request_past_its_deadline_closes_with_a_timeout() -> None:
    machine = ConnectionMachine(ConnectionConfig(request_timeout_ms=400), "broker", 9092)
    machine.start(10.0)
    assert machine.expire(10.39) is None
    event = machine.expire(10.4)
    assert isinstance(event, Closed) and isinstance(event.cause, KafkaTimeoutError)
    assert "ApiVersions request (v4) to broker broker:9092 got no response within 0.4 s" in str(
        event.cause
    )


def test_requests_wait_until_ready() -> None:
    machine = ConnectionMachine(CONFIG, "broker", 9092)
    with pytest.raises(KafkaError, match="connecting: requests wait"):
        machine.send(metadata_request("t"), 12, 0.0, 1.0, Completion())


# -- SASL -------------------------------------------------------------------------------------


def authenticate(
    machine: ConnectionMachine, handshake: Write, now: float = 0.0, lifetime_ms: int = 60_000
) -> None:
    """The PLAIN exchange after the handshake request, through to Ready."""
    request = written(handshake.data)
    assert request.api_key == 17 and request.request.mechanism == "PLAIN"
    response = m.SaslHandshakeResponse(error_code=0, mechanisms=["PLAIN"])
    assert machine.receive_data(answer(request, response), now) == [MechanismNeeded("PLAIN")]
    mechanism = PlainMechanism("alice", "secret")
    auth = written(machine.sasl_start(mechanism, now).data)
    assert auth.api_key == 36 and auth.request.auth_bytes == b"\x00alice\x00secret"
    ok = m.SaslAuthenticateResponse(error_code=0, auth_bytes=b"", session_lifetime_ms=lifetime_ms)
    event = only(machine.receive_data(answer(auth, ok), now))
    assert isinstance(event, SaslChallenge) and event.challenge == b""
    assert machine.state is S.AUTHENTICATING and not machine.can_send
    assert machine.sasl_continue(event.mechanism.step(event.challenge), now) == Ready()
    assert machine.state is S.READY and machine.session_lifetime_ms == lifetime_ms


def sasl_machine() -> tuple[ConnectionMachine, Write]:
    machine = ConnectionMachine(SASL, "broker", 9092, node_id=2)
    versions = written(machine.start(0.0).data)
    event = only(machine.receive_data(answer(versions, api_versions_response(DEFAULT_APIS)), 0.0))
    assert isinstance(event, Write) and machine.state is S.AUTHENTICATING
    return machine, event


def test_sasl_plain_steps() -> None:
    machine, handshake = sasl_machine()
    authenticate(machine, handshake)


def test_sasl_refusals_close_with_the_broker_error() -> None:
    machine, handshake = sasl_machine()
    request = written(handshake.data)
    refused = m.SaslHandshakeResponse(error_code=33, mechanisms=["SCRAM-SHA-512"])
    event = only(machine.receive_data(answer(request, refused), 0.0))
    assert isinstance(event, Closed) and isinstance(event.cause, UnsupportedSaslMechanismError)
    assert "SCRAM-SHA-512" in str(event.cause)

    machine, handshake = sasl_machine()
    request = written(handshake.data)
    machine.receive_data(answer(request, m.SaslHandshakeResponse(error_code=0, mechanisms=[])), 0.0)
    auth = written(machine.sasl_start(PlainMechanism("alice", "wrong"), 0.0).data)
    bad = m.SaslAuthenticateResponse(error_code=58, error_message="Invalid username or password")
    event = only(machine.receive_data(answer(auth, bad), 0.0))
    assert isinstance(event, Closed) and isinstance(event.cause, SaslAuthenticationFailedError)
    assert "Invalid username or password" in str(event.cause) and "wrong" not in str(event.cause)


def test_sasl_handshake_v0_only_broker_is_refused() -> None:
    machine = ConnectionMachine(SASL, "broker", 9092)
    versions = written(machine.start(0.0).data)
    apis = {18: (0, 4), 17: (0, 0), 36: (0, 2)}
    event = only(machine.receive_data(answer(versions, api_versions_response(apis)), 0.0))
    assert isinstance(event, Closed) and isinstance(event.cause, UnsupportedVersionError)
    assert "SaslHandshake v0" in str(event.cause)


def test_a_loss_during_sasl_says_which_step() -> None:
    machine, _ = sasl_machine()
    event = only(machine.connection_lost(None))
    assert isinstance(event, Closed) and isinstance(event.cause, KafkaConnectionError)
    assert "closed the connection when asked for SASL PLAIN" in str(event.cause)
    with pytest.raises(KafkaError, match="SASL started out of turn"):
        machine.sasl_start(PlainMechanism("alice", "secret"), 0.0)


def test_reauthentication_waits_for_the_requests_in_flight() -> None:
    machine, handshake = sasl_machine()
    authenticate(machine, handshake)
    request, waiter = send(machine, "before")
    assert machine.reauthenticate(0.0) == ()  # READY -> AUTHENTICATING, handshake held back
    assert machine.state is S.AUTHENTICATING and not machine.can_send
    with pytest.raises(KafkaError, match="authenticating: requests wait"):
        send(machine, "during")
    event = only(machine.receive_data(reply(request), 0.0))  # the last answer: handshake goes
    assert topics(waiter.result()) == ["before"]
    assert isinstance(event, Write)
    authenticate(machine, event)
    assert machine.can_send
    request, waiter = send(machine, "after")
    machine.receive_data(reply(request), 0.0)
    assert topics(waiter.result()) == ["after"]


def test_the_session_is_renewed_at_85_to_95_percent_of_its_lifetime() -> None:
    # counted from the handshake of each exchange; a renewal is counted, the first login not
    machine, handshake = sasl_machine()
    authenticate(machine, handshake, now=0.0, lifetime_ms=10_000)
    assert not machine.renewal_due(8.49) and machine.renewal_due(9.5)
    assert machine.session.reauthentications == 0
    handshake = only(machine.reauthenticate(9.5))
    assert isinstance(handshake, Write) and not machine.renewal_due(9.5)  # under way
    authenticate(machine, handshake, now=9.6, lifetime_ms=4000)  # from 9.5: due 12.9-13.3
    assert machine.session.reauthentications == 1
    assert not machine.renewal_due(12.89) and machine.renewal_due(13.3)
    machine.close()
    assert not machine.renewal_due(100.0)


def test_a_session_without_a_lifetime_is_never_renewed() -> None:
    machine, handshake = sasl_machine()
    authenticate(machine, handshake, lifetime_ms=0)
    assert not machine.renewal_due(1e12)
    assert not ready_machine().renewal_due(1e12)  # no SASL at all


def test_a_failed_renewal_closes_with_a_retriable_error_naming_the_cause() -> None:
    # the broker refuses the renewal
    machine, handshake = sasl_machine()
    authenticate(machine, handshake, lifetime_ms=5000)
    auth = only(machine.reauthenticate(5.0))
    assert isinstance(auth, Write)
    request = written(auth.data)
    machine.receive_data(answer(request, m.SaslHandshakeResponse(mechanisms=["PLAIN"])), 5.0)
    request = written(machine.sasl_start(PlainMechanism("alice", "secret"), 5.0).data)
    refused = m.SaslAuthenticateResponse(error_code=58, error_message="Authentication failed")
    event = only(machine.receive_data(answer(request, refused), 5.0))
    assert isinstance(event, Closed) and isinstance(event.cause, KafkaConnectionError)
    assert isinstance(event.cause.__cause__, SaslAuthenticationFailedError)
    assert str(event.cause).startswith(
        "re-authenticating with node 2 (broker:9092) (the broker ends SASL sessions after "
        "5000 ms) failed: SaslAuthenticationFailedError: SASL_AUTHENTICATION_FAILED (error 58) "
        "[node=2, mechanism='PLAIN']: Authentication failed."
    )
    assert machine.close_reason is event.cause
    # the I/O side fails (the token provider raised): the same error, whatever the cause
    machine, handshake = sasl_machine()
    authenticate(machine, handshake, lifetime_ms=5000)
    machine.reauthenticate(5.0)
    provider = SaslAuthenticationFailedError("the identity provider refused")
    event = machine.close(provider)
    assert event is not None and isinstance(event.cause, KafkaConnectionError)
    assert event.cause.__cause__ is provider and "identity provider refused" in str(event.cause)
    # the connection is lost while the requests in flight are answered first
    machine, handshake = sasl_machine()
    authenticate(machine, handshake, lifetime_ms=5000)
    request, waiter = send(machine, "before")
    assert machine.reauthenticate(5.0) == ()
    event = only(machine.connection_lost(None))
    assert isinstance(event, Closed) and "re-authenticating with" in str(event.cause)
    assert isinstance(waiter.error, KafkaConnectionError)
    assert "re-authenticating with" in str(waiter.error)
    # closed on purpose meanwhile: no failure to name
    machine, handshake = sasl_machine()
    authenticate(machine, handshake, lifetime_ms=5000)
    machine.reauthenticate(5.0)
    event = machine.close()
    assert event is not None and event.cause is None and machine.close_reason is None


def test_reauthentication_without_sasl_is_refused() -> None:
    with pytest.raises(KafkaError, match="does not use SASL"):
        ready_machine().reauthenticate(0.0)


# -- requests ---------------------------------------------------------------------------------


def test_pipelined_requests_complete_in_order_and_the_limit_holds() -> None:
    machine = ready_machine()
    sent = [send(machine, name) for name in ("a", "b", "c")]
    assert machine.in_flight == 3 and not machine.can_send
    with pytest.raises(KafkaError, match="limit is 3"):
        send(machine, "d")
    data = b"".join(reply(request) for request, _ in sent)
    assert machine.receive_data(data, 0.0) == ()
    assert [topics(w.result()) for _, w in sent] == [["a"], ["b"], ["c"]]
    assert machine.in_flight == 0 and machine.can_send


def test_correlation_ids_and_the_client_id_in_the_header() -> None:
    machine = ready_machine(ConnectionConfig(client_id=None))
    first, _ = send(machine, "a")
    second, _ = send(machine, "b")
    assert second.correlation_id == first.correlation_id + 1
    assert first.client_id is None


def test_a_response_split_anywhere_completes_when_whole() -> None:
    for split in range(1, 60):
        machine = ready_machine()
        request, waiter = send(machine, "orders")
        data = reply(request)
        assert machine.receive_data(data[:split], 0.0) == ()
        assert not waiter.done and machine.mid_frame
        machine.receive_data(data[split:], 0.0)
        assert topics(waiter.result()) == ["orders"] and not machine.mid_frame


def test_a_request_without_a_response_is_not_in_flight() -> None:
    machine = ready_machine()
    frame = machine.send(m.ProduceRequest(acks=0, timeout_ms=1000, topic_data=[]), 9, 0, 1, None)
    assert written(frame).api_key == 0 and machine.in_flight == 0


HOSTILE: dict[str, tuple[Any, type[BaseException], str]] = {
    "huge-size": (lambda rs: b"\x7f\xff\xff\xff", KafkaProtocolError, "exceeds"),
    "negative-size": (lambda rs: b"\xff\xff\xff\xfe", KafkaProtocolError, "negative"),
    "unknown-id": (
        lambda rs: answer(replace(rs[0], correlation_id=999), metadata_response("c")),
        KafkaProtocolError,
        "unknown correlation id",
    ),
    "out-of-order": (lambda rs: reply(rs[1]), KafkaProtocolError, "out of order"),
    "short-frame": (lambda rs: b"\x00\x00\x00\x02ab", KafkaProtocolError, "too short"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_bytes_fail_every_request_and_close(case: str) -> None:
    make, cause_type, text = HOSTILE[case]
    machine = ready_machine()
    sent = [send(machine, name) for name in ("a", "b")]
    event = only(machine.receive_data(make([r for r, _ in sent]), 0.0))
    assert isinstance(event, Closed) and event.failed == 2
    assert isinstance(event.cause, cause_type) and text in str(event.cause)
    assert machine.state is S.CLOSED and machine.in_flight == 0
    errors = [w.error for _, w in sent]
    assert all(isinstance(e, KafkaConnectionError) for e in errors)
    assert all(e is not None and e.__cause__ is event.cause for e in errors)
    assert errors[0] is not errors[1]
    assert machine.receive_data(reply(sent[0][0]), 0.0) == ()  # closed: bytes are ignored
    with pytest.raises(KafkaConnectionError, match="is closed"):
        send(machine, "c")


def test_an_undecodable_body_fails_its_request_with_a_protocol_error() -> None:
    machine = ready_machine()
    (first, a), (_, b) = send(machine, "a"), send(machine, "b")
    event = only(machine.receive_data(_frame(first.correlation_id, b"\x00"), 0.0))
    assert isinstance(event, Closed)
    assert isinstance(a.error, KafkaProtocolError)
    assert "could not decode the Metadata v12 response" in str(a.error)
    assert isinstance(b.error, KafkaConnectionError)


def test_a_loss_in_the_middle_of_a_response_says_so() -> None:
    machine = ready_machine()
    request, waiter = send(machine, "a")
    machine.receive_data(reply(request)[:7], 0.0)
    event = only(machine.connection_lost(None))
    assert isinstance(event, Closed) and "in the middle of a response" in str(event.cause)
    assert isinstance(waiter.error, KafkaConnectionError)
    assert machine.connection_lost(None) == ()  # once


def test_deadlines_with_a_fake_clock() -> None:
    machine = ready_machine()
    (_, patient), (_, short), (_, shorter) = (
        send(machine, "patient", now=0.0, timeout=60.0),
        send(machine, "short", now=1.0, timeout=0.5),
        send(machine, "shorter", now=1.2, timeout=0.2),
    )
    assert machine.next_deadline() == 1.4
    assert machine.expire(1.39) is None and machine.state is S.READY
    event = machine.expire(1.5)
    assert isinstance(event, Closed) and event.failed == 3
    assert isinstance(event.cause, KafkaTimeoutError)
    for waiter, seconds in ((short, "0.5"), (shorter, "0.2")):
        assert isinstance(waiter.error, KafkaTimeoutError)
        assert (
            f"Metadata request (v12) to node 1 (broker:9092) got no response within {seconds} s;"
            " the connection was closed"
        ) in str(waiter.error)
    assert isinstance(patient.error, KafkaConnectionError)
    assert patient.error.__cause__ is event.cause
    assert machine.expire(100.0) is None  # closed already


def test_close_fails_what_is_in_flight() -> None:
    machine = ready_machine()
    _, waiter = send(machine, "a")
    event = machine.close()
    assert event == Closed(None, 1)
    assert "still in flight when the connection was closed" in str(waiter.error)
    assert machine.close() is None


def test_a_failing_done_callback_does_not_stop_the_reading(
    caplog: pytest.LogCaptureFixture,
) -> None:
    machine = ready_machine()
    (first, a), (second, b) = send(machine, "a"), send(machine, "b")

    def bug(_: Any) -> None:
        raise RuntimeError("a callback bug")

    a.add_done_callback(bug)
    assert machine.receive_data(reply(first) + reply(second), 0.0) == ()
    assert topics(b.result()) == ["b"] and machine.state is S.READY
    assert [r.getMessage() for r in caplog.records] == ["a response callback failed"]


# -- helpers ----------------------------------------------------------------------------------


def _frame(correlation_id: int, body: bytes) -> bytes:
    return struct.pack(">ii", len(body) + 4, correlation_id) + body
