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
    assert counts[0] <= uncompressed
    assert max(counts) > 3 * uncompressed, counts  # later batches: many more records
    # ... and still about batch_size compressed (the estimate keeps a 5% margin)
    assert max(b.size_in_bytes for b in batches) <= 4096 * 1.1


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
