"""What the consumer hands the application: ConsumerRecord, and OffsetAndTimestamp answers.

Plain slotted value objects; deserializers have already been applied to key and value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

CREATE_TIME = 0
LOG_APPEND_TIME = 1


@dataclass(slots=True)
class ConsumerRecord(Generic[K, V]):
    """One record as consumed: where it came from, when, and its (deserialized) content.

    ``timestamp_type`` is 0 (CreateTime) or 1 (LogAppendTime); ``leader_epoch`` is None when
    the batch carried none; the serialized sizes are -1 for a null key or value. ``headers``
    is a sequence of (name, value) pairs (an empty tuple, shared, when there are none).
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


@dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    """An answer of offsets_for_times: the first offset whose timestamp is >= the asked one."""

    offset: int
    timestamp: int
    leader_epoch: int | None = None


def identity(data: Any) -> Any:
    """The default deserializer: keys and values stay bytes (or None)."""
    return data
