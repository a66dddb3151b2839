"""Kafka's murmur2 hash, bit-for-bit as the Java client's ``Utils.murmur2``.

Used by the default partitioner: ``to_positive(murmur2(key)) % num_partitions``.
"""

from __future__ import annotations

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """The 32-bit murmur2 hash of ``data`` as Java computes it (a signed int)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    end = length & ~3
    words = int.from_bytes  # local for speed
    for i in range(0, end, 4):
        k = words(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        if tail == 3:
            h ^= data[end + 2] << 16
        if tail >= 2:
            h ^= data[end + 1] << 8
        h ^= data[end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit (not abs: abs(MIN_VALUE) is negative)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition the Java client's default partitioner picks for a key."""
    return to_positive(murmur2(key)) % num_partitions
