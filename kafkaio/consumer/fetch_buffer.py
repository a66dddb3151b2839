"""Completed fetches waiting for the application, and the collector that hands records out.

Record blobs are decoded lazily on the application side, batch by batch, as records are
taken; positions advance only when records are handed out (read_committed filtering here).
"""

from __future__ import annotations

import heapq
import struct
from collections import deque
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

from kafkaio.consumer.record import (
    ConsumerRecord,
    deserialized_records,
    identity,
    records_from_tuples,
)
from kafkaio.consumer.subscription import FetchState, SubscriptionState
from kafkaio.errors import CorruptRecordError, KafkaError, RecordDeserializationError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.records import LegacyRecordBatch, RecordBatch, iter_batches
from kafkaio.records.batch import MIN_RECORD_SIZE, RecordCursor
from kafkaio.records.legacy import LegacyCursor, ListCursor
from kafkaio.records.record import ControlRecordType, RecordTuple

Batch = RecordBatch | LegacyRecordBatch


Deserializers = tuple[Callable[["bytes | None"], Any], Callable[["bytes | None"], Any]]

_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length (every magic)
_LAST_DELTA = struct.Struct(">i")  # magic 2: last offset delta at byte 23
_LEADER_EPOCH = struct.Struct(">i")  # magic 2: partition leader epoch at byte 12
_MAGIC_AT = 16
# Records decoded from a batch at a time: a batch of millions of tiny records (a compressed
# batch can hold 64 MiB of 7-byte records) is decoded as records are taken, never at once.
DECODE_CHUNK = 4096


def next_offset_after(records: bytes | bytearray | memoryview) -> int | None:
    """The offset after the last whole batch of a fetched records blob (headers only, no
    decoding); None when the blob holds no whole batch. A fetch of the same partition from
    this offset continues exactly where the blob ends (a trailing partial batch included)."""
    return _scan_end(records)[0]


def _scan_end(records: bytes | bytearray | memoryview) -> tuple[int | None, int | None]:
    """(offset after the last whole batch, that batch's partition leader epoch): headers
    only. The epoch is None for v0/v1 batches, batches without one, or no whole batch."""
    end = len(records)
    pos = 0
    last = -1
    epoch = -1
    while pos + 27 <= end:
        base, length = _BATCH_HEAD.unpack_from(records, pos)
        stop = pos + 12 + length
        if length < 0 or stop > end:
            break
        if records[pos + _MAGIC_AT] >= 2:
            last = base + _LAST_DELTA.unpack_from(records, pos + 23)[0]
            epoch = _LEADER_EPOCH.unpack_from(records, pos + 12)[0]
        else:  # v0/v1: the (wrapper) message's offset is its last offset
            last = base
            epoch = -1
        pos = stop
    if last < 0:
        return None, None
    return last + 1, (None if epoch < 0 else epoch)


@dataclass(slots=True, eq=False)
class CompletedFetch:
    """One partition's records blob from one Fetch response, consumed incrementally.

    ``next_fetch_offset`` is the offset after the last record handed out (or skipped: control
    batches, aborted transactions, records below the fetch offset); the position follows it.
    ``aborted`` holds (producer_id, first_offset) pairs from the response (read_committed).
    Batches decode to plain tuples (``record_tuples``); ConsumerRecords are built only for
    records handed out.
    """

    tp: TopicPartition
    fetch_offset: int
    records: bytes | bytearray | memoryview
    aborted: list[tuple[int, int]] | None = None
    size: int = 0
    next_fetch_offset: int = field(init=False)
    last_epoch: int | None = field(default=None, init=False)
    exhausted: bool = field(default=False, init=False)
    _batches: Iterator[Batch] | None = field(default=None, init=False, repr=False)
    _cursor: RecordCursor | ListCursor | LegacyCursor | None = field(
        default=None, init=False, repr=False
    )
    _current: list[RecordTuple] = field(default_factory=list, init=False, repr=False)
    _index: int = field(default=0, init=False, repr=False)
    _batch_next: int = field(default=0, init=False, repr=False)
    _ts_type: int = field(default=0, init=False, repr=False)
    _epoch: int | None = field(default=None, init=False, repr=False)
    _aborted_pids: set[int] = field(default_factory=set, init=False, repr=False)
    _aborted_heap: list[tuple[int, int]] = field(default_factory=list, init=False, repr=False)
    end_offset: int | None = field(default=None, init=False)
    # leader epoch of the record before end_offset (the last whole batch's), None if unknown
    end_epoch: int | None = field(default=None, init=False)

    @property
    def record_budget(self) -> int:
        """Records one unbounded take (max_poll_records=None) hands out: as many as this
        fetch's bytes could hold uncompressed (at least DECODE_CHUNK), so compression cannot
        multiply the objects made from a fetch; the rest comes out in the next takes."""
        return max(self.size // MIN_RECORD_SIZE, DECODE_CHUNK)

    def __post_init__(self) -> None:
        self.next_fetch_offset = self.fetch_offset
        if not self.size:
            self.size = len(self.records)
        end, epoch = _scan_end(self.records)
        self.end_offset = None if end is None else max(end, self.fetch_offset)
        if end is not None and end >= self.fetch_offset:
            self.end_epoch = epoch
        if self.aborted:  # (first_offset, producer_id), smallest first offset on top
            self._aborted_heap = [(first, pid) for pid, first in self.aborted]
            heapq.heapify(self._aborted_heap)

    def take(
        self,
        max_records: int,
        deserializers: Deserializers | None,
        *,
        read_committed: bool,
        check_crcs: bool = True,
    ) -> list[ConsumerRecord[Any, Any]]:
        """Up to `max_records` records from the current position, decoding batches as needed;
        `deserializers` (key, value) apply to each one handed out (None: raw keys and values).

        Bad data (CorruptRecordError, naming topic, partition and offset; the fetch is then
        exhausted) or a deserializer that raises (RecordDeserializationError) ends the take:
        the records before the bad one are returned, and the error is raised by the next
        take (or, for a corrupt batch, by the take of the fetch that starts there), so the
        position stays at the bad record and none before it is lost.
        """
        out: list[ConsumerRecord[Any, Any]] = []
        try:
            self._take(out, max_records, deserializers, read_committed, check_crcs)
        except KafkaError:
            if not out:
                raise
        return out

    def _take(
        self,
        out: list[ConsumerRecord[Any, Any]],
        max_records: int,
        deserializers: Deserializers | None,
        read_committed: bool,
        check_crcs: bool,
    ) -> None:
        topic, partition = self.tp
        while len(out) < max_records:
            current = self._current
            index = self._index
            if index < len(current):
                end = min(len(current), index + max_records - len(out))
                if deserializers is None:  # the hot path: compiled by `make accel`
                    out.extend(
                        records_from_tuples(
                            topic, partition, current, index, end, self._ts_type, self._epoch
                        )
                    )
                else:
                    try:
                        out.extend(self._deserialized(index, end, deserializers))
                    except Exception:
                        self._deserialize_until_failure(out, index, end, deserializers)
                self._index = end
                self.next_fetch_offset = current[end - 1][0] + 1
                self.last_epoch = self._epoch
                if end == len(current) and self._cursor is None:
                    self.next_fetch_offset = max(self.next_fetch_offset, self._batch_next)
                continue
            if self._cursor is not None:
                self._decode_more(max_records - len(out))
                continue
            batch = self._next_batch(check_crcs)
            if batch is None:
                break
            self._load(batch, read_committed)

    def _deserialized(
        self, start: int, end: int, deserializers: Deserializers
    ) -> list[ConsumerRecord[Any, Any]]:
        """The current batch's records `start`..`end`, through the deserializers."""
        topic, partition = self.tp
        return deserialized_records(
            topic, partition, self._current, start, end, self._ts_type, self._epoch, *deserializers
        )

    def _deserialize_until_failure(
        self,
        out: list[ConsumerRecord[Any, Any]],
        index: int,
        end: int,
        deserializers: Deserializers,
    ) -> None:
        """A deserializer raised for one of the current batch's records `index`..`end`: hand
        out those before it, leave the fetch at it and raise RecordDeserializationError
        (should every record pass this second time, all of them are handed out)."""
        topic, partition = self.tp
        current = self._current
        for i in range(index, end):
            try:
                out.extend(self._deserialized(i, i + 1, deserializers))
            except Exception as exc:
                self._index = i
                if i > index:
                    self.next_fetch_offset = current[i - 1][0] + 1
                    self.last_epoch = self._epoch
                row = current[i]
                cause: Exception = exc
                try:
                    deserializers[0](row[2])
                    part = "value"
                except Exception as key_exc:
                    part = "key"
                    cause = key_exc
                raise RecordDeserializationError(topic, partition, row[0], part, cause) from cause

    def _next_batch(self, check_crcs: bool) -> Batch | None:
        if self.exhausted:
            return None
        if self._batches is None:
            self._batches = iter_batches(
                self.records,
                topic=self.tp.topic,
                partition=self.tp.partition,
                verify_crc=check_crcs,
            )
        try:
            batch = next(self._batches, None)
        except CorruptRecordError:
            self.exhausted = True
            raise
        if batch is None:
            self.exhausted = True
        return batch

    def _load(self, batch: Batch, read_committed: bool) -> None:
        """Make `batch`'s deliverable records current, or skip the batch."""
        self._current = []
        self._index = 0
        next_offset = batch.next_offset
        if next_offset <= self.next_fetch_offset:
            return  # wholly before the position (compacted or compressed-batch overlap)
        if read_committed and batch.producer_id >= 0:
            aborted = self._aborted_heap
            while aborted and aborted[0][0] <= batch.last_offset:
                self._aborted_pids.add(heapq.heappop(aborted)[1])
            if batch.is_control:
                self._end_transaction(batch)
                self.next_fetch_offset = next_offset
                return
            if batch.is_transactional and batch.producer_id in self._aborted_pids:
                self.next_fetch_offset = next_offset
                return
        if batch.is_control:
            self.next_fetch_offset = next_offset
            return
        try:
            self._cursor = batch.cursor()
        except CorruptRecordError:
            self.exhausted = True
            raise
        self._batch_next = next_offset
        self._ts_type = batch.timestamp_type
        epoch = batch.partition_leader_epoch
        self._epoch = None if epoch < 0 else epoch

    def _decode_more(self, wanted: int) -> None:
        """Make the next records of the current batch current: up to `wanted` (at most
        DECODE_CHUNK), skipping those below the position (a compressed batch that starts
        before it, or compaction's gaps)."""
        cursor = self._cursor
        assert cursor is not None
        try:
            records = cursor.take(min(wanted, DECODE_CHUNK))
        except CorruptRecordError:
            self._cursor = None
            self.exhausted = True
            raise
        start = 0
        if records and records[0][0] < self.next_fetch_offset:
            pos = self.next_fetch_offset
            while start < len(records) and records[start][0] < pos:
                start += 1
        self._current = records
        self._index = start
        if not cursor.remaining:
            self._cursor = None
            if start == len(records):  # every record was removed by compaction or skipped
                self.next_fetch_offset = max(self.next_fetch_offset, self._batch_next)

    def _end_transaction(self, batch: Batch) -> None:
        for record in batch.cursor().take(1):  # a control batch holds one marker
            key = record[2]
            if (
                key is not None
                and len(key) >= 4
                and int.from_bytes(key[2:4], "big") == int(ControlRecordType.ABORT)
            ):
                self._aborted_pids.discard(batch.producer_id)
            break


class FetchBuffer:
    """Completed fetches waiting for the application, in order, per partition.

    Filled by the network task, drained by the collector on the application side. A
    partition may hold several fetches: the fetcher prefetches the next chunk (from
    `next_offset`) while the application works through the current one.
    ``on_data`` is called whenever a fetch is added (the consumer wakes a waiting getmany).
    ``len(buffer)`` counts fetches, so it changes whenever one is used up.
    """

    def __init__(self) -> None:
        self._fetches: dict[TopicPartition, deque[CompletedFetch]] = {}
        self._bytes = 0
        # bytes of the fetches used up so far (their records handed out); dropped data
        # (seek, reset, revocation) does not count
        self.used_bytes = 0
        self._count = 0
        self._tp_bytes: dict[TopicPartition, int] = {}
        self.on_data: Callable[[], None] = lambda: None

    @property
    def buffered_bytes(self) -> int:
        return self._bytes

    def bytes_for(self, tp: TopicPartition) -> int:
        """Bytes buffered for one partition."""
        return self._tp_bytes.get(tp, 0)

    def has_data(self, tp: TopicPartition) -> bool:
        return tp in self._fetches

    def partitions(self) -> list[TopicPartition]:
        return list(self._fetches)

    def next_offset(self, tp: TopicPartition) -> int | None:
        """Where a fetch continuing after the buffered data of `tp` starts (None: no data,
        or its end is unknown, e.g. a single batch larger than the fetch)."""
        queue = self._fetches.get(tp)
        return queue[-1].end_offset if queue else None

    def next_offset_epoch(self, tp: TopicPartition) -> int | None:
        """The leader epoch of the record before `next_offset` (the last batch of the
        buffered data of `tp`); None if unknown."""
        queue = self._fetches.get(tp)
        return queue[-1].end_epoch if queue else None

    def add(self, fetch: CompletedFetch) -> None:
        tp = fetch.tp
        queue = self._fetches.get(tp)
        if queue is None:
            queue = self._fetches[tp] = deque()
        queue.append(fetch)
        self._count += 1
        self._bytes += fetch.size
        self._tp_bytes[tp] = self._tp_bytes.get(tp, 0) + fetch.size
        self.on_data()

    def get(self, tp: TopicPartition) -> CompletedFetch | None:
        """The oldest buffered fetch of `tp`."""
        queue = self._fetches.get(tp)
        return queue[0] if queue else None

    def pop(self, tp: TopicPartition) -> None:
        """Forget the oldest fetch of `tp` (used up)."""
        queue = self._fetches.get(tp)
        if not queue:
            return
        fetch = queue.popleft()
        self.used_bytes += fetch.size
        self._forget(tp, fetch.size, 1)
        if not queue:
            del self._fetches[tp]

    def remove(self, tp: TopicPartition) -> None:
        """Drop every buffered fetch of `tp` (seek, reset, revocation)."""
        queue = self._fetches.pop(tp, None)
        if queue:
            self._forget(tp, sum(f.size for f in queue), len(queue))

    def _forget(self, tp: TopicPartition, size: int, count: int) -> None:
        self._bytes -= size
        self._count -= count
        left = self._tp_bytes.get(tp, 0) - size
        if left > 0:
            self._tp_bytes[tp] = left
        else:
            self._tp_bytes.pop(tp, None)

    def retain(self, partitions: Collection[TopicPartition]) -> None:
        """Drop data of partitions no longer assigned."""
        for tp in [tp for tp in self._fetches if tp not in partitions]:
            self.remove(tp)

    def __len__(self) -> int:
        return self._count


class FetchCollector:
    """Hands buffered records to the application as ConsumerRecords and advances positions.

    Runs on the application side, so decoding costs land where records are consumed.
    Data of partitions that are no longer assigned, or whose position moved (seek, reset),
    is dropped; paused partitions keep their data but hand out nothing.
    """

    def __init__(
        self,
        subscriptions: SubscriptionState,
        buffer: FetchBuffer,
        *,
        read_committed: bool = False,
        check_crcs: bool = True,
        key_deserializer: Callable[[bytes | None], Any] = identity,
        value_deserializer: Callable[[bytes | None], Any] = identity,
    ) -> None:
        self._subscriptions = subscriptions
        self._buffer = buffer
        self._read_committed = read_committed
        self._check_crcs = check_crcs
        self._deserializers: Deserializers | None = (
            None
            if key_deserializer is identity and value_deserializer is identity
            else (key_deserializer, value_deserializer)
        )

    def collect(
        self,
        max_records: int | None = None,
        partitions: Collection[TopicPartition] | None = None,
    ) -> dict[TopicPartition, list[ConsumerRecord[Any, Any]]]:
        """Take up to `max_records` records (None: all buffered, but from each fetch at most
        its `record_budget`), optionally only from `partitions`; positions advance past what
        is returned. A bad record (corrupt, or its
        deserializer raised) raises only when nothing was taken before it: else this call
        returns the records taken and the next one raises."""
        remaining = max_records if max_records is not None else 1 << 62
        result: dict[TopicPartition, list[ConsumerRecord[Any, Any]]] = {}
        subs = self._subscriptions
        buffer = self._buffer
        for tp in buffer.partitions():
            if remaining <= 0:
                break
            if partitions is not None and tp not in partitions:
                continue
            if not subs.is_assigned(tp):
                buffer.remove(tp)
                continue
            st = subs.state(tp)
            if st.paused or st.pending_revocation:
                continue  # as Java's FetchCollector: only fetchable partitions hand records out
            out: list[ConsumerRecord[Any, Any]] | None = None
            while remaining > 0:
                fetch = buffer.get(tp)
                if fetch is None:
                    break
                if (
                    st.position is None
                    or st.fetch_state is not FetchState.FETCHING
                    or st.position.offset != fetch.next_fetch_offset
                ):
                    buffer.remove(tp)  # seek or reset since the fetch: stale data
                    break
                try:
                    records = fetch.take(
                        remaining if max_records is not None else fetch.record_budget,
                        self._deserializers,
                        read_committed=self._read_committed,
                        check_crcs=self._check_crcs,
                    )
                except KafkaError:
                    if not (out or result):
                        raise
                    # as Java: hand out what was taken; the next call raises the error
                    if out:
                        result[tp] = out
                    return result
                finally:
                    if fetch.exhausted:
                        buffer.pop(tp)
                if fetch.next_fetch_offset != st.position.offset:
                    subs.advance(tp, fetch.next_fetch_offset, fetch.last_epoch)
                if records:
                    if out is None:
                        out = records
                    else:
                        out.extend(records)
                    remaining -= len(records)
                if not fetch.exhausted:
                    break
            if out:
                result[tp] = out
        return result
