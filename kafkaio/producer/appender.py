"""The per-record path of the producer: route a record to its partition's batch and append it.

``Producer.produce`` and ``Producer.enqueue`` hand every record to `RecordAppender.append`
first. A plain record (bytes value, bytes or no key, no partition or headers given, no
serializers, interceptors, custom partitioner or transaction) whose topic's partitions are
known and whose bytes fit in ``buffer_memory`` is appended there, to an open batch or a new
one; anything else returns None, and the producer's general path (which can wait, and says
what is wrong) takes the record. The general path appends through `RecordAppender.add`, so
both keep the sticky partitioner and the open batches alike.

Compiled with mypyc (kafkaio/_accel_modules.py), as are the classes it touches per record
(DeliveryFuture, ProducerBatch, RecordAccumulator, MemoryBudget, DefaultPartitioner,
BatchBuilder); the .py source is the fallback and behaves the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from kafkaio.metadata.cluster import TopicPartition
from kafkaio.producer.accumulator import RecordAccumulator
from kafkaio.producer.batch import ProducerBatch
from kafkaio.producer.future import DeliveryFuture
from kafkaio.producer.memory import MemoryBudget
from kafkaio.producer.murmur2 import partition_for_key
from kafkaio.producer.partitioner import DefaultPartitioner, StickyState
from kafkaio.records.builder import BatchBuilder, Headers

# The size estimate of a record without headers is this plus the sizes of key and value.
RECORD_OVERHEAD: Final = BatchBuilder.estimate_size_in_bytes(None, b"", None)
MAX_TIMESTAMP: Final = 2**63 - 1  # a record's timestamp is an int64
_time_ns = time.time_ns


class TopicRoute:
    """A topic's partitions as of one metadata snapshot: all of them, those with a leader,
    and their TopicPartitions (``keyed[i]``: where a key hashing to ``i`` goes)."""

    __slots__ = ("version", "partitions", "available", "tps", "keyed")

    def __init__(self, topic: str, version: int, partitions: list[int], available: list[int]):
        self.version = version
        self.partitions = partitions
        self.available = available
        self.tps = {p: TopicPartition(topic, p) for p in partitions}
        self.keyed = [self.tps[p] for p in partitions]


class OpenBatch:
    """Where a topic's keyless records go while nothing changes: the open batch of its
    sticky partition. Unusable once the batch closes (full, drained or failed); dropped
    when the sticky partition has had its share, the metadata changes or the producer
    stops."""

    __slots__ = ("batch", "builder", "sticky", "limit")

    def __init__(self, batch: ProducerBatch, sticky: StickyState) -> None:
        self.batch = batch
        self.builder = batch.builder
        self.sticky = sticky
        self.limit = batch.limit  # the batch's size, and the sticky partition's share


class RecordAppender:
    """Appends records to the accumulator's batches (see the module docstring).

    The producer keeps what it knows current: ``routes`` and ``open`` hold entries only
    while the producer runs, made from the metadata snapshot in use (``clear`` drops them
    when a new one comes, when the producer stops or a fatal error stops it); ``plain`` is
    False when serializers, interceptors, a custom partitioner or transactions send every
    record down the general path. ``on_added(tp, new_batch, full)`` runs when an append
    opened a batch or filled one (the producer wakes its network task);
    ``general(topic, value, key, partition, headers, timestamp_ms)`` is ``produce``'s
    general path.
    """

    def __init__(
        self,
        accumulator: RecordAccumulator,
        partitioner: DefaultPartitioner,
        max_record_size: int,
        plain: bool,
        on_added: Callable[[TopicPartition, bool, bool], None],
        general: Callable[[Any, Any, Any, Any, Any, Any], DeliveryFuture],
    ) -> None:
        self.accumulator = accumulator
        self.memory: MemoryBudget = accumulator.memory
        self.keep_futures = accumulator.keep_futures
        self.partitioner = partitioner
        self.max_record_size = max_record_size
        self.plain = plain
        self.on_added = on_added
        self.general = general
        self.routes: dict[str, TopicRoute] = {}
        self.open: dict[str, OpenBatch] = {}

    def clear(self) -> None:
        """Forget every route and open batch: the next records take the general path (new
        metadata, the producer stopping, a fatal error)."""
        self.routes.clear()
        self.open.clear()

    def produce(
        self,
        topic: Any,
        value: Any = None,
        key: Any = None,
        partition: Any = None,
        headers: Any = None,
        timestamp_ms: Any = None,
    ) -> DeliveryFuture:
        """``Producer.produce``: `append`, else the general path."""
        future = self.append(topic, value, key, partition, headers, timestamp_ms)
        if future is None:
            return self.general(topic, value, key, partition, headers, timestamp_ms)
        return future

    def append(
        self,
        topic: Any,
        value: Any,
        key: Any,
        partition: Any,
        headers: Any,
        timestamp_ms: Any,
    ) -> DeliveryFuture | None:
        """Append a plain record; its future, or None if it is not plain or cannot go in
        without the general path (nothing changed then)."""
        if (
            not self.plain
            or partition is not None
            or headers is not None
            or type(value) is not bytes
        ):
            return None
        if timestamp_ms is None:
            timestamp = -1
        elif type(timestamp_ms) is int and 0 <= timestamp_ms <= MAX_TIMESTAMP:
            timestamp = timestamp_ms
        else:
            return None  # the general path says what is wrong
        route = self.routes.get(topic)
        if route is None:
            return None
        value_size = len(value)
        memory = self.memory
        if key is None:
            size = RECORD_OVERHEAD + value_size
            if size > self.max_record_size or memory.waiters or memory.used + size > memory.limit:
                return None
            if timestamp < 0:
                timestamp = _time_ns() // 1_000_000
            slot = self.open.get(topic)
            if slot is not None:
                batch = slot.batch
                if not batch.closed:
                    builder = slot.builder
                    record_size = builder.append(timestamp, None, value, None)
                    if record_size is not None:
                        future = DeliveryFuture(
                            batch, builder.record_count - 1, timestamp, -1, value_size
                        )
                        if self.keep_futures:
                            batch.futures.append(future)
                        batch.reserved_bytes += size
                        memory.used += size
                        sticky = slot.sticky
                        sticky.produced_bytes += record_size
                        if sticky.produced_bytes >= slot.limit:
                            self._share_done(topic, slot, route)
                        if not batch.full and builder.size_in_bytes() >= slot.limit:
                            batch.full = True
                            self.on_added(batch.tp, False, True)
                        return future
            chosen = self.partitioner.partition(topic, None, route.partitions, route.available)
            memory.used += size
            return self.add(route.tps[chosen], timestamp, None, value, None, size, route, True)
        if type(key) is not bytes:
            return None
        key_size = len(key)
        size = RECORD_OVERHEAD + key_size + value_size
        if size > self.max_record_size or memory.waiters or memory.used + size > memory.limit:
            return None
        if timestamp < 0:
            timestamp = _time_ns() // 1_000_000
        keyed = route.keyed
        tp = keyed[partition_for_key(key, len(keyed))]
        last = self.accumulator.last_batch(tp)
        if last is not None and not last.closed:
            builder = last.builder
            if builder.append(timestamp, key, value, None) is not None:
                future = DeliveryFuture(
                    last, builder.record_count - 1, timestamp, key_size, value_size
                )
                if self.keep_futures:
                    last.futures.append(future)
                last.reserved_bytes += size
                memory.used += size
                if not last.full and builder.size_in_bytes() >= last.limit:
                    last.full = True
                    self.on_added(tp, False, True)
                return future
        memory.used += size
        return self.add(tp, timestamp, key, value, None, size, None, False)

    def add(
        self,
        tp: TopicPartition,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
        reserved: int,
        sticky_route: TopicRoute | None,
        open_batch: bool,
    ) -> DeliveryFuture:
        """Append a record whose ``reserved`` bytes of memory are reserved to ``tp``'s open
        batch, or a new one. ``sticky_route``: the record has no key and went where the
        sticky partitioner said (with that route): count its bytes there, and with
        ``open_batch`` let the next keyless records of the topic go to this batch."""
        result = self.accumulator.append(tp, timestamp, key, value, headers, None, reserved)
        if sticky_route is not None:
            topic, partition = tp
            partitioner = self.partitioner
            partitioner.on_append(topic, None, partition, result.size, result.batch.limit)
            sticky = partitioner.sticky_state(topic)
            if sticky is not None and sticky.partition < 0:
                # it had its share: pick the next partition now, from this metadata (as the
                # Java client does, and as `_share_done` does)
                partitioner.partition(
                    topic, None, sticky_route.partitions, sticky_route.available
                )
            batch = result.batch
            if (
                open_batch
                and not batch.closed
                and sticky is not None
                and sticky.partition == partition
                and self.routes.get(topic) is sticky_route
            ):
                self.open[topic] = OpenBatch(batch, sticky)
            else:
                self.open.pop(topic, None)
        if result.new_batch or result.batch_full:
            self.on_added(tp, result.new_batch, result.batch_full)
        return result.future

    def _share_done(self, topic: str, slot: OpenBatch, route: TopicRoute) -> None:
        """The sticky partition had its share: the partitioner picks the next one now. The
        slot stays only if that is the same partition (e.g. a topic with one partition);
        else the next keyless record starts a batch of the new one."""
        partitioner = self.partitioner
        partition = slot.batch.tp.partition
        partitioner.on_append(topic, None, partition, 0, slot.limit)
        if partitioner.partition(topic, None, route.partitions, route.available) != partition:
            del self.open[topic]
