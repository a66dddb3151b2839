"""RecordAccumulator: per-partition queues of batches, readiness, draining and expiry.

Sans-I/O: the application appends, the Sender polls it with the time; nothing here waits.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence

from kafkaio.metadata.cluster import TopicPartition
from kafkaio.producer.batch import NO_SEQUENCE, ProducerBatch
from kafkaio.producer.compression_ratio import CompressionRatios
from kafkaio.producer.future import DeliveryFuture
from kafkaio.producer.memory import MemoryBudget
from kafkaio.records import BatchBuilder, Compression
from kafkaio.records.batch import HEADER_SIZE, iter_batches
from kafkaio.records.builder import Headers

# ProduceRequest bytes besides the batches: header, acks, timeout, topic and partition entries.
REQUEST_OVERHEAD = 128
PER_PARTITION_OVERHEAD = 16
# A full batch keeps taking records until it is drained, up to this many times its limit
# (and never past what one request carries): see RecordAccumulator.
GROWTH = 4


class AppendResult:
    """What ``append`` did: the record's future and batch, its size, and whether to wake the
    sender."""

    __slots__ = ("future", "batch", "size", "new_batch", "batch_full")

    def __init__(
        self,
        future: DeliveryFuture,
        batch: ProducerBatch,
        size: int,
        new_batch: bool,
        batch_full: bool,
    ):
        self.future = future
        self.batch = batch
        self.size = size
        self.new_batch = new_batch
        self.batch_full = batch_full


class RecordAccumulator:
    """Collects records into batches per partition until the Sender drains them.

    A partition's head batch is ready to send when it is full (or followed by another
    batch), when ``linger_ms`` passed since it was created, while a flush or close is in
    progress, or while a producer waits for memory. Batches not sent ``delivery_timeout_ms``
    after they were created expire. Batches to retry go back to the front of their queue,
    ordered by sequence number, and wait ``retry_at_ms``.

    A batch is full (ready) at ``batch_size`` bytes (its ``limit``), but it takes records
    until the Sender drains it, up to ``growth`` (GROWTH) times that (never more than one request
    carries): records the application appends while the network task has not had a turn, or
    while the partition's requests in flight are at their maximum, travel in the batch that
    waits anyway instead of in batches queued behind it, so a request carries more when the
    producer runs ahead of the network (librdkafka forms its batches when it sends, to the
    same effect). A topic whose grown batch a broker refused as too large (MESSAGE_TOO_LARGE)
    stops growing batches.
    """

    def __init__(
        self,
        *,
        batch_size: int,
        compression: Compression,
        linger_ms: float,
        delivery_timeout_ms: float,
        memory: MemoryBudget,
        clock: Callable[[], float] | None = None,
        transactional: bool = False,
        keep_futures: bool = False,
        max_request_size: int = 1024 * 1024,
        growth: int = GROWTH,
    ) -> None:
        if growth < 1:
            raise ValueError(f"growth must be at least 1, got {growth}")
        self.batch_size = batch_size
        self.growth = growth
        # compressed batches fill up to batch_size bytes compressed (estimated, as Java's)
        self.ratios = CompressionRatios(
            compression, batch_size, max_request_size - REQUEST_OVERHEAD - PER_PARTITION_OVERHEAD
        )
        # Batches list their records' futures only when asked (for acknowledgement
        # interceptors): a future refers to its batch, and a batch referring back would make a
        # reference cycle that keeps completed batches alive until the cyclic GC runs.
        self.keep_futures = keep_futures
        self.transactional = transactional  # batches are written with is_transactional set
        self._clock = clock  # read only when a batch is created (see append)
        self.compression = compression
        self.linger_ms = linger_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.memory = memory
        self._deques: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._incomplete: dict[ProducerBatch, None] = {}  # insertion-ordered set
        self._flushes = 0
        self.closing = False
        self._drain_index: dict[int, int] = {}
        # the most uncompressed bytes a batch may grow to (see the class docstring)
        self.max_capacity = max(batch_size, self.ratios.max_batch_bytes)
        self._fixed_topics: set[str] = set()  # refused a grown batch: no growth

    # -- application side ----------------------------------------------------------------

    def append(
        self,
        tp: TopicPartition,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
        now: float | None,
        reserved: int,
    ) -> AppendResult:
        """Append a record (its memory already reserved) to the partition's open batch.

        ``now`` None reads the clock given at construction, and only if a batch is created.
        """
        dq = self._deques.get(tp)
        if dq is None:
            dq = self._deques[tp] = deque()
        key_size = -1 if key is None else len(key)
        value_size = -1 if value is None else len(value)
        if dq:
            batch = dq[-1]
            if not batch.closed:
                size = batch.builder.append(timestamp, key, value, headers)
                if size is not None:
                    index = batch.builder.record_count - 1
                    fut = DeliveryFuture(batch, index, timestamp, key_size, value_size)
                    if self.keep_futures:
                        batch.futures.append(fut)
                    batch.reserved_bytes += reserved
                    full = not batch.full and batch.builder.size_in_bytes() >= batch.limit
                    if full:
                        batch.full = True
                    return AppendResult(fut, batch, size, False, full)
                self.close(batch)
        if now is None:
            assert self._clock is not None, "pass now, or a clock to the constructor"
            now = self._clock()
        limit = self.ratios.batch_limit(tp.topic)
        builder = BatchBuilder(
            compression=self.compression,
            batch_size=self.capacity(tp.topic, limit),
            is_transactional=self.transactional,
        )
        batch = ProducerBatch(tp, builder, now, now + self.delivery_timeout_ms, limit)
        size = builder.append(timestamp, key, value, headers)
        assert size is not None  # the first record always fits
        fut = DeliveryFuture(batch, 0, timestamp, key_size, value_size)
        if self.keep_futures:
            batch.futures.append(fut)
        batch.reserved_bytes = reserved
        dq.append(batch)
        self._incomplete[batch] = None
        full = builder.size_in_bytes() >= limit
        if full:
            batch.full = True
        return AppendResult(fut, batch, size, True, full or len(dq) > 1)

    def capacity(self, topic: str, limit: int) -> int:
        """The uncompressed bytes a new batch of ``topic`` full at ``limit`` may grow to."""
        if topic in self._fixed_topics:
            return limit
        return max(limit, min(limit * self.growth, self.max_capacity))

    def last_batch(self, tp: TopicPartition) -> ProducerBatch | None:
        """The newest batch queued for ``tp`` (open or not), None if none is queued."""
        dq = self._deques.get(tp)
        return dq[-1] if dq else None

    def close(self, batch: ProducerBatch) -> None:
        """``batch`` takes no more records. A compressed one is encoded now, and how well it
        compressed sizes the topic's next batches at once (not only once it is sent: an
        application running ahead of the network queues many batches before that)."""
        batch.closed = True
        self.observe(batch)

    def observe(self, batch: ProducerBatch) -> None:
        """Learn from a compressed ``batch``'s ratio (once per batch, before its first send)."""
        if (
            not self.ratios.compressed
            or batch.observed
            or batch.attempts
            or batch.parent is not None
        ):
            return
        batch.observed = True
        header = HEADER_SIZE
        encoded = len(batch.payload())
        self.ratios.observe(batch.tp.topic, batch.size_in_bytes() - header, encoded - header)

    # -- sender side ---------------------------------------------------------------------

    def ready(
        self, now: float, leader_for: Callable[[TopicPartition], int | None]
    ) -> tuple[dict[int, list[TopicPartition]], float, bool]:
        """Group partitions holding batches by leader, for leaders with a ready partition.

        Returns (node -> partitions with data, ms until the next batch may become ready,
        whether a ready partition has no known leader).
        """
        urgent = self._flushes > 0 or self.closing or self.memory.waiters > 0
        linger = self.linger_ms
        by_node: dict[int, list[TopicPartition]] = {}
        ready_nodes: set[int] = set()
        next_ms = math.inf
        unknown_leader = False
        for tp, dq in self._deques.items():
            if not dq:
                continue
            head = dq[0]
            if head.attempts:
                wait = head.retry_at_ms - now
            elif urgent or head.full or head.closed or len(dq) > 1:
                wait = 0.0
            else:
                wait = head.created_ms + linger - now
            leader = leader_for(tp)
            if leader is None:
                if wait <= 0:
                    unknown_leader = True
                else:
                    next_ms = min(next_ms, wait)
                continue
            by_node.setdefault(leader, []).append(tp)
            if wait <= 0:
                ready_nodes.add(leader)
            else:
                next_ms = min(next_ms, wait)
        return {n: tps for n, tps in by_node.items() if n in ready_nodes}, next_ms, unknown_leader

    def drain(
        self,
        node: int,
        partitions: Sequence[TopicPartition],
        max_request_size: int,
        now: float,
        may_send: Callable[[ProducerBatch], bool],
    ) -> list[ProducerBatch]:
        """Take at most one batch per partition for one ProduceRequest to ``node``.

        Starts where the last drain for the node stopped, so no partition starves; stops
        before the request would exceed ``max_request_size``. ``may_send(batch)`` lets the
        sender hold a batch back (ordering, idempotence); held partitions are skipped.
        """
        count = len(partitions)
        if not count:
            return []
        start = self._drain_index.get(node, 0) % count
        size = REQUEST_OVERHEAD
        out: list[ProducerBatch] = []
        for i in range(count):
            tp = partitions[(start + i) % count]
            dq = self._deques.get(tp)
            if not dq:
                continue
            batch = dq[0]
            if batch.attempts and batch.retry_at_ms > now:
                continue
            encoded = self.ratios.encoded_size(batch.tp.topic, batch.size_in_bytes())
            batch_size = encoded + PER_PARTITION_OVERHEAD
            if out and size + batch_size > max_request_size:
                self._drain_index[node] = (start + i) % count
                return out
            if not may_send(batch):
                continue
            dq.popleft()
            batch.closed = True
            out.append(batch)
            size += batch_size
        self._drain_index[node] = (start + 1) % count
        return out

    def split(self, batch: ProducerBatch, now: float) -> list[ProducerBatch]:
        """Split a drained batch the broker rejected as too large into batches of at most
        ``batch_size`` uncompressed bytes each, queued at the front of its partition in its
        place (with its sequence numbers, if it had them). The topic's compression estimate
        starts over. ``batch`` completes when all its parts have (see ProducerBatch.parts);
        it keeps its reserved memory until then. Needs at least two records.

        A batch within ``batch_size`` (the topic's max.message.bytes is below it) is split in
        halves, so that every split makes progress: down to single records, which the broker
        then accepts or refuses for themselves. (Split by ``batch_size`` alone it came back
        whole, was refused again and split again until its delivery timeout.)"""
        payload = batch.payload()
        uncompressed = batch.size_in_bytes()
        if uncompressed > batch.limit:
            self._fixed_topics.add(batch.tp.topic)  # it grew past its limit: grow no more
        self.ratios.reset(batch.tp.topic, len(payload) / max(1, uncompressed))
        records = [r for b in iter_batches(payload) for r in b]
        assert len(records) > 1, "a batch of one record cannot be split"
        limit = self.batch_size if uncompressed > self.batch_size else max(1, uncompressed // 2)
        parts: list[tuple[int, ProducerBatch]] = []
        builder: BatchBuilder | None = None
        for index, record in enumerate(records):
            if builder is None or (
                builder.append(record.timestamp, record.key, record.value, record.headers)
                is None
            ):
                builder = BatchBuilder(
                    compression=self.compression,
                    batch_size=limit,
                    is_transactional=self.transactional,
                )
                builder.append(record.timestamp, record.key, record.value, record.headers)
                part = ProducerBatch(batch.tp, builder, batch.created_ms, batch.deadline_ms, limit)
                part.closed = True
                part.parent = batch
                parts.append((index, part))
        sequence = batch.base_sequence
        for _, part in parts:
            if sequence != NO_SEQUENCE:
                part.set_producer_state(batch.producer_id, batch.producer_epoch, sequence)
                sequence = (sequence + part.record_count) % (1 << 31)
        batch.parts = parts
        for _, part in reversed(parts):
            self.reenqueue(part, now)
        return [part for _, part in parts]

    def reenqueue(self, batch: ProducerBatch, retry_at_ms: float) -> None:
        """Put a batch back to be retried at ``retry_at_ms``, before newer batches.

        Batches with sequence numbers stay in sequence order (idempotence needs it).
        """
        batch.in_flight = False
        batch.attempts += 1
        batch.retry_at_ms = retry_at_ms
        dq = self._deques.setdefault(batch.tp, deque())
        seq = batch.base_sequence
        index = 0
        if seq != NO_SEQUENCE:
            for index, queued in enumerate(dq):  # noqa: B007 - index used after the loop
                if queued.base_sequence == NO_SEQUENCE or queued.base_sequence > seq:
                    break
            else:
                index = len(dq)
        dq.insert(index, batch)

    def expire(self, now: float) -> list[ProducerBatch]:
        """Remove and return queued batches whose delivery deadline has passed."""
        expired: list[ProducerBatch] = []
        for dq in self._deques.values():
            while dq and dq[0].deadline_ms <= now:
                expired.append(dq.popleft())
        return expired

    def next_deadline_ms(self) -> float:
        """The earliest delivery deadline of a queued batch (math.inf: none queued)."""
        return min((dq[0].deadline_ms for dq in self._deques.values() if dq), default=math.inf)

    def deallocate(self, batch: ProducerBatch) -> None:
        """Forget a completed batch and give its memory back."""
        if batch in self._incomplete:
            del self._incomplete[batch]
            self.memory.release(batch.reserved_bytes)

    def queued_batches(self) -> list[ProducerBatch]:
        """Every batch not drained yet (or waiting to be retried)."""
        return [b for dq in self._deques.values() for b in dq]

    def abort_queued(self) -> list[ProducerBatch]:
        """Remove and return every queued batch (the caller fails them)."""
        out = self.queued_batches()
        for dq in self._deques.values():
            dq.clear()
        return out

    # -- flush ---------------------------------------------------------------------------

    def incomplete(self) -> list[ProducerBatch]:
        """Batches appended and not yet completed (what a flush waits for)."""
        return list(self._incomplete)

    def begin_flush(self) -> None:
        self._flushes += 1

    def end_flush(self) -> None:
        self._flushes -= 1

    @property
    def has_incomplete(self) -> bool:
        return bool(self._incomplete)
