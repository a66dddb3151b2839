"""Encoding of RecordBatch v2: the per-partition batch builder used by the producer.

Each record is encoded as it is appended, into one bytes object (one allocation, no growing
buffer); ``build`` joins them, compresses them, and writes the 61-byte header with the
CRC-32C.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from crc32c import crc32c

from kafkaio.errors import KafkaConfigError, KafkaError
from kafkaio.records.batch import CODEC_MASK, HEADER_SIZE, LOG_OVERHEAD
from kafkaio.records.compression import Compression, compress
from kafkaio.records.varint import NONNEG_VARINTS, encode_varint

__all__ = ["BatchBuilder"]

# The batch header in two parts: up to the CRC (base offset, length, partition leader
# epoch, magic, CRC), and what the CRC covers besides the records (attributes, last offset
# delta, first and max timestamp, producer id and epoch, base sequence, record count).
_HEAD = struct.Struct(">qiibI")
_TAIL = struct.Struct(">hiqqqhii")
_VARINTS_LIMIT: Final = len(NONNEG_VARINTS)
# Upper bound of a record's fixed overhead: length(5) attributes(1) timestamp delta(10)
# offset delta(5) key length(5) value length(5) header count(5).
_MAX_RECORD_OVERHEAD = 36
_MAX_HEADER_OVERHEAD = 10

Headers = Sequence[tuple[str, "bytes | None"]]


def _encode_headers(headers: Headers) -> bytes:
    out = bytearray(encode_varint(len(headers)))
    for name, value in headers:
        raw = name.encode()
        out += encode_varint(len(raw))
        out += raw
        if value is None:
            out += b"\x01"
        else:
            out += encode_varint(len(value))
            out += value
    return bytes(out)


class BatchBuilder:
    """Accumulates records of one partition and encodes them as a magic 2 batch.

    ``append`` returns the record's encoded size, or None once the batch is full
    (``batch_size`` bytes, uncompressed); the first record always fits.
    """

    __slots__ = (
        "_attributes",
        "_batch_size",
        "_records",
        "_size",
        "_payload",
        "_count",
        "_first_timestamp",
        "_max_timestamp",
        "base_sequence",
        "compression",
        "producer_epoch",
        "producer_id",
    )

    def __init__(
        self,
        *,
        magic: int = 2,
        compression: Compression | int | str = Compression.NONE,
        is_transactional: bool = False,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        batch_size: int = 16384,
        timestamp_type: int = 0,
    ) -> None:
        if magic != 2:
            raise KafkaConfigError(
                f"cannot build magic {magic} batches: only magic 2 (Kafka 0.11+) is supported"
            )
        if timestamp_type not in (0, 1):
            raise KafkaConfigError(f"timestamp_type must be 0 or 1, got {timestamp_type!r}")
        self.compression: Compression = (
            compression if isinstance(compression, Compression) else Compression.parse(compression)
        )
        self._attributes = (
            int(self.compression)
            | (0x08 if timestamp_type else 0)
            | (0x10 if is_transactional else 0)
        )
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self._batch_size = batch_size
        self._records: list[bytes] = []  # each record encoded
        self._size = HEADER_SIZE  # the batch's bytes so far, uncompressed, header included
        self._payload: bytes | None = None  # the (compressed) records of the last build()
        self._count = 0
        self._first_timestamp = 0
        self._max_timestamp = 0

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def is_transactional(self) -> bool:
        return bool(self._attributes & 0x10)

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Set idempotence fields before ``build`` (they do not change the records)."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence

    def size_in_bytes(self) -> int:
        """Bytes the batch takes so far, uncompressed and including the header."""
        return self._size

    def append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None = None,
    ) -> int | None:
        """Add a record; return its encoded size, or None (nothing added) if the batch is full."""
        varints = NONNEG_VARINTS
        count = self._count
        if count:
            delta = timestamp_ms - self._first_timestamp
            ts = varints[delta] if 0 <= delta < _VARINTS_LIMIT else encode_varint(delta)
        else:
            ts = b"\x00"
        offset_delta = varints[count] if count < _VARINTS_LIMIT else encode_varint(count)
        key_bytes = b""
        if key is None:
            key_length = b"\x01"
        else:
            key_bytes = key
            n = len(key_bytes)
            key_length = varints[n] if n < _VARINTS_LIMIT else encode_varint(n)
        value_bytes = b""
        if value is None:
            value_length = b"\x01"
        else:
            value_bytes = value
            n = len(value_bytes)
            value_length = varints[n] if n < _VARINTS_LIMIT else encode_varint(n)
        tail = _encode_headers(headers) if headers else b"\x00"
        # attributes (1 byte) and the rest
        n = (
            1
            + len(ts)
            + len(offset_delta)
            + len(key_length)
            + len(key_bytes)
            + len(value_length)
            + len(value_bytes)
            + len(tail)
        )
        length = varints[n] if n < _VARINTS_LIMIT else encode_varint(n)
        size = len(length) + n
        if count and self._size + size > self._batch_size:
            return None
        # one allocation and one copy of each part (mypyc compiles this to a bytes builder)
        self._records.append(
            b"%b\x00%b%b%b%b%b%b%b"
            % (length, ts, offset_delta, key_length, key_bytes, value_length, value_bytes, tail)
        )
        self._size += size
        self._payload = None
        if count:
            if timestamp_ms > self._max_timestamp:
                self._max_timestamp = timestamp_ms
        else:
            self._first_timestamp = self._max_timestamp = timestamp_ms
        self._count = count + 1
        return size

    @staticmethod
    def estimate_size_in_bytes(
        key: bytes | None, value: bytes | None, headers: Headers | None = None
    ) -> int:
        """Upper bound of a one-record batch's size, header included."""
        size = HEADER_SIZE + _MAX_RECORD_OVERHEAD
        if key is not None:
            size += len(key)
        if value is not None:
            size += len(value)
        for name, header_value in headers or ():
            size += _MAX_HEADER_OVERHEAD + len(name.encode())
            if header_value is not None:
                size += len(header_value)
        return size

    def build(self, base_offset: int = 0) -> bytes:
        """Encode the batch: header, (compressed) records and CRC-32C.

        The (compressed) records are kept until the next ``append``: building again (e.g.
        with new producer state) only makes the header and the CRC anew.
        """
        count = self._count
        if not count:
            raise KafkaError("cannot build an empty record batch: append a record first")
        payload = self._payload
        if payload is None:
            payload = b"".join(self._records)
            codec = self._attributes & CODEC_MASK
            if codec:
                payload = compress(codec, payload)
            self._payload = payload
        tail = _TAIL.pack(
            self._attributes,
            count - 1,
            self._first_timestamp,
            self._max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            count,
        )
        head = _HEAD.pack(
            base_offset,
            HEADER_SIZE - LOG_OVERHEAD + len(payload),
            -1,  # partition leader epoch: set by the broker
            2,
            crc32c(payload, crc32c(tail)),
        )
        return b"%b%b%b" % (head, tail, payload)
