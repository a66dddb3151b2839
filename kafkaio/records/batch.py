"""Decoding of RecordBatch v2 (magic 2) and of Fetch records blobs that mix batch formats.

``iter_batches`` walks a blob, checks each batch's header and CRC-32C, and yields batch
objects whose records are decoded (and decompressed) only when iterated.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any, Final

from crc32c import crc32c

from kafkaio.errors import CorruptRecordError
from kafkaio.records.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, decompress
from kafkaio.records.legacy import LegacyRecordBatch, decode_legacy_batch
from kafkaio.records.record import Header, Record, RecordTuple
from kafkaio.records.varint import decode_uvarint

__all__ = ["RecordBatch", "RecordCursor", "iter_batches"]

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


class RecordBatch:
    """A magic 2 record batch; iterate it to decode its records.

    ``payload`` holds the batch's record bytes (compressed or not) between ``start`` and
    ``end``; nothing is decompressed or decoded until the batch is iterated. A hand-written
    slotted class (compared by identity) rather than a dataclass: one is built per batch, and
    compiled with mypyc its constructor is native.
    """

    __slots__ = (
        "attributes",
        "base_offset",
        "base_sequence",
        "crc",
        "end",
        "first_timestamp",
        "last_offset_delta",
        "magic",
        "max_decompressed_size",
        "max_timestamp",
        "partition",
        "partition_leader_epoch",
        "payload",
        "producer_epoch",
        "producer_id",
        "record_count",
        "size_in_bytes",
        "start",
        "topic",
    )

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

    def __init__(
        self,
        base_offset: int,
        partition_leader_epoch: int,
        magic: int,
        crc: int,
        attributes: int,
        last_offset_delta: int,
        first_timestamp: int,
        max_timestamp: int,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        record_count: int,
        size_in_bytes: int,
        topic: str | None,
        partition: int | None,
        payload: bytes,
        start: int,
        end: int,
        max_decompressed_size: int,
    ) -> None:
        self.base_offset = base_offset
        self.partition_leader_epoch = partition_leader_epoch
        self.magic = magic
        self.crc = crc
        self.attributes = attributes
        self.last_offset_delta = last_offset_delta
        self.first_timestamp = first_timestamp
        self.max_timestamp = max_timestamp
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.record_count = record_count
        self.size_in_bytes = size_in_bytes
        self.topic = topic
        self.partition = partition
        self.payload = payload
        self.start = start
        self.end = end
        self.max_decompressed_size = max_decompressed_size

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, record_count={self.record_count}, "
            f"attributes={self.attributes:#x}, size_in_bytes={self.size_in_bytes}, "
            f"topic={self.topic!r}, partition={self.partition!r})"
        )

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
        return self._decode(False)

    def record_tuples(self) -> list[RecordTuple]:
        """Every record as an ``(offset, timestamp, key, value, headers)`` tuple.

        The same decoding (and validation) as ``records()`` without a Record object per
        record: the cheapest way to turn a batch into another record type. Records without
        headers share one empty tuple. Batch-level facts (timestamp type, leader epoch) are
        attributes of the batch.
        """
        return self._decode(True)

    def _decode(self, as_tuples: bool) -> list[Any]:
        cursor = self.cursor()
        out = cursor._take(cursor.remaining, as_tuples)
        if cursor.error is not None:  # all or nothing
            raise cursor.error
        return out

    def cursor(self) -> RecordCursor:
        """A cursor over the batch's records, decoded a few at a time (``take``).

        Decompresses the batch (bounded by ``max_decompressed_size``) and checks the record
        count against the decompressed size; records are decoded only as they are taken, so
        a batch of millions of tiny records costs memory for the records taken, not for all.
        """
        codec = self.attributes & CODEC_MASK
        try:
            if codec:
                data = decompress(
                    codec,
                    memoryview(self.payload)[self.start : self.end],
                    self.max_decompressed_size,
                )
                return RecordCursor(self, data, 0, len(data))
            return RecordCursor(self, self.payload, self.start, self.end)
        except CorruptRecordError as exc:
            if exc.offset is not None:
                raise
            raise self.corrupt(str(exc)) from None

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def __len__(self) -> int:
        return self.record_count


class RecordCursor:
    """Decodes a batch's records a few at a time, from its (decompressed) record bytes.

    ``take(n)`` returns the next ``n`` records (fewer at the end) as tuples, ``take_records``
    as Record objects; ``remaining`` counts those not taken. Bad data raises
    CorruptRecordError naming the batch: a take that reaches a bad record returns the good
    records before it, and the next take raises (``error``). The bytes left over after the
    last record are checked when it is taken.
    """

    __slots__ = ("batch", "data", "end", "error", "last_offset", "pos", "remaining")

    batch: RecordBatch
    data: bytes
    pos: int
    end: int
    remaining: int
    error: CorruptRecordError | None
    last_offset: int

    def __init__(self, batch: RecordBatch, data: bytes, pos: int, end: int) -> None:
        count = batch.record_count
        if count > (end - pos) // MIN_RECORD_SIZE:
            raise batch.corrupt(
                f"record batch claims {count} records, impossible in {end - pos} bytes"
            )
        if count <= 0 and pos != end:
            raise batch.corrupt(f"{end - pos} bytes left over after the last record")
        self.batch = batch
        self.data = data
        self.pos = pos
        self.end = end
        self.remaining = count
        self.error = None
        self.last_offset = batch.base_offset - 1  # of the last record taken

    def take(self, n: int) -> list[RecordTuple]:
        """The next ``n`` records (fewer at the end of the batch) as tuples."""
        return self._take(n, True)

    def take_records(self, n: int) -> list[Record]:
        """The next ``n`` records (fewer at the end of the batch) as Record objects."""
        return self._take(n, False)

    def _take(self, n: int, as_tuples: bool) -> list[Any]:
        error = self.error
        if error is not None:
            raise error
        count = min(n, self.remaining)
        out: list[Any] = []
        if count <= 0:
            return out
        batch = self.batch
        try:
            pos = _decode_records(
                self.data, self.pos, self.end, count, batch, as_tuples, out, self.last_offset
            )
            if count == self.remaining and pos != self.end:
                raise CorruptRecordError(f"{self.end - pos} bytes left over after the last record")
        except (CorruptRecordError, IndexError) as exc:
            if isinstance(exc, IndexError):
                error = batch.corrupt("record data runs past the end of the batch")
            elif exc.offset is None:
                error = batch.corrupt(str(exc))
            else:
                error = exc
            if not out:
                self.remaining = 0
                raise error from None
            # the records before the bad one are good: hand them out, raise on the next take
            self.error = error
            self.remaining -= len(out)
            return out
        self.pos = pos
        self.remaining -= count
        last = out[-1]
        self.last_offset = last[0] if as_tuples else last.offset
        return out


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
        # One unpack serves both the framing and (for magic 2, whose batches are at least
        # HEADER_SIZE long) the whole header; only the blob's tail can be shorter.
        header = (
            unpack_header(view, pos)
            if n - pos >= HEADER_SIZE
            else _OFFSET_LENGTH.unpack_from(view, pos)
        )
        base_offset = header[0]
        length = header[1]
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


# Signed values of zigzag varints below 2**14: every one- and two-byte varint of the record
# format (lengths up to 8 KiB, deltas up to +-8191) is decoded by one list lookup.
_ZIGZAG: Final[list[int]] = [(u >> 1) ^ -(u & 1) for u in range(1 << 14)]
_NO_HEADERS: Final[tuple[Header, ...]] = ()


def _decode_records(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    batch: RecordBatch,
    as_tuples: bool,
    out: list[Any],
    last_offset: int,
) -> int:
    """Decode ``count`` records of ``batch`` from ``data[pos:end]`` into ``out``; return the
    position after the last. Offsets must increase, from above ``last_offset`` (the offset
    of the record before, or the batch's base offset - 1).

    Appends Record objects, or (offset, timestamp, key, value, headers) tuples if
    ``as_tuples``. The hot loop: one- and two-byte varints are decoded inline, the record
    length is checked once against where its fields end, and IndexError from reading past the
    data is turned into CorruptRecordError by the caller.
    """
    base_offset = batch.base_offset
    first_timestamp = batch.first_timestamp
    max_timestamp = batch.max_timestamp
    log_append_time = bool(batch.attributes & TIMESTAMP_TYPE_MASK)
    zigzag = _ZIGZAG
    for _ in range(count):
        # record length: kept in its zigzag form, compared with the fields' extent below
        size = data[pos]
        if size < 0x80:
            pos += 1
        else:
            b = data[pos + 1]
            if b < 0x80:
                size = (size & 0x7F) | (b << 7)
                pos += 2
            else:
                size, pos = decode_uvarint(data, pos)
        start = pos
        # attributes (unused), then timestamp delta
        b = data[pos + 1]
        if b < 0x80:
            delta = zigzag[b]
            pos += 2
        else:
            b2 = data[pos + 2]
            if b2 < 0x80:
                delta = zigzag[(b & 0x7F) | (b2 << 7)]
                pos += 3
            else:
                u, pos = decode_uvarint(data, pos + 1)
                delta = (u >> 1) ^ -(u & 1)
        timestamp = max_timestamp if log_append_time else first_timestamp + delta
        # offset delta
        b = data[pos]
        if b < 0x80:
            delta = zigzag[b]
            pos += 1
        else:
            b2 = data[pos + 1]
            if b2 < 0x80:
                delta = zigzag[(b & 0x7F) | (b2 << 7)]
                pos += 2
            else:
                u, pos = decode_uvarint(data, pos)
                delta = (u >> 1) ^ -(u & 1)
        offset = base_offset + delta
        if offset <= last_offset:
            raise CorruptRecordError(
                f"record offset delta {delta} does not increase (offsets in a batch must)"
            )
        last_offset = offset
        # key
        u = data[pos]
        if u < 0x80:
            pos += 1
        else:
            b2 = data[pos + 1]
            if b2 < 0x80:
                u = (u & 0x7F) | (b2 << 7)
                pos += 2
            else:
                u, pos = decode_uvarint(data, pos)
        if u & 1:
            if u != 1:
                raise CorruptRecordError(f"record key length {(u >> 1) ^ -1} is negative")
            key = None
        else:
            u = pos + (u >> 1)
            if u > end:
                raise CorruptRecordError(
                    f"record key length {u - pos} runs past the end of the batch"
                )
            key = data[pos:u]
            pos = u
        # value
        u = data[pos]
        if u < 0x80:
            pos += 1
        else:
            b2 = data[pos + 1]
            if b2 < 0x80:
                u = (u & 0x7F) | (b2 << 7)
                pos += 2
            else:
                u, pos = decode_uvarint(data, pos)
        if u & 1:
            if u != 1:
                raise CorruptRecordError(f"record value length {(u >> 1) ^ -1} is negative")
            value = None
        else:
            u = pos + (u >> 1)
            if u > end:
                raise CorruptRecordError(
                    f"record value length {u - pos} runs past the end of the batch"
                )
            value = data[pos:u]
            pos = u
        # headers: almost always none (then Record makes its list on demand, tuples share ())
        headers: list[Header] | None = None
        if data[pos]:
            record_end = start + (size >> 1)
            if record_end > end:
                raise CorruptRecordError(
                    f"record length {(size >> 1) ^ -(size & 1)} runs past the end of the batch"
                )
            headers, pos = _decode_headers(data, pos, record_end)
        else:
            pos += 1
        if (pos - start) << 1 != size:
            raise CorruptRecordError(
                f"record length {(size >> 1) ^ -(size & 1)} does not match its fields "
                f"({pos - start} bytes)"
            )
        if pos > end:  # the batch is a slice of a larger buffer: never read past it
            raise CorruptRecordError("record data runs past the end of the batch")
        # appended only once checked: `out` holds good records when an error is raised
        if as_tuples:
            out.append((offset, timestamp, key, value, _NO_HEADERS if headers is None else headers))
        else:
            out.append(Record(offset, timestamp, key, value, headers, batch))
    return pos


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
