"""SASL re-authentication (KIP-368): the session timer, and connections renewing their session
against a fake broker that ends sessions after a short lifetime.

The broker here behaves as Apache Kafka does: a SaslAuthenticate answer carries the session
lifetime, a request other than SaslHandshake arriving after the session ended closes the
connection, and a SaslHandshake on an authenticated connection starts a re-authentication
during which any other request is a protocol violation (Kafka closes the connection).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from kafkaio.errors import KafkaConnectionError, SaslAuthenticationFailedError
from kafkaio.net.config import ConnectionConfig
from kafkaio.net.connection import Connection
from kafkaio.net.reauth import SessionTimer
from kafkaio.protocol import messages as m

from ._fake_broker import (
    FakeBroker,
    FakeClient,
    metadata_request,
    metadata_response,
    run,
    topics,
)

HANDSHAKE, AUTHENTICATE, METADATA, PRODUCE = 17, 36, 3, 0


# -- the timer ----------------------------------------------------------------------------------


def test_the_timer_renews_at_85_to_95_percent_of_the_lifetime() -> None:
    early, late = SessionTimer(rand=lambda: 0.0), SessionTimer(rand=lambda: 0.999999)
    for timer in (early, late):
        assert not timer.due(1e9)  # before any session: never
        timer.authenticated(100.0, 10_000)
        assert timer.lifetime_ms == 10_000 and timer.reauthentications == 0
    assert not early.due(108.49) and early.due(108.5)
    assert not late.due(109.49) and late.due(109.5)
    late.authenticated(110.0, 4000, renewal=True)
    assert late.reauthentications == 1 and late.due(113.8) and not late.due(113.7)


def test_a_session_without_a_lifetime_never_renews() -> None:
    timer = SessionTimer()
    timer.authenticated(0.0, 5000)
    timer.authenticated(1.0, 0, renewal=True)  # the broker stopped limiting sessions
    assert timer.renew_at is None and not timer.due(1e12)


# -- a broker ending sessions -----------------------------------------------------------------


@dataclass
class SessionBroker:
    """Handles one connection like Kafka with ``connections.max.reauth.ms`` = lifetime_ms:
    PLAIN (alice/secret) or OAUTHBEARER (tokens from ``accept``), Metadata answered,
    Produce acks=0 taken silently. ``log`` lists the api keys in arrival order, ``topics``
    the topic asked for by each Metadata request."""

    lifetime_ms: int
    accept: Callable[[bytes], bool] = lambda auth: auth == b"\x00alice\x00secret"
    log: list[int] = field(default_factory=list)
    tokens: list[bytes] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    refuse_renewal: bool = False

    async def __call__(self, client: FakeClient) -> None:
        await client.answer_api_versions()
        expires: float | None = None
        while True:
            try:
                received = await client.read_request()
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return
            self.log.append(received.api_key)
            if received.api_key == HANDSHAKE:
                renewal = expires is not None
                await client.respond(
                    received, m.SaslHandshakeResponse(mechanisms=["PLAIN", "OAUTHBEARER"])
                )
                auth = await client.read_request()
                self.log.append(auth.api_key)
                if auth.api_key != AUTHENTICATE:
                    self.violations.append(f"api key {auth.api_key} during authentication")
                    return  # Kafka closes the connection
                self.tokens.append(auth.request.auth_bytes)
                ok = self.accept(auth.request.auth_bytes) and not (renewal and self.refuse_renewal)
                await client.respond(
                    auth,
                    m.SaslAuthenticateResponse(
                        error_code=0 if ok else 58,
                        error_message=None if ok else "Authentication failed",
                        session_lifetime_ms=self.lifetime_ms if ok else 0,
                    ),
                )
                if not ok:
                    return
                expires = anyio.current_time() + self.lifetime_ms / 1000
                continue
            if expires is None or anyio.current_time() > expires:
                self.violations.append(f"api key {received.api_key} on an expired session")
                return  # Kafka: "Disconnecting expired channel"
            if received.api_key == METADATA:
                name = received.request.topics[0].name
                self.topics.append(name)
                await client.respond(received, metadata_response("c", name))

    @property
    def reauthentications(self) -> int:
        return self.log.count(HANDSHAKE) - 1


def plain(**kwargs: Any) -> ConnectionConfig:
    return ConnectionConfig(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password="secret",
        request_timeout_ms=5000,
        **kwargs,
    )


LIFETIME_MS = 300


def test_a_connection_renews_its_session_before_the_broker_ends_it(backend: str) -> None:
    # before: session_lifetime_ms was stored and never used, so the broker closed the
    # connection at the first request after 300 ms
    broker_side = SessionBroker(LIFETIME_MS)

    async def scenario() -> None:
        async with FakeBroker(broker_side) as broker:
            conn = await Connection.connect(broker.host, broker.port, plain())
            assert conn.session_lifetime_ms == LIFETIME_MS
            for i in range(4):
                assert topics(await conn.send(metadata_request(f"t{i}"))) == [f"t{i}"]
                await anyio.sleep(LIFETIME_MS / 1000)  # past 85-95% of the session
            assert not conn.closed and conn.session.reauthentications == 3
            async with anyio.create_task_group() as tg:  # anyio streams: a writer writes it
                tg.start_soon(conn.serve)
                acks0 = m.ProduceRequest(acks=0, timeout_ms=1000, topic_data=[])
                await conn.submit_no_response(acks0).wait(5)
                tg.cancel_scope.cancel()
            assert topics(await conn.send(metadata_request("last"))) == ["last"]
            assert conn.session.reauthentications == 4
            await conn.close()

    run(backend, scenario)
    assert broker_side.violations == []
    assert broker_side.reauthentications == 4
    session = [HANDSHAKE, AUTHENTICATE]
    assert broker_side.log == session + [METADATA] + (session + [METADATA]) * 3 + session + [
        PRODUCE,
        METADATA,
    ]


def test_submitted_requests_wait_for_a_due_renewal(backend: str) -> None:
    """A request submitted once the session is due waits in the connection's queue while it
    is renewed (on asyncio in a task of the connection's own), then goes, in order."""
    broker_side = SessionBroker(LIFETIME_MS)

    async def scenario() -> None:
        async with FakeBroker(broker_side) as broker, anyio.create_task_group() as tg:
            conn = await Connection.connect(broker.host, broker.port, plain())
            tg.start_soon(conn.serve)
            first = conn.submit(metadata_request("a"))
            assert topics(await first.wait(5)) == ["a"]
            await anyio.sleep(LIFETIME_MS / 1000)
            later = [conn.submit(metadata_request(n)) for n in "bc"]
            assert conn.in_flight == 0  # due: nothing is written before the renewal
            assert [topics(await w.wait(5)) for w in later] == [["b"], ["c"]]
            assert conn.session.reauthentications == 1
            await conn.close()

    run(backend, scenario)
    assert broker_side.violations == [] and broker_side.reauthentications == 1
    session = [HANDSHAKE, AUTHENTICATE]
    assert broker_side.log == session + [METADATA] + session + [METADATA, METADATA]


@pytest.mark.parametrize("in_flight", [1, 5])
def test_concurrent_senders_keep_their_order_around_a_renewal(backend: str, in_flight: int) -> None:
    """Requests pipelined while the session is due: one sender renews at the head of the
    line, nothing is written between SaslHandshake and SaslAuthenticate, and the requests
    go out in the order send was called (a single in-flight permit does not deadlock)."""
    broker_side = SessionBroker(LIFETIME_MS)
    names = [f"t{i}" for i in range(12)]

    async def scenario() -> None:
        async with FakeBroker(broker_side) as broker:
            conn = await Connection.connect(
                broker.host, broker.port, plain(max_in_flight_requests_per_connection=in_flight)
            )
            await anyio.sleep(LIFETIME_MS / 1000)
            answers: dict[str, list[str]] = {}

            async def one(name: str, *, task_status: Any) -> None:
                task_status.started()
                answers[name] = topics(await conn.send(metadata_request(name)))

            async with anyio.create_task_group() as tg:
                for name in names:
                    await tg.start(one, name)
            assert answers == {n: [n] for n in names}
            await conn.close()

    run(backend, scenario)
    assert broker_side.violations == []
    assert broker_side.log == [HANDSHAKE, AUTHENTICATE] * 2 + [METADATA] * len(names)
    assert broker_side.topics == names  # the sender that renewed kept its place


def test_oauthbearer_renews_with_a_fresh_token(backend: str) -> None:
    counter = itertools.count(1)

    async def provider() -> str:
        return f"token-{next(counter)}"

    broker_side = SessionBroker(LIFETIME_MS, accept=lambda auth: b"auth=Bearer token-" in auth)

    async def scenario() -> None:
        config = ConnectionConfig(
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=provider,
        )
        async with FakeBroker(broker_side) as broker:
            conn = await Connection.connect(broker.host, broker.port, config)
            for i in range(2):
                await anyio.sleep(LIFETIME_MS / 1000)
                assert topics(await conn.send(metadata_request(f"t{i}"))) == [f"t{i}"]
            await conn.close()

    run(backend, scenario)
    assert [t.split(b"Bearer ")[1].split(b"\x01")[0] for t in broker_side.tokens] == [
        b"token-1",
        b"token-2",
        b"token-3",
    ]


@pytest.mark.parametrize("cause", ["broker-refuses", "provider-raises"])
def test_a_failed_renewal_closes_the_connection_with_a_retriable_error(
    backend: str, cause: str
) -> None:
    """The request that found the session due, and those in flight, fail with a
    KafkaConnectionError naming the cause (a client retries them on a new connection,
    which authenticates from scratch); nothing else is sent on the old one."""
    calls = itertools.count(1)

    def provider() -> str:
        if next(calls) > 1 and cause == "provider-raises":
            raise SaslAuthenticationFailedError("the identity provider refused")
        return "token"

    broker_side = SessionBroker(
        LIFETIME_MS, accept=lambda auth: True, refuse_renewal=cause == "broker-refuses"
    )

    async def scenario() -> None:
        config = ConnectionConfig(
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=provider,
        )
        async with FakeBroker(broker_side) as broker:
            conn = await Connection.connect(broker.host, broker.port, config)
            await anyio.sleep(LIFETIME_MS / 1000)
            with pytest.raises(KafkaConnectionError, match="re-authenticating with") as info:
                await conn.send(metadata_request("t"))
            assert isinstance(info.value.__cause__, SaslAuthenticationFailedError)
            expected = "Authentication failed" if cause == "broker-refuses" else "provider refused"
            assert expected in str(info.value)
            assert conn.closed
            with pytest.raises(KafkaConnectionError, match="is closed"):
                await conn.send(metadata_request("t"))

    run(backend, scenario)
    assert broker_side.violations == []
    assert METADATA not in broker_side.log
