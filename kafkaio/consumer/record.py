"""What the consumer hands the application: ConsumerRecord (and the default deserializer).

ConsumerRecord is a plain class with fixed attributes so that the optional mypyc build
(``make accel``) compiles it, and ``records_from_tuples`` with it, into native code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

CREATE_TIME = 0
LOG_APPEND_TIME = 1

_FIELDS = (
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
)


class ConsumerRecord(Generic[K, V]):
    """One record as consumed: where it came from, when, and its (deserialized) content.

    ``timestamp_type`` is 0 (CreateTime) or 1 (LogAppendTime); ``leader_epoch`` is None when
    the batch carried none; the serialized sizes are -1 for a null key or value. ``headers``
    is a sequence of (name, value) pairs (an empty tuple, shared, when there are none).
    Records compare equal when every field is equal; they are mutable and not hashable,
    like aiokafka's.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: K
    value: V
    headers: Sequence[tuple[str, bytes | None]]
    leader_epoch: int | None
    serialized_key_size: int
    serialized_value_size: int

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        timestamp_type: int,
        key: K,
        value: V,
        headers: Sequence[tuple[str, bytes | None]],
        leader_epoch: int | None,
        serialized_key_size: int,
        serialized_value_size: int,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers
        self.leader_epoch = leader_epoch
        self.serialized_key_size = serialized_key_size
        self.serialized_value_size = serialized_value_size

    def as_tuple(self) -> tuple[Any, ...]:
        """Every field, in constructor order."""
        return (
            self.topic,
            self.partition,
            self.offset,
            self.timestamp,
            self.timestamp_type,
            self.key,
            self.value,
            self.headers,
            self.leader_epoch,
            self.serialized_key_size,
            self.serialized_value_size,
        )

    def as_dict(self) -> dict[str, Any]:
        """Every field by name (what ``dataclasses.asdict`` gave for the dataclass)."""
        return dict(zip(_FIELDS, self.as_tuple(), strict=True))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConsumerRecord):
            return NotImplemented
        return self.as_tuple() == other.as_tuple()

    __hash__ = None  # type: ignore[assignment]  # mutable: unhashable, as a dataclass

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={v!r}" for n, v in zip(_FIELDS, self.as_tuple(), strict=True))
        return f"ConsumerRecord({fields})"

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (ConsumerRecord, self.as_tuple())


RecordRow = tuple[int, int, "bytes | None", "bytes | None", Sequence[tuple[str, bytes | None]]]


def records_from_tuples(
    topic: str,
    partition: int,
    rows: list[RecordRow],
    start: int,
    end: int,
    timestamp_type: int,
    leader_epoch: int | None,
) -> list[ConsumerRecord[Any, Any]]:
    """ConsumerRecords for ``rows[start:end]`` (``(offset, timestamp, key, value, headers)``
    tuples as ``RecordBatch.record_tuples`` gives them), keys and values as they are."""
    out: list[ConsumerRecord[Any, Any]] = []
    for i in range(start, end):
        row = rows[i]
        key = row[2]
        value = row[3]
        out.append(
            ConsumerRecord(
                topic,
                partition,
                row[0],
                row[1],
                timestamp_type,
                key,
                value,
                row[4],
                leader_epoch,
                -1 if key is None else len(key),
                -1 if value is None else len(value),
            )
        )
    return out


def deserialized_records(
    topic: str,
    partition: int,
    rows: list[RecordRow],
    start: int,
    end: int,
    timestamp_type: int,
    leader_epoch: int | None,
    key_deserializer: Callable[[bytes | None], Any],
    value_deserializer: Callable[[bytes | None], Any],
) -> list[ConsumerRecord[Any, Any]]:
    """As ``records_from_tuples``, with keys and values passed through the deserializers."""
    out: list[ConsumerRecord[Any, Any]] = []
    for i in range(start, end):
        row = rows[i]
        key = row[2]
        value = row[3]
        out.append(
            ConsumerRecord(
                topic,
                partition,
                row[0],
                row[1],
                timestamp_type,
                key_deserializer(key),
                value_deserializer(value),
                row[4],
                leader_epoch,
                -1 if key is None else len(key),
                -1 if value is None else len(value),
            )
        )
    return out


def identity(data: Any) -> Any:
    """The default deserializer: keys and values stay bytes (or None)."""
    return data
