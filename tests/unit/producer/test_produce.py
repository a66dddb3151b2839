"""Producer.produce: enqueue without awaiting. The same records and batches as enqueue, and
WouldBlockError (nothing buffered) where enqueue would wait.

No broker: the producer runs with a stand-in network task (see test_enqueue_fast_path).
"""

from __future__ import annotations

from typing import Any

import pytest

from kafkaio.errors import KafkaConfigError, KafkaError, SerializationError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.producer.client import Producer, ProducerRecord
from kafkaio.producer.errors import ProducerClosedError, RecordTooLargeError, WouldBlockError
from kafkaio.serde import Serializer

from .test_enqueue_fast_path import TOPIC, contents, queued, running_producer, update_metadata


@pytest.mark.parametrize("partitions", [1, 3])
@pytest.mark.parametrize("keyed", [False, True])
async def test_produce_makes_the_batches_enqueue_makes(partitions: int, keyed: bool) -> None:
    produced = running_producer(partitions)
    enqueued = running_producer(partitions)
    for i in range(500):
        value = b"x" * (i % 60)
        key = b"k%d" % (i % 13) if keyed else None
        if i == 250:  # new metadata: routes and open batches are made anew
            for producer in (produced, enqueued):
                update_metadata(producer, partitions)
        if i % 97 == 0:  # a batch drained by the sender: the next record starts a new one
            for producer in (produced, enqueued):
                for batches in queued(producer).values():
                    batches[-1].closed = True
        produced.produce(TOPIC, value, key, timestamp_ms=1000 + i)
        await enqueued.enqueue(TOPIC, value, key, timestamp_ms=1000 + i)
    assert contents(produced) == contents(enqueued)
    assert produced._memory.used == enqueued._memory.used > 0


async def test_produce_takes_what_the_general_path_takes() -> None:
    """Headers, a given partition, a serializer that takes a context, an interceptor: no
    fast path, the same outcome as enqueue."""

    class Upper(Serializer):
        def serialize(self, data: Any, ctx: Any) -> bytes:
            return str(data).upper().encode() + ctx.topic.encode()

    class Tag:
        def on_send(self, record: ProducerRecord) -> ProducerRecord:
            return ProducerRecord(
                record.topic, record.value, record.key, 1, [("tag", b"1")], 7
            )

    producer = running_producer(2, value_serializer=Upper(), interceptors=[Tag()])
    future = producer.produce(TOPIC, "abc", headers={"h": b"v"})
    assert contents(producer) == {TopicPartition(TOPIC, 1): [[(7, b"ABC" + TOPIC.encode())]]}
    (batch,) = queued(producer)[TopicPartition(TOPIC, 1)]
    batch.complete(40, -1)
    metadata = future.result()
    assert (metadata.partition, metadata.offset, metadata.timestamp) == (1, 40, 7)


async def test_produce_without_metadata_would_block_and_asks_for_it() -> None:
    producer = running_producer()
    with pytest.raises(WouldBlockError, match="partitions of topic 'other' are not known"):
        producer.produce("other", b"v")
    assert "other" in producer._metadata.topics  # the producer fetches them now
    assert producer._memory.used == 0 and queued(producer) == {}


async def test_produce_with_a_full_buffer_would_block_and_buffers_nothing() -> None:
    producer = running_producer(buffer_memory=2048, batch_size=1024)
    futures = []
    with pytest.raises(WouldBlockError, match="buffer_memory is full") as raised:
        for _ in range(100):
            futures.append(producer.produce(TOPIC, b"y" * 200))
    assert isinstance(raised.value, BufferError)  # as confluent-kafka's produce raises
    assert 0 < len(futures) < 100
    assert sum(b.record_count for bs in queued(producer).values() for b in bs) == len(futures)
    assert producer._memory.used <= 2048
    # the general path says the same for a record that is not plain
    with pytest.raises(WouldBlockError, match="buffer_memory is full"):
        producer.produce(TOPIC, b"y" * 200, headers=[("h", b"1")])


async def test_produce_refuses_what_enqueue_refuses() -> None:
    producer = running_producer(buffer_memory=4096)
    with pytest.raises(RecordTooLargeError):
        producer.produce(TOPIC, b"x" * 5000)
    with pytest.raises(KafkaConfigError, match="timestamp_ms must be None or an int"):
        producer.produce(TOPIC, b"v", timestamp_ms=-1)
    with pytest.raises(KafkaConfigError, match="is str, not bytes"):
        producer.produce(TOPIC, "text")
    with pytest.raises(KafkaConfigError, match="a topic name must be a str"):
        producer.produce(b"t", b"v")  # type: ignore[arg-type]
    assert queued(producer) == {}


async def test_produce_cannot_await_an_async_serializer() -> None:
    async def serialize(value: str) -> bytes:
        return value.encode()

    producer = running_producer(value_serializer=serialize)
    with pytest.raises(KafkaConfigError, match="value_serializer is async"):
        producer.produce(TOPIC, "v")
    assert queued(producer) == {}
    await producer.enqueue(TOPIC, "v")  # enqueue awaits it
    assert queued(producer)[TopicPartition(TOPIC, 0)][0].record_count == 1


async def test_a_serializer_returning_an_awaitable_fails_in_produce() -> None:
    class Sneaky(Serializer):
        def serialize(self, data: Any, ctx: Any) -> Any:
            async def later() -> bytes:
                return b"v"

            return later()

    producer = running_producer(value_serializer=Sneaky())
    with pytest.raises(SerializationError, match="returned an awaitable"):
        producer.produce(TOPIC, "v")


async def test_produce_on_a_closed_or_failed_producer_raises() -> None:
    producer = running_producer()
    pending = producer.produce(TOPIC, b"a")
    await producer.close(timeout_ms=0)
    assert isinstance(pending.exception(), ProducerClosedError)
    with pytest.raises(ProducerClosedError):
        producer.produce(TOPIC, b"b")
    failed = running_producer()
    failed.produce(TOPIC, b"a")
    failed._idempotence._fatal(KafkaError("fenced"))
    with pytest.raises(ProducerClosedError, match="fenced"):
        failed.produce(TOPIC, b"b")


async def test_a_subclass_overriding_produce_is_called() -> None:
    class Counting(Producer):
        calls = 0

        def produce(self, *args: Any, **kwargs: Any) -> Any:
            Counting.calls += 1
            return super().produce(*args, **kwargs)

    producer = running_producer(cls=Counting)
    producer.produce(TOPIC, b"a")
    producer.produce(TOPIC, b"b")
    assert Counting.calls == 2
    assert queued(producer)[TopicPartition(TOPIC, 0)][0].record_count == 2
