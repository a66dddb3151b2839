"""The foundation against real brokers: ApiVersions, Metadata, CreateTopics, and raw Produce
then Fetch of 10,000 records per compression, on Tansu and the librdkafka mock cluster."""

from __future__ import annotations

import anyio
import pytest

from kafkaio import Admin, NewTopic
from kafkaio.errors import TopicAlreadyExistsError
from kafkaio.net import Connection, ConnectionConfig
from kafkaio.net.manager import parse_bootstrap_servers
from kafkaio.protocol import messages as m
from kafkaio.records import Compression
from kafkaio.testing import BrokerInfo, eventually
from kafkaio.testing.raw import build_batches, fetch_all, produce

pytestmark = pytest.mark.integration

N = 10_000


async def _leader_connection(broker: BrokerInfo, admin: Admin, topic: str) -> Connection:
    info = (await admin.describe_topics([topic]))[topic]
    leader = info.partitions[0].leader
    cluster = await admin.describe_cluster()
    node = next(b for b in cluster.brokers if b.node_id == leader)
    return await Connection.connect(node.host, node.port, ConnectionConfig(), node_id=leader)


async def _create(broker: BrokerInfo, admin: Admin, topic: str, partitions: int = 1) -> None:
    if broker.has("create_topics"):
        results = await admin.create_topics([NewTopic(topic, partitions, 1)])
        assert results[topic].error is None
    else:
        await broker.create_topic(topic, partitions)
    with anyio.fail_after(10):
        while True:
            info = (await admin.describe_topics([topic]))[topic]
            if not info.error and all(p.leader is not None for p in info.partitions):
                return
            await anyio.sleep(0.05)


async def test_api_versions_negotiated(kafka_broker: BrokerInfo) -> None:
    host, port = parse_bootstrap_servers(kafka_broker.bootstrap)[0]
    conn = await Connection.connect(host, port, ConnectionConfig())
    try:
        # what the connection negotiated is what the broker advertises
        assert conn.api_versions == dict(kafka_broker.api_versions)
        version = conn.version_for(m.MetadataRequest)
        low, high = kafka_broker.api_versions[m.MetadataRequest.API_KEY]
        assert version == min(high, m.MetadataRequest.MAX_STABLE_VERSION) and version >= low
        response = await conn.send(m.MetadataRequest(topics=None))
        assert response.brokers
    finally:
        await conn.close()


async def test_describe_cluster_lists_every_broker(kafka_broker: BrokerInfo) -> None:
    async with Admin(kafka_broker.bootstrap) as admin:
        cluster = await admin.describe_cluster()
    expected = 3 if kafka_broker.has("multi_broker") else 1
    assert len(cluster.brokers) == expected
    assert all(b.port > 0 for b in cluster.brokers)


async def test_create_list_delete_topics(kafka_broker: BrokerInfo, unique_topic: str) -> None:
    kafka_broker.skip_unless("create_topics", "delete_topics")
    async with Admin(kafka_broker.bootstrap) as admin:
        created = await admin.create_topics([NewTopic(unique_topic, 3, 1)])
        assert created[unique_topic].error is None
        assert created[unique_topic].num_partitions in (3, -1)
        again = await admin.create_topics([NewTopic(unique_topic, 3, 1)])
        assert isinstance(again[unique_topic].error, TopicAlreadyExistsError)
        await eventually(
            admin.list_topics, lambda names: unique_topic in names, what="topic listed"
        )
        info = (await admin.describe_topics([unique_topic]))[unique_topic]
        assert [p.partition for p in info.partitions] == [0, 1, 2]
        deleted = await admin.delete_topics([unique_topic, unique_topic + "-missing"])
        assert deleted[unique_topic] is None
        assert deleted[unique_topic + "-missing"] is not None
        await eventually(  # Apache Kafka: the broker's metadata catches up a moment later
            admin.list_topics, lambda names: unique_topic not in names, what="topic deleted"
        )


@pytest.mark.parametrize("codec", list(Compression), ids=[c.name.lower() for c in Compression])
async def test_produce_then_fetch_10k(
    kafka_broker: BrokerInfo, unique_topic: str, codec: Compression
) -> None:
    records = [(b"k%06d" % i, b"value-%06d-" % i + b"x" * (i % 50)) for i in range(N)]
    batches = build_batches(records, compression=codec, batch_size=32 * 1024)
    assert len(batches) > 1
    async with Admin(kafka_broker.bootstrap) as admin:
        await _create(kafka_broker, admin, unique_topic)
        conn = await _leader_connection(kafka_broker, admin, unique_topic)
        try:
            with anyio.fail_after(60):
                offsets = await produce(conn, unique_topic, 0, batches)
                got = await fetch_all(conn, unique_topic, 0, N)
        finally:
            await conn.close()
    assert offsets[0] == 0 and offsets == sorted(offsets)
    assert [r.offset for r in got] == list(range(N))
    assert [(r.key, r.value) for r in got] == records
