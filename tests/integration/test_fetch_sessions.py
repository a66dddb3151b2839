"""Fetch sessions (KIP-227) against real brokers: the consumer asks every broker for one; a
broker that keeps them gets incremental requests and the consumer still reads every record
once and in order. Tansu 0.6 and librdkafka's mock cluster keep no sessions (they answer
session id 0), so there the test skips; Apache Kafka (the `kafka` parameter, or an external
cluster) runs it. The session state machine itself is tested against a simulated broker in
tests/unit/consumer/test_fetch_session.py."""

from __future__ import annotations

import logging
import re
from typing import Any

import anyio
import pytest

from kafkaio import Consumer, Producer, TopicPartition
from kafkaio.net import Connection, ConnectionConfig
from kafkaio.protocol import messages as m
from kafkaio.testing import BrokerInfo

pytestmark = pytest.mark.integration

PARTITIONS = 3
RECORDS = 3000


async def _connect(broker: BrokerInfo) -> Connection:
    host, port = broker.bootstrap.split(",")[0].rsplit(":", 1)
    return await Connection.connect(host, int(port), ConnectionConfig())


async def _incremental_fetch_error(broker: BrokerInfo, node_id: int, session_id: int) -> int:
    """The error code broker `node_id` answers to an incremental Fetch of `session_id` at an
    epoch the session cannot be at: 70 (FETCH_SESSION_ID_NOT_FOUND) once the session is
    gone, 71 (INVALID_FETCH_SESSION_EPOCH) while it exists."""
    conn = await _connect(broker)
    try:
        metadata = await conn.send(m.MetadataRequest(topics=[]))
    finally:
        await conn.close()
    (node,) = [b for b in metadata.brokers if b.node_id == node_id]
    conn = await Connection.connect(node.host, node.port, ConnectionConfig())
    try:
        request = m.FetchRequest(
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            session_id=session_id,
            session_epoch=2**31 - 2,
        )
        response = await conn.send(request, version=min(conn.version_for(m.FetchRequest), 12))
        return int(response.error_code)
    finally:
        await conn.close()


async def _session_id_of_a_full_fetch(broker: BrokerInfo, topic: str) -> int:
    """The session id a broker answers to a full Fetch that asks for a session (epoch 0)."""
    conn = await _connect(broker)
    try:
        version = min(conn.version_for(m.FetchRequest), 12)  # by topic name
        if version < 7:
            return 0  # sessions need Fetch v7
        request = m.FetchRequest(
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            session_id=0,
            session_epoch=0,
            topics=[
                m.FetchRequest.FetchTopic(
                    topic=topic,
                    partitions=[
                        m.FetchRequest.FetchPartition(
                            partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                        )
                    ],
                )
            ],
        )
        response = await conn.send(request, version=version)
        return int(response.session_id)
    finally:
        await conn.close()


async def test_consumer_reads_through_fetch_sessions(
    kafka_broker: BrokerInfo, unique_topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    await kafka_broker.create_topic(unique_topic, PARTITIONS)
    if await _session_id_of_a_full_fetch(kafka_broker, unique_topic) == 0:
        pytest.skip(
            f"broker {kafka_broker.name!r} keeps no fetch sessions (KIP-227): it answers a "
            "full Fetch with epoch 0 with session id 0, so every request stays full"
        )
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    async with Producer(kafka_broker.bootstrap, linger_ms=5) as producer:
        for i in range(RECORDS):
            value = f"value-{i:06d}".encode()
            sent[i % PARTITIONS].append(value)
            await producer.enqueue(unique_topic, value, partition=i % PARTITIONS)
        await producer.flush()
    caplog.set_level(logging.DEBUG, logger="kafkaio.consumer")
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    async with Consumer(
        bootstrap_servers=kafka_broker.bootstrap,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=4 * 1024,  # many fetches per partition
    ) as consumer:
        consumer.assign([TopicPartition(unique_topic, p) for p in range(PARTITIONS)])
        with anyio.fail_after(60):
            while sum(len(v) for v in got.values()) < RECORDS:
                for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                    got[tp.partition].extend(r.value for r in records)
        extra = await consumer.getmany(timeout_ms=300)
    assert got == sent and not extra  # every record once, in order per partition
    opened = [r for r in caplog.records if "fetch session 0 ->" in r.getMessage()]
    assert opened, "the consumer opened no fetch session"
    # sessions last: at most one per leader node (<= one per partition), not one per request
    assert len(opened) <= PARTITIONS
    # closing the consumer closed its sessions (a final request each), not left them to the
    # broker's cache to evict
    for record in opened:
        match = re.match(r"node (-?\d+): fetch session 0 -> (\d+)", record.getMessage())
        assert match is not None, record.getMessage()
        node_id, session_id = int(match[1]), int(match[2])
        assert await _incremental_fetch_error(kafka_broker, node_id, session_id) == 70



SENT_ON_PEER = re.compile(
    r"node (\d+): FetchRequest sent on (.+), not behind (\d+) request\(s\) in flight on (.+)"
)
SESSION_CLOSED = re.compile(r"node (\d+): fetch session (\d+) closed \(error code (-?\d+)\)")


def _secured(broker: BrokerInfo, security: str) -> tuple[str, dict[str, Any]]:
    """The bootstrap of the Apache Kafka listener for `security` and the client options."""
    if security == "plaintext":
        return broker.bootstrap, {}
    from kafkaio.testing import security as test_security
    from kafkaio.testing.plugin import SASL_USERS

    assert broker.apache is not None
    name = {"tls": "SSL", "sasl": "SASL_PLAINTEXT"}[security]
    if name not in broker.apache.listeners:
        pytest.skip(f"Apache Kafka has no {name} listener: {test_security.unavailable_reason()}")
    bootstrap = broker.apache.bootstrap_for(name)
    if security == "tls":
        assert broker.apache.tls_keystore is not None
        certs = test_security.TestCertificates.at(broker.apache.tls_keystore.parent)
        return bootstrap, {"security_protocol": "SSL", "ssl_context": certs.client_context()}
    ((user, password),) = SASL_USERS.items()
    return bootstrap, {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }


@pytest.mark.parametrize(
    ("mode", "security"),
    [
        ("classic", "plaintext"),
        ("consumer", "plaintext"),
        ("assign", "plaintext"),
        ("classic", "tls"),
        ("classic", "sasl"),
    ],
)
async def test_close_ends_the_session_on_another_idle_connection_to_the_broker(
    broker: BrokerInfo,
    unique_topic: str,
    mode: str,
    security: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The final Fetch that ends the session goes on an idle connection to the fetch broker
    that is already open, not behind the fetch the broker holds on the consumer's fetch
    connection (answered only after fetch_max_wait_ms): on one broker, a group member's
    coordinator connection (group protocol classic or consumer); with assign(), the
    bootstrap connection (the broker is at the bootstrap address). Over TLS (an anyio
    stream with its own writer task) and SASL too."""
    bootstrap, options = _secured(broker, security)
    await broker.create_topic(unique_topic, 1)
    async with Producer(broker.bootstrap) as producer:
        for i in range(10):
            await producer.enqueue(unique_topic, f"v{i}".encode(), partition=0)
        await producer.flush()
    caplog.set_level(logging.DEBUG, logger="kafkaio.consumer")
    caplog.set_level(logging.DEBUG, logger="kafkaio.runtime")
    group = {} if mode == "assign" else {"group_id": unique_topic, "group_protocol": mode}
    consumer = Consumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=10_000,  # the broker holds the next fetch: no new records come
        **group,
        **options,
    )
    async with consumer:
        if mode == "assign":
            consumer.assign([TopicPartition(unique_topic, 0)])
        else:
            consumer.subscribe([unique_topic])
        got = 0
        with anyio.fail_after(60):
            while got < 10:
                got += sum(len(r) for r in (await consumer.getmany(timeout_ms=500)).values())
        assert await consumer.getmany(timeout_ms=200) == {}  # the next fetch is held now
    messages = [r.getMessage() for r in caplog.records]
    sent = [match for text in messages if (match := SENT_ON_PEER.match(text))]
    assert len(sent) == 1, messages
    node, peer, in_flight, own = int(sent[0][1]), sent[0][2], int(sent[0][3]), sent[0][4]
    assert own.startswith(f"node {node} (") and in_flight >= 1
    address = own.split(" ", 2)[2].strip("()")
    if mode == "assign":
        assert peer == f"broker {address}"  # the bootstrap connection
    else:
        assert peer == f"node {2**31 - 1 - node} ({address})"  # coordinator_connection_id
    closed = [match for text in messages if (match := SESSION_CLOSED.match(text))]
    assert [(int(c[1]), int(c[3])) for c in closed] == [(node, 0)], messages
    # answered without error, and the broker really freed the session: an incremental
    # Fetch of it now finds no such session (a final Fetch is answered NONE either way)
    assert await _incremental_fetch_error(broker, node, int(closed[0][2])) == 70
