"""murmur2 and the key -> partition mapping against values computed by Kafka's Java client."""

from __future__ import annotations

import random

import pytest

from kafkaio.producer.murmur2 import (
    _murmur2_i64,
    _murmur2_int,
    murmur2,
    partition_for_key,
    to_positive,
)

# From Kafka's UtilsTest.testMurmur2 (Java's Utils.murmur2 on the UTF-8 bytes).
JAVA_MURMUR2 = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("data", "expected"), JAVA_MURMUR2)
def test_murmur2_matches_java(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_every_tail_length_is_hashed() -> None:
    # Lengths 0..7 cover all four tail cases twice; each prefix must hash differently.
    data = b"abcdefgh"
    hashes = {murmur2(data[:n]) for n in range(len(data) + 1)}
    assert len(hashes) == len(data) + 1
    assert all(-(2**31) <= h < 2**31 for h in hashes)


def test_to_positive_clears_the_sign_bit_like_java() -> None:
    assert to_positive(-973932308) == -973932308 & 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0  # Math.abs would overflow here
    assert to_positive(5) == 5


def test_partition_for_key() -> None:
    assert partition_for_key(b"21", 10) == (-973932308 & 0x7FFFFFFF) % 10
    assert partition_for_key(b"foobar", 7) == (-790332482 & 0x7FFFFFFF) % 7


@pytest.mark.parametrize("data", [entry[0] for entry in JAVA_MURMUR2])
def test_both_implementations_match_java(data: bytes) -> None:
    """The machine-integer variant (what the compiled build runs) and the big-int variant
    (interpreted) agree with Java's vectors whichever build is loaded."""
    expected = dict(JAVA_MURMUR2)[data]
    assert _murmur2_i64(data) == _murmur2_int(data) == expected


def test_both_implementations_agree_on_random_keys() -> None:
    rng = random.Random(7)
    for n in range(3000):
        data = rng.randbytes(n % 67)
        assert _murmur2_i64(data) == _murmur2_int(data)
