"""RecordQueue: records collected for getone()/__anext__ but not yet handed to the app.

One buffer collection refills it, so iteration costs no network turn per record.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping
from typing import Any

from kafkaio.consumer.record import ConsumerRecord
from kafkaio.metadata.cluster import TopicPartition

Record = ConsumerRecord[Any, Any]


class RecordQueue:
    """Undelivered records in delivery order (each partition's records stay in order).

    Positions in SubscriptionState have already moved past these records; `first_pending`
    tells where the application really is (for commits), and `discard` drops records of
    partitions that were revoked, sought, reset or paused.

    ``records`` is the queue itself (one deque for the queue's life): iteration's fast path
    takes the next record with ``records.popleft()``, saving a method call per record.
    """

    __slots__ = ("records",)

    def __init__(self) -> None:
        self.records: deque[Record] = deque()

    def __len__(self) -> int:
        return len(self.records)

    def extend(self, batches: Mapping[TopicPartition, list[Record]]) -> None:
        for records in batches.values():
            self.records.extend(records)

    def pop(self, partitions: Collection[TopicPartition] | None = None) -> Record | None:
        """The next record (of `partitions`, when given), or None."""
        records = self.records
        if not records:
            return None
        if partitions is None:
            return records.popleft()
        for i, record in enumerate(records):
            if TopicPartition(record.topic, record.partition) in partitions:
                del records[i]
                return record
        return None

    def take(
        self, limit: int | None, partitions: Collection[TopicPartition] | None = None
    ) -> dict[TopicPartition, list[Record]]:
        """Up to `limit` records (of `partitions`), grouped by partition, in order."""
        out: dict[TopicPartition, list[Record]] = {}
        remaining = len(self.records) if limit is None else limit
        keep: deque[Record] = deque()
        while self.records:
            record = self.records.popleft()
            tp = TopicPartition(record.topic, record.partition)
            if remaining > 0 and (partitions is None or tp in partitions):
                out.setdefault(tp, []).append(record)
                remaining -= 1
            else:
                keep.append(record)
        self._keep(keep)
        return out

    def first_pending(self) -> dict[TopicPartition, Record]:
        """The first undelivered record of each partition that has one."""
        first: dict[TopicPartition, Record] = {}
        for record in self.records:
            first.setdefault(TopicPartition(record.topic, record.partition), record)
        return first

    def discard(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, Record]:
        """Drop the records of `partitions`; returns the first dropped record of each."""
        dropped: dict[TopicPartition, Record] = {}
        if not self.records or not partitions:
            return dropped
        keep: deque[Record] = deque()
        for record in self.records:
            tp = TopicPartition(record.topic, record.partition)
            if tp in partitions:
                dropped.setdefault(tp, record)
            else:
                keep.append(record)
        self._keep(keep)
        return dropped

    def _keep(self, kept: deque[Record]) -> None:
        """Leave only `kept` in the queue (the same deque object stays)."""
        self.records.clear()
        self.records.extend(kept)

    def clear(self) -> None:
        self.records.clear()
