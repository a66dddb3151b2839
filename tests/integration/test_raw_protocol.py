"""The foundation against real brokers: ApiVersions, Metadata, CreateTopics, and raw Produce
then Fetch of 10,000 records per compression, on Tansu and the librdkafka mock cluster."""

from __future__ import annotations

import json
import re
import zipfile

import anyio
import pytest

from kafkaio import Admin, NewTopic
from kafkaio.consumer.fetcher import LAST_NAME_ONLY_FETCH_VERSION
from kafkaio.errors import TopicAlreadyExistsError
from kafkaio.net import Connection, ConnectionConfig
from kafkaio.net.manager import parse_bootstrap_servers
from kafkaio.producer.transactions import ADD_PARTITIONS_MAX_VERSION, END_TXN_MAX_VERSION
from kafkaio.protocol import messages as m
from kafkaio.records import Compression
from kafkaio.share.protocol import SHARE_API_VERSION
from kafkaio.testing import ApacheKafka, BrokerInfo, eventually
from kafkaio.testing.raw import build_batches, fetch_all, produce
from tests.integration._versions import NEGOTIATED, VERSIONED

pytestmark = pytest.mark.integration

N = 10_000


async def _leader_connection(broker: BrokerInfo, admin: Admin, topic: str) -> Connection:
    info = (await admin.describe_topics([topic]))[topic]
    leader = info.partitions[0].leader
    cluster = await admin.describe_cluster()
    node = next(b for b in cluster.brokers if b.node_id == leader)
    return await Connection.connect(node.host, node.port, ConnectionConfig(), node_id=leader)


async def test_api_versions_negotiated(kafka_broker: BrokerInfo) -> None:
    if kafka_broker.name not in NEGOTIATED:
        pytest.skip(f"no stated versions for broker {kafka_broker.name!r}")
    host, port = parse_bootstrap_servers(kafka_broker.bootstrap)[0]
    conn = await Connection.connect(host, port, ConnectionConfig())
    try:
        # what the connection learnt is what the broker advertises (a separate probe)
        assert conn.api_versions == dict(kafka_broker.api_versions)
        # before, the expected version was computed by the connection's own rule
        negotiated = {name: conn.version_for(cls) for name, cls in VERSIONED.items()}
        assert negotiated == NEGOTIATED[kafka_broker.name]
        response = await conn.send(m.MetadataRequest(topics=None))
        assert response.brokers
    finally:
        await conn.close()


def kafka_served_versions(apache: ApacheKafka) -> dict[int, tuple[int, int]]:
    """The request versions Apache Kafka serves, from its own message definitions (the
    kafka-clients jar of the test broker), not from its ApiVersions answer: Kafka 4.x
    still advertises Produce v0-2, which KIP-896 removed (KAFKA-18659), and refuses them."""
    jar = next(apache.libs.glob("kafka-clients-*.jar"))
    served: dict[int, tuple[int, int]] = {}
    with zipfile.ZipFile(jar) as archive:
        for name in archive.namelist():
            if not (name.startswith("common/message/") and name.endswith("Request.json")):
                continue
            spec = json.loads(re.sub(r"//.*", "", archive.read(name).decode()))
            if "broker" not in spec.get("listeners", []) or spec["validVersions"] == "none":
                continue
            low, _, high = spec["validVersions"].partition("-")
            served[spec["apiKey"]] = (int(low), int(high or low))
    return served


async def test_kafkaio_negotiates_only_versions_kafka_4_still_serves(
    apache_kafka: BrokerInfo,
) -> None:
    """KIP-896 (Kafka 4.0) removed old versions of many APIs (Produce below v3, Fetch below
    v4, ListOffsets v0, OffsetCommit below v2, ...). Every API kafkaio speaks, and each
    version cap its clients apply, falls within what Apache Kafka 4.4's own definitions
    serve; share-group APIs are sent as v1 (kafkaio.share.protocol)."""
    assert apache_kafka.apache is not None
    served = kafka_served_versions(apache_kafka.apache)
    # the definitions are 4.x's: the KIP-896 floors are there
    assert {k: served[k][0] for k in (0, 1, 2, 8, 9, 19, 20, 23, 29, 32)} == {
        0: 3,
        1: 4,
        2: 1,
        8: 2,
        9: 1,
        19: 2,
        20: 1,
        23: 2,
        29: 1,
        32: 1,
    }
    host, port = parse_bootstrap_servers(apache_kafka.bootstrap)[0]
    conn = await Connection.connect(host, port, ConnectionConfig())
    try:
        m.load_all()
        outside: dict[str, tuple[int, tuple[int, int]]] = {}
        spoken = 0
        for key, (request_cls, _) in sorted(m.REQUESTS.items()):
            advertised = key in conn.api_versions  # not telemetry: no metrics plugin here
            if key not in served or not advertised or request_cls.MAX_STABLE_VERSION < 0:
                continue
            version = conn.version_for(request_cls)
            spoken += 1
            low, high = served[key]
            if not low <= version <= high:
                outside[request_cls.__name__] = (version, served[key])
        assert outside == {}
        assert spoken >= 45  # kafkaio speaks 49 of the APIs Kafka 4.4 advertises
    finally:
        await conn.close()
    caps = {
        "Fetch without topic ids": (1, LAST_NAME_ONLY_FETCH_VERSION),
        "AddPartitionsToTxn": (24, ADD_PARTITIONS_MAX_VERSION),
        "EndTxn": (26, END_TXN_MAX_VERSION),
        "share groups": (78, SHARE_API_VERSION),
    }
    assert {what: served[key][0] <= cap <= served[key][1] for what, (key, cap) in caps.items()} == (
        dict.fromkeys(caps, True)
    )


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
    # create_topic waits until the leader serves the partition: Apache Kafka lists a new
    # partition's leader in Metadata a moment before that broker accepts Produce for it
    await kafka_broker.create_topic(unique_topic)
    async with Admin(kafka_broker.bootstrap) as admin:
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
