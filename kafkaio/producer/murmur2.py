"""Kafka's murmur2 hash, bit-for-bit as the Java client's ``Utils.murmur2``.

Used by the default partitioner: ``to_positive(murmur2(key)) % num_partitions``. The optional
accelerator (``make accel``) compiles this module: the compiled build hashes with 64-bit
machine integers (``_murmur2_i64``, every product split so it stays below 2**63, ~40 ns per
key); interpreted Python is faster with big-int products (``_murmur2_int``, ~1.6 µs).
"""

from __future__ import annotations

from typing import Final

try:  # mypy_extensions comes with mypy, which builds the accelerator
    from mypy_extensions import i64
except ImportError:  # interpreted without mypy installed: i64 is only an annotation
    i64 = int  # type: ignore[misc]

_M: Final = 0x5BD1E995
_M_LOW: Final[i64] = 0xE995  # _M in 16-bit halves: x * _M_LOW and x * _M_HIGH fit in 48 bits
_M_HIGH: Final[i64] = 0x5BD1
_SEED: Final = 0x9747B28C
_MASK: Final = 0xFFFFFFFF
_COMPILED: Final = not __file__.endswith(".py")


def murmur2(data: bytes) -> int:
    """The 32-bit murmur2 hash of ``data`` as Java computes it (a signed int)."""
    return _murmur2_i64(data) if _COMPILED else _murmur2_int(data)


def _mul(x: i64) -> i64:
    """``(x * 0x5BD1E995) & 0xFFFFFFFF`` for 0 <= x < 2**32, without a 64-bit product."""
    return (x * _M_LOW + (((x * _M_HIGH) & 0xFFFF) << 16)) & 0xFFFFFFFF


def _murmur2_i64(data: bytes) -> int:
    length: i64 = len(data)
    h: i64 = (0x9747B28C ^ length) & 0xFFFFFFFF
    end: i64 = length & ~3
    i: i64 = 0
    k: i64
    while i < end:
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = _mul(k)
        k ^= k >> 24
        k = _mul(k)
        h = _mul(h) ^ k
        i += 4
    tail: i64 = length & 3
    if tail:
        if tail == 3:
            h ^= data[end + 2] << 16
        if tail >= 2:
            h ^= data[end + 1] << 8
        h ^= data[end]
        h = _mul(h)
    h ^= h >> 13
    h = _mul(h)
    h ^= h >> 15
    return int(h - 0x100000000 if h & 0x80000000 else h)


def _murmur2_int(data: bytes) -> int:
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
