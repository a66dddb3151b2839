"""ConsumerRecord behaves as a value object, compiled (make accel) or not."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from kafkaio.consumer.record import (
    ConsumerRecord,
    deserialized_records,
    records_from_tuples,
)

ROWS: list[Any] = [
    (10, 1_000, b"k0", b"value-0", ()),
    (11, 1_001, None, b"value-1", [("h", b"x")]),
    (12, 1_002, b"k2", None, ()),
]


def _record(**changes: Any) -> ConsumerRecord[Any, Any]:
    fields: dict[str, Any] = dict(
        topic="t",
        partition=3,
        offset=7,
        timestamp=1234,
        timestamp_type=0,
        key=b"k",
        value=b"v",
        headers=(("h", b"1"),),
        leader_epoch=4,
        serialized_key_size=1,
        serialized_value_size=1,
    )
    fields.update(changes)
    return ConsumerRecord(**fields)


def test_fields_positional_and_by_keyword_are_the_same() -> None:
    positional = ConsumerRecord("t", 3, 7, 1234, 0, b"k", b"v", (("h", b"1"),), 4, 1, 1)
    assert positional == _record()
    assert positional.as_tuple() == ("t", 3, 7, 1234, 0, b"k", b"v", (("h", b"1"),), 4, 1, 1)
    assert positional.as_dict()["leader_epoch"] == 4
    assert list(positional.as_dict()) == [
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestamp_type",
        "key",
        "value",
        "headers",
        "leader_epoch",
        "serialized_key_size",
        "serialized_value_size",
    ]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("topic", "u"),
        ("partition", 4),
        ("offset", 8),
        ("timestamp", 1),
        ("timestamp_type", 1),
        ("key", None),
        ("value", b"w"),
        ("headers", ()),
        ("leader_epoch", None),
        ("serialized_key_size", -1),
        ("serialized_value_size", 2),
    ],
)
def test_records_differing_in_one_field_are_not_equal(field: str, value: Any) -> None:
    other = _record(**{field: value})
    assert other != _record() and not (other == _record())


def test_equality_with_other_types_is_not_implemented() -> None:
    assert _record() != ("t", 3, 7)
    assert _record().__eq__(5) is NotImplemented


def test_records_are_mutable_and_unhashable_like_a_dataclass() -> None:
    record = _record()
    record.value = b"changed"
    assert record.value == b"changed"
    with pytest.raises(TypeError):
        hash(record)


def test_repr_names_every_field() -> None:
    text = repr(_record())
    assert text.startswith("ConsumerRecord(topic='t', partition=3, offset=7,")
    assert "serialized_value_size=1)" in text


def test_copy_and_pickle_round_trip() -> None:
    record = _record()
    assert copy.copy(record) == record and copy.copy(record) is not record
    assert copy.deepcopy(record) == record
    assert pickle.loads(pickle.dumps(record)) == record


def test_generic_alias_at_runtime() -> None:
    alias = ConsumerRecord[bytes, str]
    assert alias.__origin__ is ConsumerRecord  # type: ignore[attr-defined]


def test_records_from_tuples_slices_and_sizes() -> None:
    records = records_from_tuples("t", 2, ROWS, 1, 3, 1, None)
    assert [r.offset for r in records] == [11, 12]
    first, second = records
    assert first.as_tuple() == ("t", 2, 11, 1_001, 1, None, b"value-1", [("h", b"x")], None, -1, 7)
    assert (second.key, second.value) == (b"k2", None)
    assert (second.serialized_key_size, second.serialized_value_size) == (2, -1)
    assert records_from_tuples("t", 2, ROWS, 3, 3, 0, None) == []


def test_deserialized_records_apply_both_deserializers_and_keep_raw_sizes() -> None:
    records = deserialized_records(
        "t",
        0,
        ROWS,
        0,
        3,
        0,
        9,
        lambda k: None if k is None else k.decode().upper(),
        lambda v: None if v is None else len(v),
    )
    assert [(r.key, r.value) for r in records] == [("K0", 7), (None, 7), ("K2", None)]
    assert [(r.serialized_key_size, r.serialized_value_size) for r in records] == [
        (2, 7),
        (-1, 7),
        (2, -1),
    ]
    assert {r.leader_epoch for r in records} == {9}
