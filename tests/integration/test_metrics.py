"""Client metrics after real produce/consume (every test broker): counts equal what
was sent and handed out, lag equals what is left per partition, connections add up, group
rebalances and commits are timed; logging is one line per state change, not per record."""

from __future__ import annotations

import logging
import time
from typing import Any

import anyio
import pytest

from kafkaio import Consumer, Producer, TopicPartition
from kafkaio.testing import BrokerInfo

pytestmark = pytest.mark.integration

PARTITIONS = 2
# as tests/integration/test_consumer_group.py: Tansu completes a join sooner
GROUP_OPTIONS: dict[str, Any] = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 300}


async def _send(producer: Producer, topic: str, per_partition: int, partitions: int) -> None:
    futures = [
        await producer.enqueue(topic, f"v{i}".encode(), partition=p)
        for i in range(per_partition)
        for p in range(partitions)
    ]
    await producer.flush()
    for future in futures:
        await future


async def _produce(
    broker: BrokerInfo, topic: str, per_partition: int, partitions: int = PARTITIONS
) -> Producer:
    """Produce `per_partition` records to each partition; returns the (closed) producer."""
    producer = Producer(broker.bootstrap, linger_ms=2)
    async with producer:
        await _send(producer, topic, per_partition, partitions)
    return producer


def _group_broker(broker: BrokerInfo) -> BrokerInfo:
    broker.skip_unless("consumer_groups")
    if broker.cluster is not None:
        broker.cluster.set_group_initial_rebalance_delay_ms(200)
    return broker


async def _consume(consumer: Consumer, wanted: dict[int, int]) -> dict[int, int]:
    """Hand out exactly wanted[p] records of each partition (pausing finished ones)."""
    got = dict.fromkeys(wanted, 0)
    tps = {p: TopicPartition(t.topic, p) for t in consumer.assignment() for p in [t.partition]}
    while got != wanted:
        for p, n in got.items():
            if n == wanted[p] and tps[p] not in consumer.paused():
                consumer.pause(tps[p])
        left = {tps[p] for p in wanted if got[p] < wanted[p]}
        limit = min(wanted[p] - got[p] for p in wanted if got[p] < wanted[p])
        batch = await consumer.getmany(*left, timeout_ms=500, max_records=limit)
        for tp, records in batch.items():
            got[tp.partition] += len(records)
            assert got[tp.partition] <= wanted[tp.partition]
    return got


async def test_consumer_counts_lag_and_connections(
    kafka_broker: BrokerInfo, unique_topic: str
) -> None:
    await kafka_broker.create_topic(unique_topic, PARTITIONS)
    produced = 40  # per partition
    await _produce(kafka_broker, unique_topic, produced)
    wanted = {0: 25, 1: 7}
    tps = [TopicPartition(unique_topic, p) for p in range(PARTITIONS)]
    consumer = Consumer(bootstrap_servers=kafka_broker.bootstrap, auto_offset_reset="earliest")
    with anyio.fail_after(30):
        async with consumer:
            consumer.assign(tps)
            await _consume(consumer, wanted)
            m = consumer.metrics()
            assert m["records-consumed-total"] == sum(wanted.values())
            assert m["fetch-total"] >= 1 and m["fetch-latency-max"] >= m["fetch-latency-avg"] > 0
            assert m["assigned-partitions"] == PARTITIONS
            assert 0 <= m["last-poll-seconds-ago"] < 30
            highwaters = {p: consumer.highwater(tps[p]) for p in range(PARTITIONS)}
            lags = {p: m["partitions"][f"{unique_topic}-{p}"]["records-lag"] for p in wanted}
            # the lag is measured against the high watermark of the consumer's own fetches
            assert lags == {p: highwaters[p] - wanted[p] for p in wanted}
            assert m["records-lag-max"] == max(lags.values())
            if kafka_broker.has("exact_end_offsets"):
                assert highwaters == dict.fromkeys(wanted, produced)
                assert lags == {p: produced - n for p, n in wanted.items()}
            health = consumer.health()
            assert health.healthy and health.running
            assert health.lag == {f"{unique_topic}-{p}": int(lags[p]) for p in wanted}
            connected = [c for c in health.connections if c.state == "connected"]
            assert m["connection-count"] == len(connected) >= 1
            assert m["connection-creation-total"] >= m["connection-count"]
    after = consumer.metrics()
    assert after["connection-count"] == 0
    assert after["connection-close-total"] == after["connection-creation-total"]
    assert not consumer.health().running


async def test_bytes_consumed_is_the_size_of_the_log_read(
    kafka_broker: BrokerInfo, unique_topic: str
) -> None:
    """A consumer that read a partition to its end handed out the bytes of every record
    batch in it: what the broker's DescribeLogDirs says the partition's log holds."""
    kafka_broker.skip_unless("describe_log_dirs")
    from kafkaio.admin import Admin

    await kafka_broker.create_topic(unique_topic, 1)
    await _produce(kafka_broker, unique_topic, 300, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    async with Admin(kafka_broker.bootstrap) as admin:
        dirs = await admin.describe_log_dirs()
    sizes = [
        log_dir.replicas[(unique_topic, 0)].size
        for broker_dirs in dirs.values()
        for log_dir in broker_dirs.log_dirs
        if (unique_topic, 0) in log_dir.replicas
    ]
    consumer = Consumer(bootstrap_servers=kafka_broker.bootstrap, auto_offset_reset="earliest")
    with anyio.fail_after(30):
        async with consumer:
            consumer.assign([tp])
            await _consume(consumer, {0: 300})
            assert await consumer.getmany(timeout_ms=300) == {}  # the end: fetches used up
            consumed = consumer.metrics()["bytes-consumed-total"]
    assert len(sizes) == 1 and sizes[0] > 300 * 2  # one replica; 300 records of 2+ bytes
    assert consumed == sizes[0]


async def test_group_rebalance_and_commit_are_timed(
    kafka_broker: BrokerInfo, unique_topic: str
) -> None:
    _group_broker(kafka_broker)
    await kafka_broker.create_topic(unique_topic, PARTITIONS)
    await _produce(kafka_broker, unique_topic, 5)
    consumer = Consumer(
        unique_topic,
        bootstrap_servers=kafka_broker.bootstrap,
        group_id=f"g-{unique_topic}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **GROUP_OPTIONS,
    )
    with anyio.fail_after(40):
        async with consumer:
            seen = 0
            while seen < 5 * PARTITIONS:
                batch = await consumer.getmany(timeout_ms=500)
                seen += sum(len(r) for r in batch.values())
            await consumer.commit()
            m = consumer.metrics()
            assert m["rebalance-total"] == 1
            assert m["rebalance-latency-max"] >= m["rebalance-latency-avg"] > 0
            assert m["failed-rebalance-total"] == 0
            assert m["commit-total"] == 1 and m["commit-latency-avg"] > 0
            assert m["records-consumed-total"] == seen
            assert m["assigned-partitions"] == PARTITIONS
            health = consumer.health()
            assert health.group is not None and health.group.state == "stable"
            assert health.total_lag == 0
            # the generation is the broker's (numbering differs: Tansu starts at 0, the
            # mock at 2): the coordinator takes a commit from the member at that
            # generation and refuses one at the next
            group = health.group
            tp = TopicPartition(unique_topic, 0)
            assert (
                await _commit_code(
                    kafka_broker, group.group_id, group.member_id, group.generation, tp
                )
                == 0
            )
            assert (
                await _commit_code(
                    kafka_broker, group.group_id, group.member_id, group.generation + 1, tp
                )
                == ILLEGAL_GENERATION
            )


ILLEGAL_GENERATION = 22


async def _commit_code(
    broker: BrokerInfo, group: str, member_id: str, generation: int, tp: TopicPartition
) -> int:
    """The error code the group's coordinator gives an OffsetCommit of offset 1 for `tp`
    from `member_id` at `generation`."""
    from kafkaio.metadata.coordinators import CoordinatorType, lookup_request, parse_lookup
    from kafkaio.net import Connection, ConnectionConfig, ConnectionManager
    from kafkaio.protocol import messages as m

    async with ConnectionManager(broker.bootstrap) as connections:
        conn = await connections.bootstrap()
        answer = await conn.send(lookup_request(CoordinatorType.GROUP, [group]))
        found = parse_lookup(answer, CoordinatorType.GROUP, [group])[group]
        assert not isinstance(found, Exception), found
        coordinator = await Connection.connect(found.host, found.port, ConnectionConfig())
        try:
            response = await coordinator.send(
                m.OffsetCommitRequest(
                    group_id=group,
                    generation_id_or_member_epoch=generation,
                    member_id=member_id,
                    topics=[
                        m.OffsetCommitRequest.OffsetCommitRequestTopic(
                            name=tp.topic,
                            partitions=[
                                m.OffsetCommitRequest.OffsetCommitRequestPartition(
                                    partition_index=tp.partition, committed_offset=1
                                )
                            ],
                        )
                    ],
                )
            )
        finally:
            await coordinator.close()
    return int(response.topics[0].partitions[0].error_code)


async def test_metrics_disabled_reads_empty(kafka_broker: BrokerInfo, unique_topic: str) -> None:
    await kafka_broker.create_topic(unique_topic, 1)
    await _produce(kafka_broker, unique_topic, 3, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    consumer = Consumer(
        bootstrap_servers=kafka_broker.bootstrap,
        auto_offset_reset="earliest",
        metrics_enabled=False,
    )
    with anyio.fail_after(20):
        async with consumer:
            consumer.assign([tp])
            got = 0
            while got < 3:
                got += sum(len(r) for r in (await consumer.getmany(timeout_ms=500)).values())
            assert consumer.metrics() == {}
            assert consumer.health().lag == {f"{unique_topic}-0": 0}


def _kafkaio_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("kafkaio")]


async def _consume_count(consumer: Consumer, count: int) -> None:
    seen = 0
    while seen < count:
        batch = await consumer.getmany(timeout_ms=500)
        seen += sum(len(r) for r in batch.values())
    assert seen == count


async def test_logging_is_per_state_change_not_per_record(
    broker: BrokerInfo, unique_topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kafkaio")
    await broker.create_topic(unique_topic, PARTITIONS)
    with anyio.fail_after(40):
        async with Producer(broker.bootstrap, linger_ms=2) as producer:
            consumer = Consumer(
                unique_topic,
                bootstrap_servers=broker.bootstrap,
                group_id=f"g-{unique_topic}",
                auto_offset_reset="earliest",
                **GROUP_OPTIONS,
            )
            async with consumer:
                await _send(producer, unique_topic, 5, PARTITIONS)
                await _consume_count(consumer, 5 * PARTITIONS)
                settled = len(_kafkaio_lines(caplog))
                # 100x the records through the same producer and group member
                await _send(producer, unique_topic, 500, PARTITIONS)
                await _consume_count(consumer, 500 * PARTITIONS)
                assert len(_kafkaio_lines(caplog)) == settled, _kafkaio_lines(caplog)[settled:]
    lines = _kafkaio_lines(caplog)
    text = "\n".join(lines)
    for expected in (
        "connected to",  # broker connected
        "closed connection to",  # broker disconnected
        "producer started",
        "coordinator is node",
        "joined generation",  # group joined, with the generation
        "assigned 2 partitions",  # the generation's assignment
        "assigned [",  # partitions assigned (listener step)
        "revoked [",  # partitions revoked on close
        "leaving",  # group left
        "producer closed",
    ):
        assert expected in text, f"{expected!r} not logged:\n{text}"
    assert not any("v1" in line for line in lines)  # no record content
    assert len(lines) < 40, text


async def test_otel_metrics_and_trace_context_through_a_broker(
    kafka_broker: BrokerInfo, unique_topic: str
) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from kafkaio.metrics.otel import KafkaMetricsExporter
    from kafkaio.metrics.tracing import TracingInterceptor, process_span

    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    await kafka_broker.create_topic(unique_topic, 1)
    tp = TopicPartition(unique_topic, 0)
    with anyio.fail_after(30):
        async with Producer(
            kafka_broker.bootstrap, interceptors=[TracingInterceptor(tracer_provider)]
        ) as producer:
            for i in range(3):
                await producer.send(unique_topic, f"v{i}".encode(), partition=0)
        sent = {s.context.span_id: s for s in spans.get_finished_spans()}
        assert len(sent) == 3
        consumer = Consumer(bootstrap_servers=kafka_broker.bootstrap, auto_offset_reset="earliest")
        KafkaMetricsExporter(meter_provider).register(consumer)
        async with consumer:
            consumer.assign([tp])
            records = []
            while len(records) < 3:
                records += (await consumer.getmany(timeout_ms=500)).get(tp, [])
            for record in records:
                with process_span(record, tracer_provider=tracer_provider) as span:
                    parent = span.parent  # type: ignore[attr-defined]
                    assert parent is not None and parent.span_id in sent
                    assert span.get_span_context().trace_id == sent[parent.span_id].context.trace_id
            data = reader.get_metrics_data()
    assert data is not None
    points = {
        metric.name: list(metric.data.data_points)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
    }
    (total,) = points["kafka.consumer.records-consumed-total"]
    assert total.value == 3 and total.attributes["client.id"] == "kafkaio-consumer"
    lag = points["kafka.consumer.records-lag"]
    assert [(p.attributes["topic"], p.attributes["partition"], p.value) for p in lag] == [
        (unique_topic, "0", 0.0)
    ]
    meter_provider.shutdown()


# -- producer ------------------------------------------------------------------------------

PRODUCE_API = 0
NOT_LEADER_OR_FOLLOWER = 6


async def test_producer_counts_batches_buffer_and_connections(
    kafka_broker: BrokerInfo, unique_topic: str
) -> None:
    await kafka_broker.create_topic(unique_topic, PARTITIONS)
    per_partition = 30
    sent = per_partition * PARTITIONS
    producer = Producer(kafka_broker.bootstrap, linger_ms=2)
    started = time.monotonic()
    with anyio.fail_after(30):
        async with producer:
            await _send(producer, unique_topic, per_partition, PARTITIONS)
            m = producer.metrics()
            lifetime_ms = (time.monotonic() - started) * 1000
            assert m["record-send-total"] == sent
            assert m["topics"][unique_topic]["record-send-total"] == sent
            assert m["record-error-total"] == 0
            assert m["record-retry-total"] == 0
            assert m["batch-size-max"] >= m["batch-size-avg"] > 0
            assert m["compression-rate-avg"] > 0
            assert m["records-per-request-avg"] > 0
            assert m["request-total"] >= 1
            # milliseconds, each within the producer's life so far
            assert 0 < m["request-latency-avg"] <= m["request-latency-max"] <= lifetime_ms
            assert m["buffer-total-bytes"] == producer.config.buffer_memory
            assert m["buffer-available-bytes"] == m["buffer-total-bytes"]
            assert m["waiting-threads"] == 0
            assert m["connection-count"] >= 1
            assert m["connection-creation-total"] >= m["connection-count"]
            # seconds the network task waited per wait: it did wait, for less than its life
            assert 0 < m["io-wait-time-avg"] <= lifetime_ms / 1000
            assert 0 < m["io-wait-ratio"] <= 1.0
            health = producer.health()
            assert health.healthy and health.running and health.kind == "producer"
    after = producer.metrics()
    assert after["connection-count"] == 0
    assert after["connection-close-total"] == after["connection-creation-total"]
    assert not producer.health().running


async def test_producer_counts_retries(
    isolated_mock_cluster: BrokerInfo, unique_topic: str
) -> None:
    cluster = isolated_mock_cluster.cluster
    assert cluster is not None
    cluster.create_topic(unique_topic, 1)
    with anyio.fail_after(30):
        async with Producer(
            isolated_mock_cluster.bootstrap, linger_ms=0, retry_backoff_ms=10
        ) as producer:
            await producer.send(unique_topic, b"warm-up", partition=0)
            assert producer.metrics()["record-retry-total"] == 0
            cluster.push_request_errors(PRODUCE_API, [NOT_LEADER_OR_FOLLOWER] * 2)
            await producer.send(unique_topic, b"retried", partition=0)
            m = producer.metrics()
    # the second record was refused twice, then written
    assert m["record-retry-total"] == 2
    assert m["record-send-total"] == 2 and m["record-error-total"] == 0


async def test_producer_metrics_disabled_reads_empty(
    kafka_broker: BrokerInfo, unique_topic: str
) -> None:
    await kafka_broker.create_topic(unique_topic, 1)
    with anyio.fail_after(20):
        async with Producer(kafka_broker.bootstrap, metrics_enabled=False) as producer:
            await producer.send(unique_topic, b"v", partition=0)
            assert producer.metrics() == {}
            assert producer.health().healthy
