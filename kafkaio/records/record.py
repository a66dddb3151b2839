"""One decoded Kafka record, and the key of a transaction control record.

Records are plain slotted objects built by the batch decoders; batch-level facts (timestamp
type, leader epoch) are read through the batch they came from.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

from kafkaio.errors import CorruptRecordError

__all__ = [
    "BatchInfo",
    "ControlRecord",
    "ControlRecordType",
    "Header",
    "Record",
    "RecordTuple",
    "parse_control_record",
]

Header = tuple[str, "bytes | None"]
#: One decoded record as a plain tuple: (offset, timestamp, key, value, headers). Records
#: without headers share one empty tuple; others carry a fresh list.
RecordTuple = tuple[int, int, "bytes | None", "bytes | None", Sequence[Header]]


class BatchInfo(Protocol):
    """What a record can tell about the batch it came from."""

    @property
    def timestamp_type(self) -> int: ...

    @property
    def partition_leader_epoch(self) -> int: ...


class Record:
    """A record: absolute offset, timestamp (ms), key, value and headers.

    A hand-written slotted class rather than a dataclass: it is built once per record on the
    consumer's hot path, and compiled with mypyc its constructor is native. Equality ignores
    ``batch``, as a dataclass field with ``compare=False`` would. ``headers`` is a list made
    on first access when the record has none (decoders pass None): most records have no
    headers, and a list per record is an allocation the garbage collector then tracks.
    """

    __slots__ = ("_headers", "batch", "key", "offset", "timestamp", "value")

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    _headers: list[Header] | None
    batch: BatchInfo | None

    def __init__(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[Header] | None = None,
        batch: BatchInfo | None = None,
    ) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self._headers = headers
        self.batch = batch

    @property
    def headers(self) -> list[Header]:
        """The record's headers as (name, value) pairs, in order (an empty list if none)."""
        headers = self._headers
        if headers is None:
            headers = self._headers = []
        return headers

    @headers.setter
    def headers(self, headers: list[Header]) -> None:
        self._headers = headers

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return (
            self.offset == other.offset
            and self.timestamp == other.timestamp
            and self.key == other.key
            and self.value == other.value
            and self.headers == other.headers
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        return (
            f"Record(offset={self.offset!r}, timestamp={self.timestamp!r}, key={self.key!r}, "
            f"value={self.value!r}, headers={self.headers!r})"
        )

    @property
    def timestamp_type(self) -> int:
        """0 for CreateTime, 1 for LogAppendTime (then ``timestamp`` is the broker's)."""
        batch = self.batch
        return 0 if batch is None else batch.timestamp_type

    @property
    def leader_epoch(self) -> int:
        """Partition leader epoch of the batch, or -1 when unknown."""
        batch = self.batch
        return -1 if batch is None else batch.partition_leader_epoch


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
