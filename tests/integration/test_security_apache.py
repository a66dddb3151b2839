"""Security against Apache Kafka's own listeners: TLS, SCRAM users made with kafkaio's Admin,
OAUTHBEARER with Kafka's unsecured JWS validator, and SASL re-authentication (KIP-368).

The single Apache Kafka node (the ``apache_kafka`` fixture) has a TLS listener whose
certificate a CA made for the session signed (kafkaio.testing.security), a SASL_PLAINTEXT
listener (PLAIN and SCRAM for ``alice``, OAUTHBEARER for any principal) and a second one,
REAUTH, whose SASL sessions end after SASL_SESSION_MS (``connections.max.reauth.ms``). The
broker is the judge: it verifies SCRAM proofs against what the Admin stored, takes the
principal from the token, and closes a connection whose session ended at its next request.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from kafkaio import Consumer, Producer, TopicPartition
from kafkaio.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Admin,
    ResourceType,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafkaio.errors import (
    ResourceNotFoundError,
    SaslAuthenticationFailedError,
    SslAuthenticationError,
    TopicAuthorizationFailedError,
)
from kafkaio.testing import BrokerInfo, eventually
from kafkaio.testing.plugin import SASL_SESSION_MS, SASL_USERS
from kafkaio.testing.security import TestCertificates, unsecured_jwt

pytestmark = pytest.mark.integration


def listener(broker: BrokerInfo, name: str) -> str:
    assert broker.apache is not None
    if name not in broker.apache.listeners:
        from kafkaio.testing import security

        pytest.skip(f"Apache Kafka has no {name} listener here: {security.unavailable_reason()}")
    return broker.apache.bootstrap_for(name)


def certificates(broker: BrokerInfo) -> TestCertificates:
    listener(broker, "SSL")
    assert broker.apache is not None and broker.apache.tls_keystore is not None
    return TestCertificates.at(broker.apache.tls_keystore.parent)


def scram(mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }


def oauth(provider: Any) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": provider,
    }


async def round_trip(bootstrap: str, topic: str, count: int, **security: Any) -> list[bytes]:
    """Write `count` records to partition 0 and read them back, both over `security`."""
    values = [b"%s-%d" % (topic.encode(), i) for i in range(count)]
    async with Producer(bootstrap, linger_ms=1, **security) as producer:
        for value in values:
            await producer.enqueue(topic, value, partition=0)
        await producer.flush()
    got: list[bytes] = []
    async with Consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", **security
    ) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        with anyio.fail_after(20):
            while len(got) < count:
                batch = await consumer.getmany(timeout_ms=200)
                got += [r.value for records in batch.values() for r in records]
    return got


# -- TLS ------------------------------------------------------------------------------------


async def test_clients_work_over_kafkas_tls_listener(
    apache_kafka: BrokerInfo, unique_topic: str
) -> None:
    """A context trusting the test CA verifies Kafka's certificate and its host name (the
    bootstrap name, then the 127.0.0.1 the broker advertises)."""
    certs = certificates(apache_kafka)
    port = listener(apache_kafka, "SSL").rpartition(":")[2]
    await apache_kafka.create_topic(unique_topic, 1)
    context = certs.client_context()
    assert context.check_hostname
    tls = {"security_protocol": "SSL", "ssl_context": context}
    got = await round_trip(f"localhost:{port}", unique_topic, 20, **tls)
    assert got == [b"%s-%d" % (unique_topic.encode(), i) for i in range(20)]


@pytest.mark.parametrize("kind", ["producer", "consumer", "admin"])
async def test_a_certificate_from_an_untrusted_ca_fails_start_at_once(
    apache_kafka: BrokerInfo, kind: str
) -> None:
    certs = certificates(apache_kafka)
    bootstrap = listener(apache_kafka, "SSL")
    options: dict[str, Any] = {
        "security_protocol": "SSL",
        "ssl_context": certs.client_context(trust="other_ca"),
    }
    client: Any
    if kind == "producer":
        client = Producer(bootstrap, max_block_ms=30_000, **options)
    elif kind == "consumer":
        client = Consumer(bootstrap_servers=bootstrap, default_api_timeout_ms=30_000, **options)
    else:
        client = Admin(bootstrap, default_api_timeout_ms=30_000, **options)
    try:
        with anyio.fail_after(10):  # not retried until the 30 s timeout
            with pytest.raises(SslAuthenticationError, match="was rejected"):
                await client.start()
    finally:
        await client.close()


# -- SCRAM users made with kafkaio's Admin ----------------------------------------------------


async def test_scram_users_created_with_the_admin_log_in(
    apache_kafka: BrokerInfo, unique_topic: str
) -> None:
    user = "carol-" + unique_topic[-8:]
    sasl = listener(apache_kafka, "SASL_PLAINTEXT")
    await apache_kafka.create_topic(unique_topic, 1)
    async with Admin(apache_kafka.bootstrap) as admin:
        missing = await admin.describe_user_scram_credentials([user])
        assert isinstance(missing[user].error, ResourceNotFoundError)
        created = await admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(user, "SCRAM-SHA-256", "carol-secret"),
                UserScramCredentialUpsertion(user, "SCRAM-SHA-512", "carol-512", iterations=8192),
            ]
        )
        assert created == {user: None}
        described = await eventually(
            lambda: admin.describe_user_scram_credentials([user]),
            lambda d: d[user].error is None and len(d[user].credentials) == 2,
            what="both credentials described",
        )
        assert sorted(described[user].credentials, key=lambda c: c.mechanism) == [
            ScramCredentialInfo("SCRAM-SHA-256", 4096),
            ScramCredentialInfo("SCRAM-SHA-512", 8192),
        ]
        # the broker verifies each login against the salted password the Admin stored
        got = await round_trip(
            sasl, unique_topic, 3, **scram("SCRAM-SHA-256", user, "carol-secret")
        )
        assert len(got) == 3
        async with Admin(sasl, **scram("SCRAM-SHA-512", user, "carol-512")) as as_carol:
            assert unique_topic in await as_carol.list_topics()
        with pytest.raises(SaslAuthenticationFailedError):
            async with Admin(sasl, **scram("SCRAM-SHA-512", user, "carol-secret")):
                pass
        # deleting one mechanism leaves the other
        deleted = await admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion(user, "SCRAM-SHA-512")]
        )
        assert deleted == {user: None}
        await eventually(
            lambda: admin.describe_user_scram_credentials([user]),
            lambda d: [c.mechanism for c in d[user].credentials] == ["SCRAM-SHA-256"],
            what="SCRAM-SHA-512 deleted",
        )
        with pytest.raises(SaslAuthenticationFailedError):
            async with Admin(sasl, **scram("SCRAM-SHA-512", user, "carol-512")):
                pass
        await admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion(user, "SCRAM-SHA-256")]
        )


# -- OAUTHBEARER ------------------------------------------------------------------------------


async def test_oauthbearer_token_subject_is_the_principal(
    apache_kafka: BrokerInfo, unique_topic: str
) -> None:
    """Kafka's unsecured validator accepts kafkaio's token and takes the principal from its
    ``sub`` claim: an ACL denying User:<sub> WRITE on one topic refuses that producer
    there, and only there."""
    sasl = listener(apache_kafka, "SASL_PLAINTEXT")
    subject = "svc-" + unique_topic[-8:]
    denied = AclBinding(
        ResourceType.TOPIC,
        unique_topic,
        f"User:{subject}",
        AclOperation.WRITE,
        permission_type=AclPermissionType.DENY,
    )
    await apache_kafka.create_topic(unique_topic, 1)
    await apache_kafka.create_topic(unique_topic + "-open", 1)
    async with Admin(apache_kafka.bootstrap) as admin:
        assert (await admin.create_acls([denied]))[denied] is None
    try:
        got = await round_trip(
            sasl, unique_topic + "-open", 2, **oauth(lambda: unsecured_jwt(subject))
        )
        assert len(got) == 2
        async with Producer(
            sasl,
            enable_idempotence=False,
            delivery_timeout_ms=60_000,
            **oauth(lambda: unsecured_jwt(subject)),
        ) as producer:
            with anyio.fail_after(10):
                with pytest.raises(TopicAuthorizationFailedError):
                    await producer.send(unique_topic, b"denied", partition=0)
    finally:
        async with Admin(apache_kafka.bootstrap) as admin:
            await admin.delete_acls([AclBindingFilter(resource_name=unique_topic)])


async def test_an_expired_oauthbearer_token_is_refused(apache_kafka: BrokerInfo) -> None:
    sasl = listener(apache_kafka, "SASL_PLAINTEXT")
    expired = unsecured_jwt("late", issued_at=time.time() - 7200, lifetime_s=3600)
    with pytest.raises(SaslAuthenticationFailedError, match="invalid_token"):
        async with Admin(sasl, **oauth(lambda: expired)):
            pass


# -- re-authentication (KIP-368) ----------------------------------------------------------------


@asynccontextmanager
async def no_lost_connections(caplog: pytest.LogCaptureFixture) -> AsyncIterator[None]:
    with caplog.at_level(logging.WARNING, logger="kafkaio.net"):
        yield
    lost = [r.getMessage() for r in caplog.records if "lost" in r.getMessage()]
    assert lost == []


async def test_clients_keep_their_connections_across_reauthentications(
    apache_kafka: BrokerInfo, unique_topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    """On a listener ending SASL sessions after 5 s, a SCRAM producer and an OAUTHBEARER
    consumer run for three sessions: every record arrives once and in order, no connection
    is lost or made again, each node connection re-authenticated at least three times, and
    the consumer's provider gave a fresh token each time."""
    reauth = listener(apache_kafka, "REAUTH")
    await apache_kafka.create_topic(unique_topic, 1)
    tokens = itertools.count(1)

    def provider() -> str:
        next(tokens)
        return unsecured_jwt("reader")

    name, password = next(iter(SASL_USERS.items()))
    run_s = 3 * SASL_SESSION_MS / 1000
    sent: list[bytes] = []
    got: list[bytes] = []
    async with (
        no_lost_connections(caplog),
        Producer(reauth, linger_ms=0, **scram("SCRAM-SHA-256", name, password)) as producer,
        Consumer(
            bootstrap_servers=reauth,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=200,
            **oauth(provider),
        ) as consumer,
    ):
        consumer.assign([TopicPartition(unique_topic, 0)])
        await producer.send(unique_topic, b"first", partition=0)
        sent.append(b"first")
        while not got:
            batch = await consumer.getmany(timeout_ms=200)
            got += [r.value for records in batch.values() for r in records]
        before = (
            producer.metrics()["connection-creation-total"],
            consumer.metrics()["connection-creation-total"],
        )
        ends = time.monotonic() + run_s
        with anyio.fail_after(run_s + 30):
            while time.monotonic() < ends or len(got) < len(sent):
                if time.monotonic() < ends:
                    value = b"r%d" % len(sent)
                    await producer.send(unique_topic, value, partition=0)
                    sent.append(value)
                batch = await consumer.getmany(timeout_ms=100)
                got += [r.value for records in batch.values() for r in records]
        after = (
            producer.metrics()["connection-creation-total"],
            consumer.metrics()["connection-creation-total"],
        )
        renewed = {
            kind: {c.node: c.reauthentications for c in client.health().connections}
            for kind, client in (("producer", producer), ("consumer", consumer))
        }
        closed = (
            producer.metrics()["connection-close-total"],
            consumer.metrics()["connection-close-total"],
        )
    assert got == sent and len(sent) > 20
    assert after == before and closed == (0, 0)
    assert renewed["producer"]["1"] >= 3, renewed
    assert renewed["consumer"]["1"] >= 3, renewed
    assert next(tokens) - 1 >= 1 + renewed["consumer"]["1"]  # a token per login
    print(f"\nFIGURES reauth: {len(sent)} records over {run_s:g} s, renewals {renewed}")


async def test_a_token_provider_failing_at_reauthentication_raises_then_recovers(
    apache_kafka: BrokerInfo, unique_topic: str
) -> None:
    """The provider refuses at the renewal: the connection closes, the new connection's
    login raises the provider's SaslAuthenticationFailedError from the consumer's calls
    (the network task goes on), and once the provider works again so does the consumer."""
    reauth = listener(apache_kafka, "REAUTH")
    await apache_kafka.create_topic(unique_topic, 1)
    refusing = False

    def provider() -> str:
        if refusing:
            raise SaslAuthenticationFailedError("the identity provider is down")
        return unsecured_jwt("reader")

    tp = TopicPartition(unique_topic, 0)
    async with Producer(apache_kafka.bootstrap, linger_ms=0) as producer:
        await producer.send(unique_topic, b"before", partition=0)
        async with Consumer(
            bootstrap_servers=reauth,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=200,
            reconnect_backoff_max_ms=200,
            **oauth(provider),
        ) as consumer:
            consumer.assign([tp])
            with anyio.fail_after(10):
                first = await consumer.getmany(timeout_ms=2000)
            assert [r.value for r in first[tp]] == [b"before"]
            refusing = True
            with anyio.fail_after(SASL_SESSION_MS / 1000 + 15):
                with pytest.raises(SaslAuthenticationFailedError, match="identity provider"):
                    while True:  # polls until the renewal is due, fails, and login fails
                        assert await consumer.getmany(timeout_ms=200) == {}
            await producer.send(unique_topic, b"after", partition=0)
            refusing = False
            got: list[bytes] = []
            stale = 0
            with anyio.fail_after(15):
                while not got:
                    try:
                        batch = await consumer.getmany(timeout_ms=200)
                    except SaslAuthenticationFailedError:
                        stale += 1  # a login that failed before the fix, raised once
                        continue
                    got += [r.value for records in batch.values() for r in records]
            assert got == [b"after"]
            assert stale <= 2  # one login under way per address (bootstrap, node 1)
