"""Compressed batches on real brokers: sized by their compressed size (more records per batch
as the estimate learns how well the records compress), and split when a broker rejects one as
too large (MESSAGE_TOO_LARGE injected on librdkafka's mock cluster)."""

from __future__ import annotations

import logging

import anyio
import pytest

from kafkaio.net import Connection, ConnectionConfig
from kafkaio.producer import Producer
from kafkaio.protocol import messages as m
from kafkaio.records import iter_batches
from kafkaio.records.batch import RecordBatch
from kafkaio.testing import BrokerInfo

pytestmark = pytest.mark.integration

GUARD = 60
PRODUCE_API = 0
MESSAGE_TOO_LARGE = 10


def value(i: int) -> bytes:
    return b"%08d" % i + b"compressible payload " * 10  # ~220 bytes, compresses well


async def produce(bootstrap: str, topic: str, first: int, count: int, **options: object) -> list:  # type: ignore[type-arg]
    async with Producer(bootstrap, **options) as producer:  # type: ignore[arg-type]
        futures = [await producer.enqueue(topic, value(i)) for i in range(first, first + count)]
        await producer.flush()
    return [f.result() for f in futures]


async def read_batches(bootstrap: str, topic: str, count: int) -> list[RecordBatch]:
    """Every batch of partition 0 from offset 0, until `count` records were read."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    conn = await Connection.connect(host, int(port), ConnectionConfig())
    batches: list[RecordBatch] = []
    try:
        offset = 0
        while sum(b.record_count for b in batches) < count:
            request = m.FetchRequest(
                max_wait_ms=100,
                min_bytes=1,
                max_bytes=4 << 20,
                topics=[
                    m.FetchRequest.FetchTopic(
                        topic=topic,
                        partitions=[
                            m.FetchRequest.FetchPartition(
                                partition=0, fetch_offset=offset, partition_max_bytes=4 << 20
                            )
                        ],
                    )
                ],
            )
            version = min(12, conn.version_for(m.FetchRequest))  # by topic name
            response = await conn.send(request, version=version)
            raw = response.responses[0].partitions[0].records or b""
            got = [b for b in iter_batches(raw) if isinstance(b, RecordBatch)]
            got = [b for b in got if b.base_offset >= offset]
            assert got, f"no batch at offset {offset}: the records stopped early"
            batches.extend(got)
            offset = got[-1].next_offset
    finally:
        await conn.close()
    return batches


async def test_compressed_batches_grow_past_batch_size_uncompressed(
    broker: BrokerInfo, unique_topic: str
) -> None:
    await broker.create_topic(unique_topic, 1)
    total = 20_000
    with anyio.fail_after(GUARD):
        results = await produce(
            broker.bootstrap,
            unique_topic,
            0,
            total,
            compression_type="lz4",
            batch_size=4096,
            linger_ms=20,
        )
        batches = await read_batches(broker.bootstrap, unique_topic, total)
    assert [r.offset for r in results] == list(range(total))
    values = [r.value for b in batches for r in b]
    assert values == [value(i) for i in range(total)]  # every record once, in order
    uncompressed = 4096 // len(value(0))  # records a 4096-byte uncompressed batch holds
    counts = [b.record_count for b in batches]
    # the first batch, before the estimate learned: at most 4096 uncompressed bytes, grown
    # to at most 4x while it waited to be sent (the connection opening)
    assert counts[0] <= 4 * uncompressed
    # later batches: more records than growth alone allows (the estimate learned) ...
    assert max(counts) > 4 * uncompressed, counts
    # ... and still within 4x batch_size compressed (the estimate keeps a 5% margin)
    assert max(b.size_in_bytes for b in batches) <= 4 * 4096 * 1.1


async def test_a_batch_rejected_as_too_large_is_split(
    isolated_mock_cluster: BrokerInfo, unique_topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kafkaio")
    cluster = isolated_mock_cluster.cluster
    assert cluster is not None
    cluster.create_topic(unique_topic, 1)
    total = 6_000
    options = {
        "compression_type": "zstd",
        "batch_size": 2048,
        "linger_ms": 20,
        "enable_idempotence": True,
        # the mock checks no sequence numbers: a batch in flight behind a rejected one would
        # be written ahead of its parts (a broker that checks answers OUT_OF_ORDER, and the
        # producer retries it after them: test_sender.py). One request in flight keeps order.
        "max_in_flight_requests_per_connection": 1,
    }
    with anyio.fail_after(GUARD):
        async with Producer(isolated_mock_cluster.bootstrap, **options) as producer:  # type: ignore[arg-type]
            futures = [await producer.enqueue(unique_topic, value(i)) for i in range(4_000)]
            await producer.flush()  # the estimate has learned: batches are large now
            cluster.push_request_errors(PRODUCE_API, [MESSAGE_TOO_LARGE] * 2)
            for i in range(4_000, total):
                futures.append(await producer.enqueue(unique_topic, value(i)))
            await producer.flush()
        results = [f.result() for f in futures]
        batches = await read_batches(isolated_mock_cluster.bootstrap, unique_topic, total)
    values = [r.value for b in batches for r in b]
    assert values == [value(i) for i in range(total)]  # 0 lost, 0 duplicated, in order
    assert [r.offset for r in results] == list(range(total))
    split = [r.getMessage() for r in caplog.records if "as too large" in r.getMessage()]
    assert len(split) == 2, split


async def _fast_produce(producer: Producer, topic: str, first: int, count: int) -> list:  # type: ignore[type-arg]
    """Records ``first`` .. through produce() without yielding (as a loop running ahead of
    the network does), then flush: their results."""
    futures = []
    for i in range(first, first + count):
        try:
            futures.append(producer.produce(topic, value(i)))
        except Exception:  # noqa: BLE001 - WouldBlockError: buffer_memory is full
            futures.append(await producer.enqueue(topic, value(i)))
    await producer.flush()
    return [f.result() for f in futures]


async def test_full_batches_grow_while_the_network_task_waits(
    apache_kafka: BrokerInfo, unique_topic: str
) -> None:
    """Apache Kafka: records appended while a full batch waits to be sent go into it (up to
    4x batch_size), so the log holds batches larger than batch_size; nothing lost, in order."""
    total = 3_000
    await apache_kafka.create_topic(unique_topic)
    with anyio.fail_after(GUARD):
        async with Producer(apache_kafka.bootstrap, batch_size=2048, linger_ms=0) as producer:
            results = await _fast_produce(producer, unique_topic, 0, total)
        batches = await read_batches(apache_kafka.bootstrap, unique_topic, total)
    assert [r.value for b in batches for r in b] == [value(i) for i in range(total)]
    assert [r.offset for r in results] == list(range(total))
    sizes = [b.size_in_bytes for b in batches]
    assert max(sizes) > 2048, sizes  # grown past batch_size
    assert max(sizes) <= 4 * 2048, sizes


async def test_a_topic_refusing_grown_batches_gets_them_split_and_stops_growing(
    apache_kafka: BrokerInfo, unique_topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Apache Kafka, a topic whose max.message.bytes (3000) is above batch_size (2048) but
    below a grown batch: the refused batches are split and sent in order (idempotent: the
    batches in flight behind a refused one are retried after its parts), and once one was
    refused the topic's new batches stop growing: a second run of records meets no refusal."""
    caplog.set_level(logging.WARNING, logger="kafkaio")
    await apache_kafka.create_topic(unique_topic, configs={"max.message.bytes": "3000"})

    def refusals() -> int:
        return sum("as too large" in r.getMessage() for r in caplog.records)

    with anyio.fail_after(GUARD):
        async with Producer(apache_kafka.bootstrap, batch_size=2048, linger_ms=0) as producer:
            results = await _fast_produce(producer, unique_topic, 0, 1_000)
            first = refusals()
            results += await _fast_produce(producer, unique_topic, 1_000, 3_000)
        batches = await read_batches(apache_kafka.bootstrap, unique_topic, 4_000)
    assert [r.value for b in batches for r in b] == [value(i) for i in range(4_000)]
    assert [r.offset for r in results] == list(range(4_000))
    assert max(b.size_in_bytes for b in batches) <= 3000
    assert first >= 1 and refusals() == first
