"""Producer.enqueue's fast path for plain records gives the same batches as the general path.

No broker: the producer runs with a stand-in network task, and metadata comes from a response.
"""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from kafkaio.errors import InvalidTopicError, KafkaConfigError, KafkaError, KafkaTimeoutError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.producer.batch import ProducerBatch
from kafkaio.producer.client import Producer
from kafkaio.producer.errors import ProducerClosedError, RecordTooLargeError
from kafkaio.producer.future import DeliveryFuture
from kafkaio.producer.partitioner import DefaultPartitioner
from kafkaio.records import BatchBuilder, iter_batches
from kafkaio.runtime.shell import Lifecycle

from ._helpers import metadata_response

TOPIC = "t"


class FakeDriver:
    """Stands in for the NetworkDriver: counts wakeups, nothing is sent."""

    def __init__(self) -> None:
        self.running = True
        self.fatal_error: BaseException | None = None
        self.wakeups = 0

    def wakeup(self) -> None:
        self.wakeups += 1

    def check(self) -> None:
        if self.fatal_error is not None or not self.running:
            raise KafkaError("the network task stopped")

    def stop(self) -> None:
        self.running = False

    async def close(self, timeout_s: float | None) -> None:
        return None  # no manager has last requests here

    async def run(self, **kwargs: Any) -> None:
        self.fatal_error = RuntimeError("a bug in a request manager")
        self.running = False


def running_producer(
    partitions: int = 1, seed: int = 7, cls: type[Producer] = Producer, **options: Any
) -> Producer:
    """A producer as after start(), with metadata for TOPIC and a seeded partitioner."""
    options.setdefault("batch_size", 1024)
    options.setdefault("linger_ms", 5)
    producer = cls("localhost:9092", metrics_enabled=False, **options)
    update_metadata(producer, partitions)
    producer._appender.partitioner = DefaultPartitioner(
        producer.config.batch_size, rng=random.Random(seed).random
    )
    producer._driver = FakeDriver()  # type: ignore[assignment]
    producer._shell.driver = producer._driver
    producer._shell.state = Lifecycle.RUNNING
    return producer


def update_metadata(producer: Producer, partitions: int) -> None:
    producer._metadata.add_topics([TOPIC])
    producer._metadata.on_response(0.0, metadata_response({TOPIC: [1] * partitions}))


def queued(producer: Producer) -> dict[TopicPartition, list[ProducerBatch]]:
    out: dict[TopicPartition, list[ProducerBatch]] = {}
    for batch in producer._accumulator.queued_batches():
        out.setdefault(batch.tp, []).append(batch)
    return out


def contents(producer: Producer) -> dict[TopicPartition, list[list[tuple[int, bytes | None]]]]:
    """Each queued batch as encoded: (timestamp, value) per record."""
    out: dict[TopicPartition, list[list[tuple[int, bytes | None]]]] = {}
    for tp, batches in queued(producer).items():
        for batch in batches:
            (decoded,) = iter_batches(batch.payload())
            out.setdefault(tp, []).append([(r.timestamp, r.value) for r in decoded])
    return out


async def test_keyless_records_fill_batches_with_correct_futures() -> None:
    producer = running_producer()
    before = time.time_ns() // 1_000_000
    # 1 KiB batches, which grow to 4 KiB while not drained: 500 records fill two
    futures = [await producer.enqueue(TOPIC, b"v%03d" % i) for i in range(500)]
    after = time.time_ns() // 1_000_000
    assert producer._appender.open  # the fast path took the later records
    batches = queued(producer)[TopicPartition(TOPIC, 0)]
    assert len(batches) > 1 and all(b.closed and b.full for b in batches[:-1])
    assert sum(b.record_count for b in batches) == 500
    assert producer._memory.used == sum(b.reserved_bytes for b in batches)
    assert producer._memory.used == 500 * BatchBuilder.estimate_size_in_bytes(None, b"v000")
    offset = 1000
    for batch in batches:
        assert batch.complete(offset, -1)
        offset += batch.record_count
    results = [f.result() for f in futures]
    assert [r.offset for r in results] == list(range(1000, 1500))
    assert all(before <= r.timestamp <= after for r in results)
    assert {(r.serialized_key_size, r.serialized_value_size) for r in results} == {(-1, 4)}
    # a full batch woke the network task, and the next enqueue yields to it first
    assert producer._driver.wakeups >= len(batches) - 1  # type: ignore[union-attr]


async def test_given_timestamps_are_kept() -> None:
    producer = running_producer()
    futures = [await producer.enqueue(TOPIC, b"v", timestamp_ms=5000 + i) for i in range(10)]
    (batch,) = queued(producer)[TopicPartition(TOPIC, 0)]
    batch.complete(0, -1)
    assert [f.result().timestamp for f in futures] == list(range(5000, 5010))
    assert [f.result().offset for f in futures] == list(range(10))


@pytest.mark.parametrize("key", [None, b"k"])  # the keyless and the keyed fast path
@pytest.mark.parametrize("timestamp_ms", [-1, 2**63, "5000", True])
async def test_a_timestamp_the_broker_cannot_take_is_refused_at_the_call(
    key: bytes | None, timestamp_ms: Any
) -> None:
    producer = running_producer()
    good = await producer.enqueue(TOPIC, b"before", key=key)
    with pytest.raises(KafkaConfigError, match="timestamp_ms must be None or an int"):
        await producer.enqueue(TOPIC, b"v", key=key, timestamp_ms=timestamp_ms)
    (batch,) = queued(producer)[TopicPartition(TOPIC, 0)]
    assert batch.record_count == 1  # nothing of the refused record went in
    batch.complete(0, -1)
    assert good.result().offset == 0
    big = await producer.enqueue(TOPIC, b"v", key=key, timestamp_ms=2**63 - 1)
    assert not big.done()  # the largest int64 is a timestamp


@pytest.mark.parametrize("topic", [b"t", 7, None])
async def test_a_topic_that_is_not_a_str_is_refused_at_the_call(topic: Any) -> None:
    producer = running_producer()
    with pytest.raises(KafkaConfigError, match="a topic name must be a str"):
        await producer.enqueue(topic, b"v")
    assert queued(producer) == {}


@pytest.mark.parametrize("topic", ["", ".", "..", "a/b", "t\x00", "x" * 250, "ünï"])
async def test_an_illegal_topic_name_is_refused_at_the_call(topic: str) -> None:
    # as Java's Topic.validate: the broker answered INVALID_TOPIC_EXCEPTION after a
    # metadata round trip (and a consumer of such a name waited forever)
    producer = running_producer()
    with pytest.raises(InvalidTopicError, match="is illegal"):
        await producer.enqueue(topic, b"v")
    assert queued(producer) == {}


@pytest.mark.parametrize("partition", ["0", 1.0, True, -1])
async def test_a_partition_that_is_not_an_int_is_refused_at_the_call(partition: Any) -> None:
    # partition="0" raised TypeError comparing int and str; 1.0 failed in the network task
    producer = running_producer(4)
    with pytest.raises(KafkaConfigError, match="partition must be an int >= 0"):
        await producer.enqueue(TOPIC, b"v", partition=partition)
    assert queued(producer) == {}


@pytest.mark.parametrize("chosen", [-1, 4, "1", None])
async def test_a_partitioner_choosing_no_partition_of_the_topic_is_refused_at_the_call(
    chosen: Any,
) -> None:
    def partitioner(key: bytes | None, partitions: list[int], available: list[int]) -> Any:
        return chosen

    producer = running_producer(4, partitioner=partitioner)
    with pytest.raises(KafkaConfigError, match=r"chose partition .* \(0\.\.3\)"):
        await producer.enqueue(TOPIC, b"v", key=b"k")
    assert queued(producer) == {}


@pytest.mark.parametrize("partitions", [1, 4])
async def test_fast_path_matches_the_general_path(partitions: int) -> None:
    """Same records, same random source: the same partitions, batches and bytes, whether
    records take the fast path or (with a value serializer) always the general one."""

    def identity(value: bytes) -> bytes:
        return value

    fast = running_producer(partitions)
    slow = running_producer(partitions, value_serializer=identity)
    assert not slow._fast_ok
    general_path_records = []
    general_path = fast._enqueue

    async def counting(topic: str, value: Any, *args: Any) -> DeliveryFuture:
        general_path_records.append(value)
        return await general_path(topic, value, *args)

    fast._enqueue = counting  # type: ignore[method-assign,assignment]
    for i in range(600):
        if i == 300:  # new metadata: the topic shrinks to 2 partitions
            for producer in (fast, slow):
                update_metadata(producer, min(partitions, 2))
        if i % 97 == 0:  # a batch drained by the sender: the next record starts a new one
            for producer in (fast, slow):
                for batches in queued(producer).values():
                    batches[-1].closed = True
        value = b"x" * (i % 50)
        await fast.enqueue(TOPIC, value, timestamp_ms=1000 + i)
        await slow.enqueue(TOPIC, value, timestamp_ms=1000 + i)
    assert contents(fast) == contents(slow)
    assert (len(contents(fast)) > 1) == (partitions > 1)  # the sticky partition moved
    assert fast._memory.used == slow._memory.used
    fast_sticky = fast._appender.partitioner.sticky_state(TOPIC)
    slow_sticky = slow._appender.partitioner.sticky_state(TOPIC)
    assert fast_sticky is not None and slow_sticky is not None
    assert (fast_sticky.partition, fast_sticky.produced_bytes) == (
        slow_sticky.partition,
        slow_sticky.produced_bytes,
    )
    assert not slow._appender.open
    assert len(general_path_records) < 100  # most records took the fast path


async def test_a_completed_batch_takes_no_more_records() -> None:
    producer = running_producer()
    await producer.enqueue(TOPIC, b"a")
    first = await producer.enqueue(TOPIC, b"b")
    (batch,) = queued(producer)[TopicPartition(TOPIC, 0)]
    # e.g. expired while still open: it leaves the queue and fails
    producer._accumulator.expire(batch.deadline_ms)
    batch.fail(KafkaTimeoutError("expired"))
    later = await producer.enqueue(TOPIC, b"c")
    assert later.done() is False and first.done()
    (new,) = queued(producer)[TopicPartition(TOPIC, 0)]
    assert new is not batch and new.record_count == 1


async def test_errors_still_raise_with_an_open_batch() -> None:
    producer = running_producer(buffer_memory=4096, max_block_ms=10, batch_size=1024)
    await producer.enqueue(TOPIC, b"a")
    assert producer._appender.open
    with pytest.raises(RecordTooLargeError):
        await producer.enqueue(TOPIC, b"x" * 5000)
    # buffer_memory full: the fast path stops, and the general path waits, then times out
    with pytest.raises(KafkaTimeoutError):
        for _ in range(100):
            await producer.enqueue(TOPIC, b"y" * 200)
    assert producer._memory.used <= 4096
    producer._idempotence._fatal(KafkaError("fenced"))
    producer._memory.used = 0
    with pytest.raises(ProducerClosedError, match="fenced"):
        await producer.enqueue(TOPIC, b"z")


async def test_no_fast_path_once_closed() -> None:
    producer = running_producer()
    queued_future = await producer.enqueue(TOPIC, b"a")
    await producer.close(timeout_ms=0)
    assert isinstance(queued_future.exception(), ProducerClosedError)
    with pytest.raises(ProducerClosedError):
        await producer.enqueue(TOPIC, b"b")


async def test_no_fast_path_once_the_network_task_failed() -> None:
    producer = running_producer()
    pending = await producer.enqueue(TOPIC, b"a")
    await producer._shell._run_driver()  # the stand-in fails at once
    assert isinstance(pending.exception(), ProducerClosedError)
    with pytest.raises(KafkaError):
        await producer.enqueue(TOPIC, b"b")


async def test_keyed_records_take_their_partition() -> None:
    producer = running_producer(partitions=4)
    keys = [b"k%d" % i for i in range(40)]
    for key in keys:
        await producer.enqueue(TOPIC, b"v", key)
    reference = running_producer(partitions=4)
    reference._fast_ok = False
    for key in keys:
        await reference.enqueue(TOPIC, b"v", key)
    assert {tp: [b.record_count for b in bs] for tp, bs in queued(producer).items()} == {
        tp: [b.record_count for b in bs] for tp, bs in queued(reference).items()
    }


@pytest.mark.parametrize("key", [None, b"k"])
async def test_a_full_batch_wakes_the_network_task_only_if_it_can_be_sent(
    key: bytes | None,
) -> None:
    """While the partition has as many batches in flight as max_in_flight allows, a newly
    full or newly opened batch waits for a response (whose handling polls the sender): no
    wake-up, no yield to the loop. With fewer in flight, a full batch may be sent ahead."""
    producer = running_producer()
    driver = producer._driver
    assert isinstance(driver, FakeDriver)
    tp = TopicPartition(TOPIC, 0)
    value = b"v" * 300
    await producer.enqueue(TOPIC, value, key)  # opens a batch (a wake-up for its linger)
    limit = producer._sender._config.max_in_flight
    assert limit > 1
    in_flight = producer._sender._tp_in_flight
    in_flight[tp] = [queued(producer)[tp][0]] * limit  # as many as it may have
    if producer._sender.idempotence.enabled:  # a batch of tp was acknowledged before
        producer._sender.idempotence._last_acked[tp] = 0  # (a first batch goes alone)
    before = driver.wakeups
    for _ in range(40):  # fills several batches (1 KiB: full; they grow to 4 KiB)
        await producer.enqueue(TOPIC, value, key)
    full = [b for b in queued(producer)[tp] if b.full]
    assert full, "the records should have filled a batch"
    assert len(queued(producer)[tp]) > 2  # new batches were opened, none woke the driver
    assert driver.wakeups == before
    assert not producer._yield_next
    in_flight[tp].pop()  # a response came: the next full batch may be sent ahead
    for _ in range(20):  # a batch is full at 4 of these records and closes at about 13
        await producer.enqueue(TOPIC, value, key)
        if producer._yield_next:
            break
    assert producer._yield_next


async def test_a_record_waiting_for_memory_wakes_the_network_task_only_if_nothing_is_in_flight() -> (
    None
):
    """A record that must wait for buffer memory makes every batch ready, so the network
    task is woken; not while a request is in flight: its response's handling polls the
    sender anyway (as Java's producer does)."""
    producer = running_producer(max_block_ms=10)
    driver = producer._driver
    assert isinstance(driver, FakeDriver)
    memory = producer._memory
    memory.used = memory.limit  # the buffer is full
    producer._sender._requests_in_flight = 1
    before = driver.wakeups
    with pytest.raises(KafkaTimeoutError, match="buffer_memory"):
        await producer.enqueue(TOPIC, b"v" * 100)
    assert driver.wakeups == before
    producer._sender._requests_in_flight = 0
    with pytest.raises(KafkaTimeoutError, match="buffer_memory"):
        await producer.enqueue(TOPIC, b"v" * 100)
    assert driver.wakeups == before + 1
    assert memory.used == memory.limit and memory.waiters == 0


@pytest.mark.parametrize("key", [None, b"k"])  # the keyless and the keyed fast path
async def test_a_full_batch_takes_records_until_it_is_drained(key: bytes | None) -> None:
    """A batch full at batch_size (1 KiB) is ready, and the records appended before the
    network task drains it go into it (up to 4x batch_size), not into batches queued
    behind it; once drained, the next record opens a new batch."""
    producer = running_producer()
    tp = TopicPartition(TOPIC, 0)
    for _ in range(8):  # 8 x 300 B: past 1 KiB, within 4 KiB
        await producer.enqueue(TOPIC, b"v" * 300, key)
    (batch,) = queued(producer)[tp]
    assert batch.full and not batch.closed and batch.record_count == 8
    ready, _, _ = producer._accumulator.ready(0.0, lambda tp: 1)
    assert ready == {1: [tp]}
    assert producer._accumulator.drain(1, [tp], 1 << 20, 0.0, lambda b: True) == [batch]
    await producer.enqueue(TOPIC, b"after", key)
    (after,) = queued(producer)[tp]
    assert after is not batch and after.record_count == 1 and batch.record_count == 8


async def test_flush_takes_milliseconds_by_keyword_only() -> None:
    """confluent-kafka's flush(10) means seconds, every kafkaio timeout milliseconds: a
    positional limit is refused rather than read in the other unit."""
    producer = running_producer()
    await producer.flush(timeout_ms=100)  # nothing buffered: returns at once
    with pytest.raises(TypeError):
        await producer.flush(10)  # type: ignore[misc]
    with pytest.raises(KafkaConfigError, match=r"Producer.flush\(\) timeout_ms must be"):
        await producer.flush(timeout_ms=-1)
    with pytest.warns(DeprecationWarning, match="in seconds is deprecated"):
        await producer.flush(timeout=0.1)
