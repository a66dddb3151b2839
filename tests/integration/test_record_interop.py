"""Record batches cross-checked with independent clients through a real broker.

kafkaio-encoded batches (every compression) are read back by aiokafka and confluent-kafka
consumers; batches written by aiokafka and confluent-kafka producers (every compression) are
decoded by kafkaio's raw fetch.
"""

from __future__ import annotations

import anyio
import pytest

from kafkaio import Admin
from kafkaio.net import Connection, ConnectionConfig
from kafkaio.records import Compression
from kafkaio.testing import BrokerInfo
from kafkaio.testing.raw import build_batches, fetch_all, produce

pytestmark = pytest.mark.integration

N = 2_000
CODECS = list(Compression)
IDS = [c.name.lower() for c in CODECS]
HEADERS = [("h1", b"v1"), ("empty", b""), ("null", None)]


def _records() -> list[tuple[bytes | None, bytes | None]]:
    out: list[tuple[bytes | None, bytes | None]] = []
    for i in range(N):
        key = None if i % 97 == 1 else b"key-%d" % i
        value = None if i % 89 == 0 and key is not None else b"v%05d:" % i + bytes(range(i % 200))
        out.append((key, value))
    return out


async def _leader(admin: Admin, topic: str) -> Connection:
    with anyio.fail_after(10):
        while True:
            info = (await admin.describe_topics([topic]))[topic]
            if not info.error and info.partitions and info.partitions[0].leader is not None:
                break
            await anyio.sleep(0.05)
    leader = info.partitions[0].leader
    node = next(b for b in (await admin.describe_cluster()).brokers if b.node_id == leader)
    return await Connection.connect(node.host, node.port, ConnectionConfig(), node_id=leader)


async def _produce_with_kafkaio(
    broker: BrokerInfo, topic: str, codec: Compression
) -> list[tuple[bytes | None, bytes | None]]:
    records = _records()
    await broker.create_topic(topic, 1)
    async with Admin(broker.bootstrap) as admin:
        conn = await _leader(admin, topic)
        try:
            await produce(conn, topic, 0, build_batches(records, compression=codec, headers=HEADERS))
        finally:
            await conn.close()
    return records


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
async def test_aiokafka_reads_kafkaio_batches(
    kafka_broker: BrokerInfo, unique_topic: str, codec: Compression
) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    records = await _produce_with_kafkaio(kafka_broker, unique_topic, codec)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka_broker.bootstrap, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        tp = TopicPartition(unique_topic, 0)
        consumer.assign([tp])
        got = []
        with anyio.fail_after(30):
            while len(got) < N:
                batch = await consumer.getmany(tp, timeout_ms=500)
                got.extend(batch.get(tp, []))
    finally:
        await consumer.stop()
    assert [(r.key, r.value) for r in got] == records
    assert [r.offset for r in got] == list(range(N))
    assert all(list(r.headers) == HEADERS for r in got)


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
async def test_confluent_reads_kafkaio_batches(
    kafka_broker: BrokerInfo, unique_topic: str, codec: Compression
) -> None:
    from confluent_kafka import Consumer, TopicPartition

    records = await _produce_with_kafkaio(kafka_broker, unique_topic, codec)

    def consume() -> list[tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]]:
        c = Consumer(
            {
                "bootstrap.servers": kafka_broker.bootstrap,
                "group.id": "kafkaio-interop",
                "enable.auto.commit": False,
                "check.crcs": True,
            }
        )
        try:
            c.assign([TopicPartition(unique_topic, 0, 0)])
            out = []
            for _ in range(300):
                for msg in c.consume(num_messages=1000, timeout=0.2):
                    assert msg.error() is None, msg.error()
                    out.append((msg.key(), msg.value(), msg.offset(), msg.headers() or []))
                if len(out) >= N:
                    break
            return out
        finally:
            c.close()

    got = await anyio.to_thread.run_sync(consume)
    assert [(k, v) for k, v, _, _ in got] == records
    assert [o for _, _, o, _ in got] == list(range(N))
    assert all(h == HEADERS for _, _, _, h in got)


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
async def test_kafkaio_reads_aiokafka_batches(
    kafka_broker: BrokerInfo, unique_topic: str, codec: Compression
) -> None:
    from aiokafka import AIOKafkaProducer

    records = _records()
    await kafka_broker.create_topic(unique_topic, 1)
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_broker.bootstrap,
        compression_type=None if codec is Compression.NONE else codec.name.lower(),
        linger_ms=5,
    )
    await producer.start()
    try:
        futures = [
            await producer.send(unique_topic, value=v, key=k, partition=0, headers=HEADERS)
            for k, v in records
        ]
        for fut in futures:
            await fut
    finally:
        await producer.stop()
    await _fetch_and_check(kafka_broker, unique_topic, records)


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
async def test_kafkaio_reads_confluent_batches(
    kafka_broker: BrokerInfo, unique_topic: str, codec: Compression
) -> None:
    from confluent_kafka import Producer

    records = _records()
    await kafka_broker.create_topic(unique_topic, 1)

    def produce_all() -> None:
        p = Producer(
            {
                "bootstrap.servers": kafka_broker.bootstrap,
                "compression.type": codec.name.lower(),
                "linger.ms": 5,
            }
        )
        for k, v in records:
            p.produce(unique_topic, value=v, key=k, partition=0, headers=HEADERS)
            p.poll(0)
        assert p.flush(30) == 0

    await anyio.to_thread.run_sync(produce_all)
    await _fetch_and_check(kafka_broker, unique_topic, records)


async def _fetch_and_check(
    broker: BrokerInfo, topic: str, records: list[tuple[bytes | None, bytes | None]]
) -> None:
    async with Admin(broker.bootstrap) as admin:
        conn = await _leader(admin, topic)
        try:
            with anyio.fail_after(30):
                got = await fetch_all(conn, topic, 0, N)
        finally:
            await conn.close()
    assert [(r.key, r.value) for r in got] == records
    assert [r.offset for r in got] == list(range(N))
    assert all(r.headers == HEADERS for r in got)
