"""Zigzag varints of the Kafka record format (protobuf-style base-128, little-endian groups).

Helpers for the encoder and for the decoders' slow path; hot loops inline the 1-2 byte cases.
"""

from __future__ import annotations

from typing import Final

from kafkaio.errors import CorruptRecordError

__all__ = [
    "NONNEG_VARINTS",
    "SMALL_VARINTS",
    "decode_uvarint",
    "encode_uvarint",
    "encode_varint",
    "size_of_varint",
]

_MAX_SHIFT = 63


def encode_uvarint(value: int) -> bytes:
    """Unsigned base-128 encoding of ``value`` (>= 0)."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# Zigzag varint bytes for zigzag values below 2048 (signed -1024..1023): lengths, deltas.
SMALL_VARINTS: Final[list[bytes]] = [encode_uvarint(u) for u in range(2048)]
# Zigzag varint bytes of the values 0..4095 (at most two bytes each): what the encoder's hot
# path writes for lengths, offset deltas and timestamp deltas, by one list lookup.
NONNEG_VARINTS: Final[list[bytes]] = [encode_uvarint(n << 1) for n in range(4096)]


def encode_varint(value: int) -> bytes:
    """Zigzag varint encoding of a signed 64-bit ``value``."""
    u = (value << 1) ^ (value >> 63)
    if u < 2048:
        return SMALL_VARINTS[u]
    return encode_uvarint(u)


def size_of_varint(value: int) -> int:
    """Number of bytes ``encode_varint(value)`` takes."""
    u = (value << 1) ^ (value >> 63)
    size = 1
    while u >= 0x80:
        u >>= 7
        size += 1
    return size


def decode_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint at ``pos``; return (value, next position).

    Raises IndexError when the data ends first and CorruptRecordError past 64 bits.
    """
    b = data[pos]
    pos += 1
    value = b & 0x7F
    shift = 7
    while b & 0x80:
        if shift > _MAX_SHIFT:
            raise CorruptRecordError("varint is longer than 10 bytes")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
    return value, pos
