"""Encoding of RecordBatch v2: the per-partition batch builder used by the producer.

Records are encoded into one growing buffer as they are appended; ``build`` compresses them,
writes the 61-byte header and the CRC-32C.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from crc32c import crc32c

from kafkaio.errors import KafkaConfigError, KafkaError
from kafkaio.records.batch import CODEC_MASK, CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD
from kafkaio.records.compression import Compression, compress
from kafkaio.records.varint import NONNEG_VARINTS, encode_varint

__all__ = ["BatchBuilder"]

_CRC = struct.Struct(">I")
_CRC_OFFSET = 17
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
        "_buf",
        "_compressed",
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
        self._buf = bytearray(HEADER_SIZE)  # header is written by build()
        self._compressed: bytes | None = None  # the compressed records of the last build()
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
        return len(self._buf)

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
        if key is None:
            key_length = b"\x01"
            key = b""
        else:
            n = len(key)
            key_length = varints[n] if n < _VARINTS_LIMIT else encode_varint(n)
        if value is None:
            value_length = b"\x01"
            value = b""
        else:
            n = len(value)
            value_length = varints[n] if n < _VARINTS_LIMIT else encode_varint(n)
        body = b"".join(
            (
                b"\x00",  # attributes
                ts,
                offset_delta,
                key_length,
                key,
                value_length,
                value,
                _encode_headers(headers) if headers else b"\x00",
            )
        )
        n = len(body)
        length = varints[n] if n < _VARINTS_LIMIT else encode_varint(n)
        size = len(length) + n
        buf = self._buf
        if count and len(buf) + size > self._batch_size:
            return None
        buf += length
        buf += body
        self._compressed = None
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

        The compressed records are kept until the next ``append``: building again (e.g. with
        new producer state) only rewrites the header and the CRC.
        """
        count = self._count
        if not count:
            raise KafkaError("cannot build an empty record batch: append a record first")
        if self._attributes & CODEC_MASK:
            payload = self._compressed
            if payload is None:
                with memoryview(self._buf) as view:
                    payload = compress(self._attributes & CODEC_MASK, view[HEADER_SIZE:])
                self._compressed = payload
            out = bytearray(HEADER_SIZE)
            out += payload
        else:
            out = self._buf
        HEADER.pack_into(
            out,
            0,
            base_offset,
            len(out) - LOG_OVERHEAD,
            -1,  # partition leader epoch: set by the broker
            2,
            0,  # CRC, written below
            self._attributes,
            count - 1,
            self._first_timestamp,
            self._max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            count,
        )
        with memoryview(out) as view:
            _CRC.pack_into(out, _CRC_OFFSET, crc32c(view[CRC_START:]))
        return bytes(out)
