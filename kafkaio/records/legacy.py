"""Decoding of legacy message sets (magic 0 and 1), as old brokers and topics still serve them.

Each top-level message (or compressed wrapper with its inner messages) becomes one
LegacyRecordBatch exposing the same attributes as a v2 RecordBatch.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from kafkaio.errors import CorruptRecordError
from kafkaio.records.compression import Compression, decompress
from kafkaio.records.record import Record, RecordTuple

__all__ = ["LegacyRecordBatch", "ListCursor", "decode_legacy_batch"]

_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_TIMESTAMP = struct.Struct(">q")
_LENGTH = struct.Struct(">i")
_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08
_LOG_OVERHEAD = 12
_CRC_START = 16  # the CRC covers magic .. end of message


@dataclass(slots=True, eq=False)
class LegacyRecordBatch:
    """One top-level magic 0/1 message: a single record, or a compressed wrapper of many.

    A wrapper's inner messages are decoded as they are taken (``cursor()``), as a v2
    batch's records are: one wrapper of 64 MiB of tiny messages costs their bytes, not
    millions of objects at once. ``records()`` decodes them all.
    """

    base_offset: int
    last_offset: int
    magic: int
    crc: int
    attributes: int
    first_timestamp: int
    max_timestamp: int
    size_in_bytes: int
    topic: str | None
    partition: int | None
    decoded: list[Record] = field(default_factory=list, repr=False)  # an uncompressed one
    inner: _Inner | None = field(default=None, repr=False)  # a compressed wrapper's messages

    partition_leader_epoch: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    is_transactional: bool = False
    is_control: bool = False

    @property
    def record_count(self) -> int:
        return self.inner.count if self.inner is not None else len(self.decoded)

    @property
    def last_offset_delta(self) -> int:
        return self.last_offset - self.base_offset

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & _CODEC_MASK)

    @property
    def timestamp_type(self) -> int:
        """0 for CreateTime (or no timestamp, magic 0), 1 for LogAppendTime."""
        return 1 if self.magic and self.attributes & _TIMESTAMP_TYPE_MASK else 0

    def records(self) -> list[Record]:
        if self.inner is None:
            return list(self.decoded)
        cursor = LegacyCursor(self)
        return [Record(*row[:4], None, self) for row in cursor.take(cursor.remaining)]

    def record_tuples(self) -> list[RecordTuple]:
        """Every record as an ``(offset, timestamp, key, value, headers)`` tuple."""
        cursor = self.cursor()
        return cursor.take(cursor.remaining)

    def cursor(self) -> ListCursor | LegacyCursor:
        """A cursor over the records, as ``RecordBatch.cursor`` gives one."""
        if self.inner is not None:
            return LegacyCursor(self)
        return ListCursor([(r.offset, r.timestamp, r.key, r.value, r.headers) for r in self.decoded])

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def __len__(self) -> int:
        return self.record_count


@dataclass(slots=True)
class _Inner:
    """A compressed wrapper's decompressed message set, checked for framing only."""

    data: bytes
    count: int
    delta: int  # added to inner offsets (magic 1: they are relative)
    wrapper_timestamp: int | None  # LogAppendTime: every record's timestamp
    verify_crc: bool


class ListCursor:
    """``RecordCursor``'s interface over records decoded already."""

    __slots__ = ("_rows", "_pos")

    def __init__(self, rows: list[RecordTuple]) -> None:
        self._rows = rows
        self._pos = 0

    @property
    def remaining(self) -> int:
        return len(self._rows) - self._pos

    def take(self, n: int) -> list[RecordTuple]:
        """The next ``n`` records (fewer at the end) as tuples."""
        start = self._pos
        self._pos = min(len(self._rows), start + max(n, 0))
        return self._rows[start : self._pos]


class LegacyCursor:
    """Decodes a compressed wrapper's inner messages a few at a time (``take``)."""

    __slots__ = ("_batch", "_inner", "_pos", "remaining")

    def __init__(self, batch: LegacyRecordBatch) -> None:
        assert batch.inner is not None
        self._batch = batch
        self._inner = batch.inner
        self._pos = 0
        self.remaining = batch.inner.count

    def take(self, n: int) -> list[RecordTuple]:
        """The next ``n`` records (fewer at the end) as tuples; CorruptRecordError (naming
        the batch) for a message that fails its CRC or does not parse."""
        inner = self._inner
        data = inner.data
        out: list[RecordTuple] = []
        try:
            for _ in range(min(n, self.remaining)):
                message, self._pos = _parse_message(data, self._pos, len(data), inner.verify_crc)
                stamp = inner.wrapper_timestamp
                out.append(
                    (
                        message.offset + inner.delta,
                        message.timestamp if stamp is None else stamp,
                        message.key,
                        message.value,
                        [],
                    )
                )
                self.remaining -= 1
        except CorruptRecordError as exc:
            self.remaining = 0
            batch = self._batch
            raise CorruptRecordError(
                str(exc), topic=batch.topic, partition=batch.partition, offset=batch.base_offset
            ) from None
        return out


@dataclass(slots=True)
class _Message:
    offset: int
    crc: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def _read_bytes(data: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptRecordError("message ends inside a length field")
    (size,) = _LENGTH.unpack_from(data, pos)
    pos += 4
    if size == -1:
        return None, pos
    if size < 0 or pos + size > end:
        raise CorruptRecordError(f"message field length {size} is out of bounds")
    return data[pos : pos + size], pos + size


def _parse_message(data: bytes, pos: int, end: int, verify_crc: bool) -> tuple[_Message, int]:
    """Parse one message starting at its offset field; return it and the next position."""
    if pos + _LOG_OVERHEAD + 6 > end:
        raise CorruptRecordError("message is truncated")
    offset, size, crc, magic, attributes = _PREFIX.unpack_from(data, pos)
    msg_end = pos + _LOG_OVERHEAD + size
    if size < 14 or msg_end > end:
        raise CorruptRecordError(f"message size {size} is out of bounds")
    if magic not in (0, 1):
        raise CorruptRecordError(f"message magic {magic} inside a legacy message set")
    if verify_crc and zlib.crc32(memoryview(data)[pos + _CRC_START : msg_end]) != crc:
        raise CorruptRecordError("message failed its CRC-32 check")
    p = pos + 18
    timestamp = -1
    if magic == 1:
        if p + 8 > msg_end:
            raise CorruptRecordError("magic 1 message is too short for its timestamp")
        (timestamp,) = _TIMESTAMP.unpack_from(data, p)
        p += 8
    key, p = _read_bytes(data, p, msg_end)
    value, p = _read_bytes(data, p, msg_end)
    if p != msg_end:
        raise CorruptRecordError("message size does not match its fields")
    return _Message(offset, crc, magic, attributes, timestamp, key, value), msg_end


def _scan_messages(data: bytes) -> tuple[tuple[int, int], tuple[int, int], int]:
    """Walk a decompressed message set's framing without decoding it: ((offset, timestamp)
    of the first message, (offset, timestamp) of the last, count). Raises CorruptRecordError
    for a nested wrapper, bad framing or an empty set (the contents are checked as the
    messages are taken)."""
    end = len(data)
    pos = 0
    count = 0
    first = last = (0, -1)
    while pos < end:
        if pos + _LOG_OVERHEAD + 6 > end:
            raise CorruptRecordError("message is truncated")
        offset, size, _, magic, attributes = _PREFIX.unpack_from(data, pos)
        if size < 14 or pos + _LOG_OVERHEAD + size > end:
            raise CorruptRecordError(f"message size {size} is out of bounds")
        if attributes & _CODEC_MASK:
            raise CorruptRecordError("compressed message nested inside a compressed wrapper")
        timestamp = -1
        if magic == 1 and size >= 14 + 8:
            (timestamp,) = _TIMESTAMP.unpack_from(data, pos + 18)
        last = (offset, timestamp)
        if not count:
            first = last
        count += 1
        pos += _LOG_OVERHEAD + size
    if not count:
        raise CorruptRecordError("compressed wrapper message holds no messages")
    return first, last, count


def decode_legacy_batch(
    view: memoryview,
    *,
    topic: str | None = None,
    partition: int | None = None,
    verify_crc: bool = True,
    max_decompressed_size: int,
) -> LegacyRecordBatch:
    """Decode one complete top-level legacy message (``view`` spans exactly that message)."""
    data = bytes(view)
    offset = _PREFIX.unpack_from(data)[0]
    try:
        wrapper, _ = _parse_message(data, 0, len(data), verify_crc)
        batch = LegacyRecordBatch(
            base_offset=wrapper.offset,
            last_offset=wrapper.offset,
            magic=wrapper.magic,
            crc=wrapper.crc,
            attributes=wrapper.attributes,
            first_timestamp=wrapper.timestamp,
            max_timestamp=wrapper.timestamp,
            size_in_bytes=len(data),
            topic=topic,
            partition=partition,
        )
        codec = wrapper.attributes & _CODEC_MASK
        if not codec:
            batch.decoded.append(
                Record(wrapper.offset, wrapper.timestamp, wrapper.key, wrapper.value, None, batch)
            )
            return batch
        if wrapper.value is None:
            raise CorruptRecordError("compressed wrapper message has no value")
        inner_data = decompress(codec, wrapper.value, max_decompressed_size)
        first, last, count = _scan_messages(inner_data)
        # Magic 1 wrappers carry relative inner offsets; the wrapper has the last one's.
        delta = wrapper.offset - last[0] if wrapper.magic == 1 else 0
        log_append = wrapper.magic == 1 and wrapper.attributes & _TIMESTAMP_TYPE_MASK
        batch.inner = _Inner(
            inner_data, count, delta, wrapper.timestamp if log_append else None, verify_crc
        )
        batch.base_offset = first[0] + delta
        batch.last_offset = last[0] + delta
        batch.first_timestamp = wrapper.timestamp if log_append else first[1]
        # a magic 1 wrapper's timestamp is its messages' largest (or the log append time)
        batch.max_timestamp = wrapper.timestamp
        return batch
    except CorruptRecordError as exc:
        if exc.topic is not None or exc.partition is not None:
            raise
        raise CorruptRecordError(
            str(exc), topic=topic, partition=partition, offset=offset
        ) from None
