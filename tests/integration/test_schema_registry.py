"""Schema Registry against a real registry (Apicurio Registry's Confluent API on loopback):
the client and its caches, subject name strategies, and the Avro, JSON Schema and Protobuf
serdes, byte for byte against confluent-kafka's serializers, and through a broker (Apache Kafka)."""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any

import anyio
import httpx
import pytest
import pytest_asyncio
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from kafkaio import Consumer, Producer, TopicPartition
from kafkaio.errors import RecordDeserializationError, SerializationError
from kafkaio.schema_registry import (
    AvroDeserializer,
    AvroSerializer,
    JsonSchemaDeserializer,
    JsonSchemaSerializer,
    ProtobufDeserializer,
    ProtobufSerializer,
    Schema,
    SchemaRegistryClient,
    SchemaRegistryError,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
)
from kafkaio.serde import SerializationContext
from kafkaio.testing import BrokerInfo

pytestmark = pytest.mark.integration

GUARD = 60


def avro_schema(name: str) -> dict[str, Any]:
    return {
        "type": "record",
        "name": name,
        "namespace": "io.kafkaio.test",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "name", "type": "string"},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "score", "type": ["null", "double"], "default": None},
        ],
    }


JSON_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Reading",
    "type": "object",
    "properties": {
        "sensor": {"type": "string"},
        "celsius": {"type": "number"},
        "labels": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["sensor", "celsius"],
}


def _proto_classes(package: str) -> tuple[type[Any], type[Any]]:
    """Two message types in one file (the second is nested: message indexes [1, 0])."""
    file = descriptor_pb2.FileDescriptorProto(
        name=f"{package}/readings.proto", package=package, syntax="proto3"
    )
    first = file.message_type.add(name="Ping")
    first.field.add(name="seq", number=1, type=9, label=1)  # string
    outer = file.message_type.add(name="Outer")
    inner = outer.nested_type.add(name="Reading")
    inner.field.add(name="sensor", number=1, type=9, label=1)
    inner.field.add(name="celsius", number=2, type=1, label=1)  # double
    inner.field.add(name="labels", number=3, type=9, label=3)  # repeated string
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    ping = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.Ping"))
    reading = message_factory.GetMessageClass(
        pool.FindMessageTypeByName(f"{package}.Outer.Reading")
    )
    return ping, reading


@pytest_asyncio.fixture(loop_scope="function")
async def registry(schema_registry: str) -> Any:
    async with SchemaRegistryClient(schema_registry) as client:
        yield client


def _ctx(topic: str, field: str = "value") -> SerializationContext:
    return SerializationContext(topic, field)


def _confluent(schema_registry: str) -> Any:
    from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient

    return ConfluentClient({"url": schema_registry})


def _confluent_ctx(topic: str) -> Any:
    from confluent_kafka.serialization import MessageField
    from confluent_kafka.serialization import SerializationContext as ConfluentContext

    return ConfluentContext(topic, MessageField.VALUE)


async def test_client_registers_looks_up_and_caches(
    registry: SchemaRegistryClient, schema_registry: str
) -> None:
    subject = f"client-{uuid.uuid4().hex[:8]}-value"
    schema = Schema(json.dumps(avro_schema("Client")))
    schema_id = await registry.register_schema(subject, schema)
    assert await registry.register_schema(subject, schema) == schema_id
    found = await registry.lookup_schema(subject, schema)
    assert (found.schema_id, found.version, found.subject) == (schema_id, 1, subject)
    assert json.loads((await registry.get_schema(schema_id)).schema_str) == avro_schema("Client")
    latest = await registry.get_latest_version(subject)
    assert (latest.schema_id, latest.version) == (schema_id, 1)
    assert subject in await registry.get_subjects()
    assert await registry.get_versions(subject) == [1]
    evolved = avro_schema("Client")
    evolved["fields"].append({"name": "extra", "type": "int", "default": 0})
    assert await registry.test_compatibility(subject, Schema(json.dumps(evolved)))
    second = await registry.register_schema(subject, Schema(json.dumps(evolved)))
    assert second != schema_id and await registry.get_versions(subject) == [1, 2]
    with pytest.raises(SchemaRegistryError) as info:
        await registry.get_latest_version(f"missing-{uuid.uuid4().hex}")
    assert info.value.http_status == 404

    # a fresh client: one request per schema id, however many ask at once
    requests: list[str] = []

    async def count(request: httpx.Request) -> None:
        requests.append(request.url.path)

    async with SchemaRegistryClient(schema_registry) as fresh:
        fresh._options["event_hooks"] = {"request": [count]}
        async with anyio.create_task_group() as tg:
            for _ in range(10):
                tg.start_soon(fresh.get_schema, schema_id)
        await fresh.get_schema(schema_id)
    assert requests == [f"/apis/ccompat/v7/schemas/ids/{schema_id}"]


async def test_client_fails_over_to_the_next_url(schema_registry: str) -> None:
    dead = "http://127.0.0.1:9"  # discard port: nothing listens
    async with SchemaRegistryClient([dead, schema_registry], timeout=2) as client:
        assert isinstance(await client.get_subjects(), list)
    async with SchemaRegistryClient(dead, timeout=2) as client:
        with pytest.raises(SchemaRegistryError, match="no Schema Registry answered"):
            await client.get_subjects()


async def test_avro_bytes_match_confluent_kafka_both_ways(
    registry: SchemaRegistryClient, schema_registry: str
) -> None:
    from confluent_kafka.schema_registry.avro import AvroDeserializer as CAvroDeserializer
    from confluent_kafka.schema_registry.avro import AvroSerializer as CAvroSerializer

    topic = f"avro-{uuid.uuid4().hex[:8]}"
    schema = json.dumps(avro_schema("User"))
    value = {"id": 12345678901, "name": "Zoë", "tags": ["a", "b"], "score": 2.5}
    ours = await AvroSerializer(registry, schema).serialize(value, _ctx(topic))
    confluent = _confluent(schema_registry)
    theirs = await anyio.to_thread.run_sync(
        lambda: CAvroSerializer(confluent, schema)(value, _confluent_ctx(topic))
    )
    assert ours == theirs
    assert ours is not None and ours[0] == 0
    schema_id = int.from_bytes(ours[1:5], "big")
    assert schema_id == (await registry.lookup_schema(f"{topic}-value", Schema(schema))).schema_id
    assert await AvroDeserializer(registry).deserialize(theirs, _ctx(topic)) == value
    read = await anyio.to_thread.run_sync(
        lambda: CAvroDeserializer(confluent)(ours, _confluent_ctx(topic))
    )
    assert read == value


async def test_avro_errors_name_the_field_and_reader_schemas_resolve(
    registry: SchemaRegistryClient,
) -> None:
    topic = f"avro-{uuid.uuid4().hex[:8]}"
    serializer = AvroSerializer(registry, avro_schema("User"))
    with pytest.raises(SerializationError) as info:
        await serializer.serialize({"id": "x", "name": "n", "tags": []}, _ctx(topic))
    assert info.value.path is not None and "id" in info.value.path

    @dataclasses.dataclass
    class User:
        id: int
        name: str
        tags: list[str]
        score: float | None = None

    data = await serializer.serialize(User(1, "a", ["t"]), _ctx(topic))
    reader = avro_schema("User")
    reader["fields"] = [f for f in reader["fields"] if f["name"] != "tags"]
    reader["fields"].append({"name": "country", "type": "string", "default": "NL"})
    decoded = await AvroDeserializer(
        registry, reader, from_dict=lambda d, ctx: User(d["id"], d["name"], [d["country"]])
    ).deserialize(data, _ctx(topic))
    assert decoded == User(1, "a", ["NL"])
    with pytest.raises(SerializationError, match="magic byte"):
        await AvroDeserializer(registry).deserialize(b"\x01\x00\x00\x00\x01x", _ctx(topic))


async def test_subject_name_strategies(registry: SchemaRegistryClient) -> None:
    topic = f"strategy-{uuid.uuid4().hex[:8]}"
    name = f"S{uuid.uuid4().hex[:8]}"
    value = {"id": 1, "name": "n", "tags": [], "score": None}
    await AvroSerializer(
        registry, avro_schema(name), subject_name_strategy=record_subject_name_strategy
    ).serialize(value, _ctx(topic))
    await AvroSerializer(
        registry, avro_schema(name), subject_name_strategy=topic_record_subject_name_strategy
    ).serialize(value, _ctx(topic, "key"))
    subjects = set(await registry.get_subjects())
    assert f"io.kafkaio.test.{name}" in subjects
    assert f"{topic}-io.kafkaio.test.{name}" in subjects
    with pytest.raises(SerializationError, match="refused or lacks"):
        await AvroSerializer(registry, avro_schema(name), auto_register=False).serialize(
            value, _ctx(f"unregistered-{uuid.uuid4().hex[:8]}")
        )
    registered = await AvroSerializer(registry, avro_schema(name)).serialize(
        value, _ctx(topic, "key")
    )
    latest = AvroSerializer(registry, None, auto_register=False, use_latest_version=True)
    assert await latest.serialize(value, _ctx(topic, "key")) == registered
    with pytest.raises(SerializationError):  # topic-key has nothing registered
        await AvroSerializer(
            registry, None, auto_register=False, use_latest_version=True
        ).serialize(value, _ctx(f"nothing-{uuid.uuid4().hex[:8]}"))


async def test_json_schema_bytes_match_confluent_kafka_and_errors_name_the_field(
    registry: SchemaRegistryClient, schema_registry: str
) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer as CJSONDeserializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer as CJSONSerializer

    topic = f"json-{uuid.uuid4().hex[:8]}"
    text = json.dumps(JSON_SCHEMA)
    value = {"sensor": "s-é", "celsius": 21.5, "labels": ["x"]}
    ours = await JsonSchemaSerializer(registry, text).serialize(value, _ctx(topic))
    confluent = _confluent(schema_registry)
    theirs = await anyio.to_thread.run_sync(
        lambda: CJSONSerializer(text, confluent)(value, _confluent_ctx(topic))
    )
    assert ours == theirs
    assert await JsonSchemaDeserializer(registry).deserialize(theirs, _ctx(topic)) == value
    read = await anyio.to_thread.run_sync(
        lambda: CJSONDeserializer(text, schema_registry_client=confluent)(
            ours, _confluent_ctx(topic)
        )
    )
    assert read == value
    with pytest.raises(SerializationError) as info:
        await JsonSchemaSerializer(registry, text).serialize(
            {"sensor": "s", "celsius": 1, "labels": ["a", 5]}, _ctx(topic)
        )
    assert info.value.path == "labels[1]"


async def test_protobuf_bytes_match_confluent_kafka_with_message_indexes(
    registry: SchemaRegistryClient, schema_registry: str
) -> None:
    from confluent_kafka.schema_registry.protobuf import (
        ProtobufDeserializer as CProtobufDeserializer,
    )
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as CProtobufSerializer

    package = f"p{uuid.uuid4().hex[:8]}"
    ping, reading = _proto_classes(package)
    confluent = _confluent(schema_registry)
    for message_type, message, indexes in (
        (ping, ping(seq="one"), b"\x00"),
        (reading, reading(sensor="s1", celsius=20.5, labels=["a", "b"]), b"\x04\x02\x00"),
    ):
        topic = f"proto-{uuid.uuid4().hex[:8]}"
        ours = await ProtobufSerializer(registry, message_type).serialize(message, _ctx(topic))
        theirs = await anyio.to_thread.run_sync(
            lambda mt=message_type, m=message, t=topic: CProtobufSerializer(
                mt, confluent, {"use.deprecated.format": False}
            )(m, _confluent_ctx(t))
        )
        assert ours == theirs
        assert ours is not None and ours[5 : 5 + len(indexes)] == indexes
        assert await ProtobufDeserializer(message_type).deserialize(theirs, _ctx(topic)) == message
        read = await anyio.to_thread.run_sync(
            lambda mt=message_type, o=ours, t=topic: CProtobufDeserializer(
                mt, {"use.deprecated.format": False}
            )(o, _confluent_ctx(t))
        )
        assert read == message
    with pytest.raises(SerializationError, match="message type index"):
        await ProtobufDeserializer(ping).deserialize(ours, _ctx("t"))


async def test_avro_through_a_broker_with_a_poison_record(
    registry: SchemaRegistryClient, broker: BrokerInfo, unique_topic: str
) -> None:
    with anyio.fail_after(GUARD):
        async with Producer(
            broker.bootstrap, value_serializer=AvroSerializer(registry, avro_schema("Evt"))
        ) as producer:
            for i in range(3):
                await producer.send(
                    unique_topic, {"id": i, "name": f"n{i}", "tags": []}, partition=0
                )
        async with Producer(broker.bootstrap) as producer:
            await producer.send(unique_topic, b"not avro", partition=0)
        tp = TopicPartition(unique_topic, 0)
        async with Consumer(
            bootstrap_servers=broker.bootstrap,
            value_deserializer=AvroDeserializer(registry),
            auto_offset_reset="earliest",
        ) as consumer:
            consumer.assign([tp])
            got: list[Any] = []
            with pytest.raises(RecordDeserializationError) as info:
                while True:
                    for batch in (await consumer.getmany(timeout_ms=500)).values():
                        got.extend(r.value["id"] for r in batch)
            assert got == [0, 1, 2]
            assert (info.value.offset, info.value.field) == (3, "value")
            assert "magic byte" in str(info.value)
