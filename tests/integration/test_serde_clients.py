"""Serializers of every shape through a real broker (Apache Kafka): plain, async and context-taking,
awaited in the application's task; errors name topic, partition, offset and field."""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import pytest

from kafkaio import Admin, Consumer, Producer, TopicPartition
from kafkaio.errors import KafkaConfigError, RecordDeserializationError, SerializationError
from kafkaio.serde import (
    DataclassDeserializer,
    DataclassSerializer,
    Deserializer,
    SerializationContext,
    Serializer,
)
from kafkaio.testing import BrokerInfo

pytestmark = pytest.mark.integration

GUARD = 60


@dataclasses.dataclass
class Reading:
    sensor: str
    celsius: float


class TopicTagged(Serializer[str]):
    """A context-taking async serializer, as Schema Registry ones are."""

    def __init__(self) -> None:
        self.tasks: set[Any] = set()

    async def serialize(self, data: str, ctx: SerializationContext) -> bytes:
        await anyio.sleep(0)
        self.tasks.add(anyio.get_current_task().id)
        return f"{ctx.topic}/{ctx.field}/{data}".encode()


class Checked(Deserializer[str]):
    """An async deserializer that refuses values starting with "bad"."""

    def __init__(self) -> None:
        self.tasks: set[Any] = set()

    async def deserialize(self, data: bytes | None, ctx: SerializationContext) -> str:
        await anyio.sleep(0)
        self.tasks.add(anyio.get_current_task().id)
        assert data is not None
        if data.startswith(b"bad"):
            raise SerializationError("not a reading", path="celsius")
        return f"{ctx.offset}:{data.decode()}"


async def _read(consumer: Consumer, n: int) -> list[Any]:
    out: list[Any] = []
    with anyio.fail_after(GUARD):
        while len(out) < n:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                out.extend(batch)
    return out


async def test_async_and_context_serdes_round_trip(broker: BrokerInfo, unique_topic: str) -> None:
    tagged = TopicTagged()

    async def key_ser(key: str) -> bytes:
        await anyio.sleep(0)
        return key.encode()

    with anyio.fail_after(GUARD):
        async with Producer(
            broker.bootstrap, key_serializer=key_ser, value_serializer=tagged
        ) as producer:
            me = anyio.get_current_task().id
            for i in range(5):
                await producer.send(unique_topic, f"v{i}", key=f"k{i}", partition=0)
    assert tagged.tasks == {me}  # awaited in the caller's task, not the network task

    checked = Checked()

    async def key_de(data: bytes | None) -> str | None:
        return None if data is None else data.decode().upper()

    async with Consumer(
        bootstrap_servers=broker.bootstrap,
        key_deserializer=key_de,
        value_deserializer=checked,
        auto_offset_reset="earliest",
    ) as consumer:
        consumer.assign([TopicPartition(unique_topic, 0)])
        records = await _read(consumer, 5)
        assert checked.tasks == {anyio.get_current_task().id}
    assert [(r.key, r.value) for r in records] == [
        (f"K{i}", f"{i}:{unique_topic}/value/v{i}") for i in range(5)
    ]


async def test_a_failing_async_deserializer_stops_at_the_record_and_names_it(
    broker: BrokerInfo, unique_topic: str
) -> None:
    async with Producer(broker.bootstrap) as producer:
        for value in (b"a", b"b", b"bad", b"c"):
            await producer.send(unique_topic, value, partition=0)
    tp = TopicPartition(unique_topic, 0)
    async with Consumer(
        bootstrap_servers=broker.bootstrap,
        value_deserializer=Checked(),
        auto_offset_reset="earliest",
    ) as consumer:
        consumer.assign([tp])
        first = await _read(consumer, 2)
        assert [r.value for r in first] == ["0:a", "1:b"]
        with anyio.fail_after(GUARD):
            with pytest.raises(RecordDeserializationError) as info:
                while True:
                    assert not await consumer.getmany(timeout_ms=500)
        err = info.value
        assert (err.topic, err.partition, err.offset, err.field, err.path) == (
            unique_topic,
            0,
            2,
            "value",
            "celsius",
        )
        assert "not a reading" in str(err) and "offset 2" in str(err)
        assert await consumer.position(tp) == 2  # nothing lost: the position stays at it
        consumer.seek(tp, 3)
        assert [r.value for r in await _read(consumer, 1)] == ["3:c"]


async def test_dataclass_serdes_and_plain_serializer_errors(
    broker: BrokerInfo, unique_topic: str
) -> None:
    async with Producer(
        broker.bootstrap, value_serializer=DataclassSerializer(Reading)
    ) as producer:
        await producer.send(unique_topic, Reading("s1", 21.5), partition=0)
        with pytest.raises(SerializationError) as info:
            await producer.send(unique_topic, {"sensor": "s1"}, partition=1)
        assert (info.value.topic, info.value.partition, info.value.field) == (
            unique_topic,
            1,
            "value",
        )
        assert "expected a Reading, got dict" in str(info.value)
    async with Producer(broker.bootstrap, value_serializer=str) as producer:
        with pytest.raises(SerializationError, match="value_serializer returned str"):
            await producer.send(unique_topic, 5)
    async with Producer(broker.bootstrap) as producer:
        with pytest.raises(KafkaConfigError, match="pass bytes or set value_serializer"):
            await producer.send(unique_topic, "text")
    async with Consumer(
        bootstrap_servers=broker.bootstrap,
        value_deserializer=DataclassDeserializer(Reading),
        auto_offset_reset="earliest",
    ) as consumer:
        consumer.assign([TopicPartition(unique_topic, 0)])
        assert [r.value for r in await _read(consumer, 1)] == [Reading("s1", 21.5)]


async def test_records_deserialized_past_an_unsubscribe_are_not_handed_out(
    broker: BrokerInfo, unique_topic: str
) -> None:
    """A getone() whose async deserializer is still running while the application
    unsubscribes (in another task) does not hand out the records of the subscription
    dropped: it goes on to the next subscription's. Leaving commits none of them as
    consumed: they are not skipped when the group consumes that topic again."""
    second = unique_topic + "-next"
    await broker.create_topic(unique_topic, 1)
    await broker.create_topic(second, 1)
    async with Producer(broker.bootstrap) as producer:
        for topic in (unique_topic, second):
            for i in range(3):
                await producer.enqueue(topic, value=b"%d" % i, partition=0)
        await producer.flush()
    inside, release = anyio.Event(), anyio.Event()

    async def value(data: bytes | None) -> bytes | None:
        inside.set()
        await release.wait()
        return data

    got = []
    consumer = Consumer(
        unique_topic,
        bootstrap_servers=broker.bootstrap,
        group_id=unique_topic + "-g",
        auto_offset_reset="earliest",
        value_deserializer=value,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    async with Admin(broker.bootstrap) as admin, consumer:

        async def one() -> None:
            got.append(await consumer.getone())

        with anyio.fail_after(GUARD):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(one)
                await inside.wait()  # getone() collected the first topic's records
                await consumer.unsubscribe()
                consumer.subscribe([second])
                release.set()
        first = TopicPartition(unique_topic, 0)
        committed = (await admin.list_group_offsets(unique_topic + "-g", [first]))[first]
    assert [(r.topic, r.offset) for r in got] == [(second, 0)]
    assert committed.offset in (None, 0)  # none of the first topic's records handed out
