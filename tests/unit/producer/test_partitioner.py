"""The default partitioner: keys by murmur2, keyless records sticky per KIP-794."""

from __future__ import annotations

from collections import Counter

from kafkaio.producer.murmur2 import partition_for_key
from kafkaio.producer.partitioner import DefaultPartitioner

ALL = [0, 1, 2, 3]


class Rng:
    """A random source returning the given values in turn."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def __call__(self) -> float:
        return self.values.pop(0)


def test_keyed_records_use_murmur2_over_all_partitions() -> None:
    p = DefaultPartitioner(batch_size=100)
    for key in (b"a", b"user-17", b"21"):
        # Even when only partition 0 is available, the key keeps its partition.
        assert p.partition("t", key, ALL, [0]) == partition_for_key(key, 4)


def test_sticky_partition_switches_after_batch_size_bytes() -> None:
    p = DefaultPartitioner(batch_size=100, rng=Rng(0.3, 0.0, 0.99))
    first = p.partition("t", None, ALL, ALL)
    assert first == 1  # int(0.3 * 4)
    for _ in range(3):
        assert p.partition("t", None, ALL, ALL) == first
        p.on_append("t", None, first, 30)  # 90 bytes so far: stays
    assert p.sticky_partition("t") == first
    p.on_append("t", None, first, 30)  # 120 >= 100: switch on the next record
    second = p.partition("t", None, ALL, ALL)
    assert second != first
    assert second == 0  # first of [0, 2, 3] (the old partition is excluded)
    for _ in range(4):
        p.on_append("t", None, second, 25)
    third = p.partition("t", None, ALL, ALL)
    assert third == 3 and third != second


def test_sticky_prefers_partitions_with_a_leader() -> None:
    p = DefaultPartitioner(batch_size=10)
    seen = Counter()
    for _ in range(200):
        partition = p.partition("t", None, ALL, [1, 3])
        seen[partition] += 1
        p.on_append("t", None, partition, 10)
    assert set(seen) == {1, 3}


def test_keyed_appends_do_not_move_the_sticky_partition() -> None:
    p = DefaultPartitioner(batch_size=10, rng=Rng(0.5))
    sticky = p.partition("t", None, ALL, ALL)
    p.on_append("t", b"key", sticky, 1000)
    assert p.partition("t", None, ALL, ALL) == sticky


def test_uniform_over_time() -> None:
    p = DefaultPartitioner(batch_size=50)
    counts = Counter()
    for _ in range(4000):
        partition = p.partition("t", None, ALL, ALL)
        counts[partition] += 1
        p.on_append("t", None, partition, 10)
    assert set(counts) == set(ALL)
    assert min(counts.values()) > 4000 / 4 * 0.5


def test_a_larger_share_keeps_the_sticky_partition_longer() -> None:
    """The producer passes its batch limit: larger than batch_size for records that compress
    well, so a compressed batch fills up before the partition switches."""
    p = DefaultPartitioner(batch_size=100, rng=Rng(0.3, 0.0))
    first = p.partition("t", None, ALL, ALL)
    for _ in range(9):
        p.on_append("t", None, first, 30, share=300)  # 270 bytes: stays
    assert p.sticky_partition("t") == first
    p.on_append("t", None, first, 30, share=300)  # 300 >= 300: switch
    assert p.sticky_partition("t") is None
    assert p.partition("t", None, ALL, ALL) != first
