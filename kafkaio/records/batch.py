"""Decoding of RecordBatch v2 (magic 2) and of Fetch records blobs that mix batch formats.

``iter_batches`` walks a blob, checks each batch's header and CRC-32C, and yields batch
objects whose records are decoded (and decompressed) only when iterated.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from crc32c import crc32c

from kafkaio.errors import CorruptRecordError
from kafkaio.records.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, decompress
from kafkaio.records.legacy import LegacyRecordBatch, decode_legacy_batch
from kafkaio.records.record import Record
from kafkaio.records.varint import decode_uvarint

__all__ = ["RecordBatch", "iter_batches"]

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base offset + length
CRC_START = 21  # attributes: everything from here to the end is covered by the CRC
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49
MIN_LEGACY_LENGTH = 14  # smallest magic 0 message after the length field
MIN_RECORD_SIZE = 7  # length, attributes, ts delta, offset delta, key, value, header count
_OFFSET_LENGTH = struct.Struct(">qi")

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20


@dataclass(slots=True, eq=False)
class RecordBatch:
    """A magic 2 record batch; iterate it to decode its records.

    ``payload`` holds the batch's record bytes (compressed or not) between ``start`` and
    ``end``; nothing is decompressed or decoded until the batch is iterated.
    """

    base_offset: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    size_in_bytes: int
    topic: str | None
    partition: int | None
    payload: bytes
    start: int
    end: int
    max_decompressed_size: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & CODEC_MASK)

    @property
    def timestamp_type(self) -> int:
        """0 for CreateTime, 1 for LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    def corrupt(self, message: str) -> CorruptRecordError:
        """An error naming this batch's topic, partition and base offset."""
        return CorruptRecordError(
            message, topic=self.topic, partition=self.partition, offset=self.base_offset
        )

    def records(self) -> list[Record]:
        """Decompress and decode every record of the batch."""
        codec = self.attributes & CODEC_MASK
        try:
            if codec:
                data = decompress(
                    codec,
                    memoryview(self.payload)[self.start : self.end],
                    self.max_decompressed_size,
                )
                return _decode_records(data, 0, len(data), self)
            return _decode_records(self.payload, self.start, self.end, self)
        except CorruptRecordError as exc:
            if exc.offset is not None:
                raise
            raise self.corrupt(str(exc)) from None
        except IndexError:
            raise self.corrupt("record data runs past the end of the batch") from None

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def __len__(self) -> int:
        return self.record_count


def iter_batches(
    buf: bytes | bytearray | memoryview,
    *,
    topic: str | None = None,
    partition: int | None = None,
    verify_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> Iterator[RecordBatch | LegacyRecordBatch]:
    """Yield every complete batch in a Fetch records blob, in order.

    A partial batch at the end (normal in Fetch responses) is ignored. Magic 0/1 message
    sets come out as LegacyRecordBatch objects with the same attributes. Raises
    CorruptRecordError naming topic, partition and offset for malformed data or bad CRCs.
    """
    view = memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    whole: bytes | None = buf if isinstance(buf, bytes) else None
    n = len(view)
    pos = 0
    unpack_header = HEADER.unpack_from
    while n - pos >= LOG_OVERHEAD:
        base_offset, length = _OFFSET_LENGTH.unpack_from(view, pos)
        if length < MIN_LEGACY_LENGTH:
            raise CorruptRecordError(
                f"record batch length {length} is below the minimum of {MIN_LEGACY_LENGTH}",
                topic=topic,
                partition=partition,
                offset=base_offset,
            )
        batch_end = pos + LOG_OVERHEAD + length
        if batch_end > n:
            return  # trailing partial batch
        magic = view[pos + 16]
        if magic == 2:
            if length < MIN_BATCH_LENGTH:
                raise CorruptRecordError(
                    f"record batch length {length} is below the v2 minimum of {MIN_BATCH_LENGTH}",
                    topic=topic,
                    partition=partition,
                    offset=base_offset,
                )
            header = unpack_header(view, pos)
            if verify_crc and crc32c(view[pos + CRC_START : batch_end]) != header[4]:
                raise CorruptRecordError(
                    "record batch failed its CRC-32C check; the data was corrupted in transit "
                    "or on the broker",
                    topic=topic,
                    partition=partition,
                    offset=base_offset,
                )
            count = header[12]
            attributes = header[5]
            if count < 0 or (
                not attributes & CODEC_MASK
                and count > (length - MIN_BATCH_LENGTH) // MIN_RECORD_SIZE
            ):
                raise CorruptRecordError(
                    f"record batch claims {count} records, impossible in {length} bytes",
                    topic=topic,
                    partition=partition,
                    offset=base_offset,
                )
            if whole is not None:
                payload, start, end = whole, pos + HEADER_SIZE, batch_end
            else:
                payload = bytes(view[pos + HEADER_SIZE : batch_end])
                start, end = 0, len(payload)
            yield RecordBatch(
                base_offset,
                header[2],
                2,
                header[4],
                attributes,
                header[6],
                header[7],
                header[8],
                header[9],
                header[10],
                header[11],
                count,
                batch_end - pos,
                topic,
                partition,
                payload,
                start,
                end,
                max_decompressed_size,
            )
        elif magic == 0 or magic == 1:
            yield decode_legacy_batch(
                view[pos:batch_end],
                topic=topic,
                partition=partition,
                verify_crc=verify_crc,
                max_decompressed_size=max_decompressed_size,
            )
        else:
            raise CorruptRecordError(
                f"unknown record batch magic {magic}; the data is corrupt or written by a newer "
                "Kafka than this client supports",
                topic=topic,
                partition=partition,
                offset=base_offset,
            )
        pos = batch_end


def _decode_records(data: bytes, pos: int, end: int, batch: RecordBatch) -> list[Record]:
    """Decode ``batch.record_count`` records from ``data[pos:end]``.

    Hot loop: varints of one or two bytes are decoded inline; IndexError from reading past
    the data is turned into CorruptRecordError by the caller.
    """
    count = batch.record_count
    if count > (end - pos) // MIN_RECORD_SIZE:
        raise CorruptRecordError(
            f"record batch claims {count} records, impossible in {end - pos} bytes"
        )
    base_offset = batch.base_offset
    first_timestamp = batch.first_timestamp
    log_append_time = batch.attributes & TIMESTAMP_TYPE_MASK
    max_timestamp = batch.max_timestamp
    records: list[Record] = []
    append = records.append
    for _ in range(count):
        # record length
        b = data[pos]
        if b < 0x80:
            u = b
            pos += 1
        else:
            b2 = data[pos + 1]
            if b2 < 0x80:
                u = (b & 0x7F) | (b2 << 7)
                pos += 2
            else:
                u, pos = decode_uvarint(data, pos)
        record_end = pos + ((u >> 1) ^ -(u & 1))
        if record_end > end or record_end < pos + MIN_RECORD_SIZE - 1:
            raise CorruptRecordError(f"record length {(u >> 1) ^ -(u & 1)} is out of bounds")
        # attributes (unused), then timestamp delta
        pos += 1
        b = data[pos]
        if b < 0x80:
            u = b
            pos += 1
        else:
            b2 = data[pos + 1]
            if b2 < 0x80:
                u = (b & 0x7F) | (b2 << 7)
                pos += 2
            else:
                u, pos = decode_uvarint(data, pos)
        timestamp = max_timestamp if log_append_time else first_timestamp + ((u >> 1) ^ -(u & 1))
        # offset delta
        b = data[pos]
        if b < 0x80:
            u = b
            pos += 1
        else:
            b2 = data[pos + 1]
            if b2 < 0x80:
                u = (b & 0x7F) | (b2 << 7)
                pos += 2
            else:
                u, pos = decode_uvarint(data, pos)
        offset = base_offset + ((u >> 1) ^ -(u & 1))
        # key
        b = data[pos]
        if b < 0x80:
            u = b
            pos += 1
        else:
            b2 = data[pos + 1]
            if b2 < 0x80:
                u = (b & 0x7F) | (b2 << 7)
                pos += 2
            else:
                u, pos = decode_uvarint(data, pos)
        if u == 1:
            key = None
        else:
            if u & 1:
                raise CorruptRecordError(f"record key length {(u >> 1) ^ -1} is negative")
            u = pos + (u >> 1)
            key = data[pos:u]
            pos = u
        # value
        b = data[pos]
        if b < 0x80:
            u = b
            pos += 1
        else:
            b2 = data[pos + 1]
            if b2 < 0x80:
                u = (b & 0x7F) | (b2 << 7)
                pos += 2
            else:
                u, pos = decode_uvarint(data, pos)
        if u == 1:
            value = None
        else:
            if u & 1:
                raise CorruptRecordError(f"record value length {(u >> 1) ^ -1} is negative")
            u = pos + (u >> 1)
            value = data[pos:u]
            pos = u
        # headers
        if data[pos] == 0:
            pos += 1
            if pos != record_end:
                raise CorruptRecordError("record length does not match its fields")
            append(Record(offset, timestamp, key, value, [], batch))
        else:
            headers, pos = _decode_headers(data, pos, record_end)
            append(Record(offset, timestamp, key, value, headers, batch))
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left over after the last record")
    return records


def _decode_headers(
    data: bytes, pos: int, record_end: int
) -> tuple[list[tuple[str, bytes | None]], int]:
    u, pos = decode_uvarint(data, pos)
    count = (u >> 1) ^ -(u & 1)
    if count < 0 or count > (record_end - pos) // 2:
        raise CorruptRecordError(f"record header count {count} is out of bounds")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        u, pos = decode_uvarint(data, pos)
        size = (u >> 1) ^ -(u & 1)
        if size < 0 or pos + size > record_end:
            raise CorruptRecordError(f"record header key length {size} is out of bounds")
        try:
            name = data[pos : pos + size].decode()
        except UnicodeDecodeError:
            raise CorruptRecordError("record header key is not valid UTF-8") from None
        pos += size
        u, pos = decode_uvarint(data, pos)
        size = (u >> 1) ^ -(u & 1)
        if size == -1:
            headers.append((name, None))
        elif size < 0 or pos + size > record_end:
            raise CorruptRecordError(f"record header value length {size} is out of bounds")
        else:
            headers.append((name, data[pos : pos + size]))
            pos += size
    if pos != record_end:
        raise CorruptRecordError("record length does not match its fields")
    return headers, pos
