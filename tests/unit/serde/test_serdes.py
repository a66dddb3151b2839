"""kafkaio.serde: JSON, dataclass and Pydantic serdes, and how each shape is called."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
from decimal import Decimal
from typing import Any, Literal

import pydantic
import pytest

from kafkaio.errors import KafkaConfigError, SerializationError
from kafkaio.serde import (
    DataclassDeserializer,
    DataclassSerializer,
    Deserializer,
    JsonDeserializer,
    JsonSerializer,
    PydanticDeserializer,
    PydanticSerializer,
    SerializationContext,
    Serializer,
)
from kafkaio.serde.base import FieldCodec, deserialize, serialize


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Item:
    sku: str
    qty: int = 1


@dataclasses.dataclass
class Order:
    id: int
    items: list[Item]
    placed: datetime.datetime
    color: Color
    ref: uuid.UUID
    total: Decimal
    note: str | None = None
    tags: dict[str, int] = dataclasses.field(default_factory=dict)
    kind: Literal["web", "shop"] = "web"


ORDER = Order(
    7,
    [Item("a"), Item("b", 2)],
    datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.timezone.utc),
    Color.BLUE,
    uuid.UUID(int=5),
    Decimal("10.25"),
    tags={"x": 1},
)


def test_json_round_trip_is_compact_utf8() -> None:
    data = JsonSerializer()({"b": "é", "a": [1, 2.5, None]})
    assert data == '{"b":"é","a":[1,2.5,null]}'.encode()
    assert JsonDeserializer()(data) == {"b": "é", "a": [1, 2.5, None]}
    assert JsonDeserializer()(None) is None
    assert JsonSerializer(sort_keys=True)({"b": 1, "a": 2}) == b'{"a":2,"b":1}'


def test_json_errors_name_the_field_that_cannot_be_written() -> None:
    with pytest.raises(SerializationError) as info:
        JsonSerializer()({"a": {"b": [1, object()]}})
    assert info.value.path == "a.b[1]"
    with pytest.raises(SerializationError, match="not JSON"):
        JsonDeserializer()(b"{nope")
    with pytest.raises(SerializationError, match="not UTF-8"):
        JsonDeserializer()(b"\xff")


def test_dataclass_round_trip_keeps_every_type() -> None:
    data = DataclassSerializer(Order)(ORDER)
    assert b'"placed":"2024-05-01T12:30:00+00:00"' in data and b'"color":"blue"' in data
    assert DataclassDeserializer(Order)(data) == ORDER
    assert DataclassDeserializer(Order)(None) is None


@pytest.mark.parametrize(
    ("change", "path", "message"),
    [
        ({"items": [{"sku": "a"}, {"sku": 3}]}, "items[1].sku", "expected str, got int 3"),
        ({"id": "7"}, "id", "expected int, got str"),
        ({"id": True}, "id", "expected int, got bool"),
        ({"color": "green"}, "color", "expected Color"),
        ({"placed": "yesterday"}, "placed", "expected datetime"),
        ({"tags": {"x": "1"}}, "tags.x", "expected int"),
        ({"kind": "phone"}, "kind", "expected Literal"),
        ({"note": 5}, "note", "expected"),
    ],
)
def test_dataclass_errors_name_the_field(change: dict[str, Any], path: str, message: str) -> None:
    import json

    obj = json.loads(DataclassSerializer(Order)(ORDER))
    obj.update(change)
    with pytest.raises(SerializationError) as info:
        DataclassDeserializer(Order)(json.dumps(obj).encode())
    assert info.value.path == path
    assert message in str(info.value)


def test_dataclass_missing_required_fields_fail_and_unknown_ones_are_ignored() -> None:
    with pytest.raises(SerializationError) as info:
        DataclassDeserializer(Item)(b'{"qty": 2}')
    assert info.value.path == "sku" and "missing" in str(info.value)
    assert DataclassDeserializer(Item)(b'{"sku": "z", "new_field": 1}') == Item("z")


def test_dataclass_serdes_refuse_what_is_not_their_class() -> None:
    with pytest.raises(KafkaConfigError):
        DataclassSerializer(dict)  # type: ignore[arg-type]
    with pytest.raises(SerializationError, match="expected a Item, got dict"):
        DataclassSerializer(Item)({"sku": "a"})  # type: ignore[arg-type]


class User(pydantic.BaseModel):
    name: str
    age: int
    friends: list[str] = []


def test_pydantic_round_trip_and_field_errors() -> None:
    data = PydanticSerializer(User)(User(name="ann", age=3))
    assert data == b'{"name":"ann","age":3,"friends":[]}'
    assert PydanticDeserializer(User)(data) == User(name="ann", age=3)
    assert PydanticSerializer(User)({"name": "bo", "age": 4}) == (
        b'{"name":"bo","age":4,"friends":[]}'
    )
    with pytest.raises(SerializationError) as info:
        PydanticDeserializer(User)(b'{"name": "ann", "age": 3, "friends": ["a", 5]}')
    assert info.value.path == "friends[1]"
    with pytest.raises(SerializationError) as info:
        PydanticSerializer(User)({"name": "bo", "age": "old"})
    assert info.value.path == "age"


class Upper(Serializer[str]):
    def serialize(self, data: str, ctx: SerializationContext) -> bytes:
        return f"{ctx.topic}:{ctx.field}:{data.upper()}".encode()


class AsyncLen(Deserializer[int]):
    async def deserialize(self, data: bytes | None, ctx: SerializationContext) -> int:
        return -1 if data is None else len(data) + (ctx.offset or 0)


async def _async_encode(value: str) -> bytes:
    return value.encode()


async def test_every_shape_is_classified_and_called() -> None:
    ctx = SerializationContext("t", "value", 0, 5)
    plain = FieldCodec(str.encode, "value", deserializer=False)
    assert plain.plain and not plain.is_async
    assert await serialize(plain, "x", ctx) == b"x"
    coro = FieldCodec(_async_encode, "value", deserializer=False)
    assert coro.is_async and not coro.plain
    assert await serialize(coro, "y", ctx) == b"y"
    obj = FieldCodec(Upper(), "value", deserializer=False)
    assert obj.with_context and not obj.is_async
    assert await serialize(obj, "z", ctx) == b"t:value:Z"
    des = FieldCodec(AsyncLen(), "value", deserializer=True)
    assert des.with_context and des.is_async
    assert await deserialize(des, b"abc", ctx) == 8
    with pytest.raises(KafkaConfigError, match="value_serializer must be"):
        FieldCodec("utf-8", "value", deserializer=False)


async def test_serializer_errors_name_topic_partition_and_field() -> None:
    def bad(value: Any) -> bytes:
        raise SerializationError("amount: expected a number", path="amount")

    ctx = SerializationContext("orders", "value", 3)
    with pytest.raises(SerializationError) as info:
        await serialize(FieldCodec(_async_wrap(bad), "value", deserializer=False), 1, ctx)
    err = info.value
    assert (err.topic, err.partition, err.field, err.path) == ("orders", 3, "value", "amount")
    assert str(err).endswith("(topic='orders', partition=3)")
    with pytest.raises(SerializationError, match="value_serializer returned str, not bytes"):
        await serialize(FieldCodec(_async_wrap(str), "value", deserializer=False), 1, ctx)


def _async_wrap(fn: Any) -> Any:
    async def wrapped(value: Any) -> Any:
        return fn(value)

    return wrapped
