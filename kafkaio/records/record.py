"""One decoded Kafka record, and the key of a transaction control record.

Records are plain slotted objects built by the batch decoders; batch-level facts (timestamp
type, leader epoch) are read through the batch they came from.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Protocol

from kafkaio.errors import CorruptRecordError

__all__ = ["BatchInfo", "ControlRecord", "ControlRecordType", "Record", "parse_control_record"]

Header = tuple[str, "bytes | None"]


class BatchInfo(Protocol):
    """What a record can tell about the batch it came from."""

    @property
    def timestamp_type(self) -> int: ...

    @property
    def partition_leader_epoch(self) -> int: ...


@dataclass(slots=True)
class Record:
    """A record: absolute offset, timestamp (ms), key, value and headers."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    batch: BatchInfo | None = field(default=None, repr=False, compare=False)

    @property
    def timestamp_type(self) -> int:
        """0 for CreateTime, 1 for LogAppendTime (then ``timestamp`` is the broker's)."""
        return 0 if self.batch is None else self.batch.timestamp_type

    @property
    def leader_epoch(self) -> int:
        """Partition leader epoch of the batch, or -1 when unknown."""
        return -1 if self.batch is None else self.batch.partition_leader_epoch


class ControlRecordType(IntEnum):
    """Type of a transaction marker (the second int16 of a control record's key)."""

    ABORT = 0
    COMMIT = 1


@dataclass(slots=True, frozen=True)
class ControlRecord:
    """Parsed key of a control record: key version and marker type (ABORT/COMMIT/other)."""

    version: int
    type: int

    @property
    def is_commit(self) -> bool:
        return self.type == ControlRecordType.COMMIT

    @property
    def is_abort(self) -> bool:
        return self.type == ControlRecordType.ABORT


_CONTROL_KEY = struct.Struct(">hh")


def parse_control_record(key: bytes | None) -> ControlRecord:
    """Parse the key of a record from a control batch; raise CorruptRecordError if malformed."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError(
            f"control record key must be at least 4 bytes (version, type), got {key!r}"
        )
    version, type_ = _CONTROL_KEY.unpack_from(key)
    return ControlRecord(version, type_)
