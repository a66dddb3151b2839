"""The default partitioner: murmur2 for keyed records, uniform sticky (KIP-794) for the rest.

Sans-I/O: callers pass the partition lists from metadata and, in tests, the random source.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from kafkaio.producer.murmur2 import partition_for_key


class StickyState:
    """A topic's sticky partition for keyless records and the bytes appended to it so far.

    ``partition`` is ``-1 - p`` once ``p`` had its share (switch away from it next time).
    The producer's fast path adds to ``produced_bytes`` itself and calls ``on_append`` (with
    0 bytes) once it reaches ``DefaultPartitioner.batch_size``.
    """

    __slots__ = ("partition", "produced_bytes")

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.produced_bytes = 0


class DefaultPartitioner:
    """Picks a partition the way the Java client's built-in partitioner does.

    A keyed record goes to ``to_positive(murmur2(key)) % len(partitions)`` (all partitions,
    available or not, so a key always maps to the same partition). Records without a key
    stick to one partition until about ``batch_size`` bytes were appended to it, then switch
    to another partition chosen uniformly among those with a known leader (KIP-794): batches
    fill up, and load spreads evenly over time.
    """

    def __init__(self, batch_size: int, rng: Callable[[], float] = random.random) -> None:
        self.batch_size = batch_size
        self._rng = rng
        self._sticky: dict[str, StickyState] = {}

    def partition(
        self,
        topic: str,
        key: bytes | None,
        partitions: Sequence[int],
        available: Sequence[int],
    ) -> int:
        """The partition for a record of ``topic`` (``partitions`` must not be empty)."""
        if key is not None:
            return partitions[partition_for_key(key, len(partitions))]
        sticky = self._sticky.get(topic)
        if sticky is None:
            sticky = self._sticky[topic] = StickyState(self._choose(partitions, available, None))
        elif sticky.partition < 0:  # switch away from the partition that had its share
            sticky.partition = self._choose(partitions, available, -1 - sticky.partition)
        elif sticky.partition >= len(partitions):  # the topic shrank (or metadata was wrong)
            sticky.partition = self._choose(partitions, available, None)
        return sticky.partition

    def on_append(
        self, topic: str, key: bytes | None, partition: int, size: int, share: int | None = None
    ) -> None:
        """Count ``size`` bytes appended to ``partition``; may switch the sticky partition.

        ``share``: the bytes after which to switch (default ``batch_size``; the producer
        passes its batch limit, larger for compressed topics). The next partition is picked
        at the next ``partition`` call, so pass the lists there.
        """
        if key is not None:
            return
        sticky = self._sticky.get(topic)
        if sticky is None or sticky.partition != partition:
            return
        sticky.produced_bytes += size
        if sticky.produced_bytes >= (self.batch_size if share is None else share):
            sticky.produced_bytes = 0
            sticky.partition = -1 - sticky.partition  # marks "switch away from" it

    def _choose(
        self, partitions: Sequence[int], available: Sequence[int], current: int | None
    ) -> int:
        pool = available or partitions
        if current is not None and len(pool) > 1:
            pool = [p for p in pool if p != current]
        return pool[int(self._rng() * len(pool)) % len(pool)]

    def sticky_state(self, topic: str) -> StickyState | None:
        """The live sticky state of ``topic`` (None before its first keyless record)."""
        return self._sticky.get(topic)

    def sticky_partition(self, topic: str) -> int | None:
        """The partition keyless records of ``topic`` currently go to (None: not chosen)."""
        sticky = self._sticky.get(topic)
        return None if sticky is None or sticky.partition < 0 else sticky.partition
