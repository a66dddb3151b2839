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
    """

    __slots__ = ("_records",)

    def __init__(self) -> None:
        self._records: deque[Record] = deque()

    def __len__(self) -> int:
        return len(self._records)

    def extend(self, batches: Mapping[TopicPartition, list[Record]]) -> None:
        for records in batches.values():
            self._records.extend(records)

    def pop(self, partitions: Collection[TopicPartition] | None = None) -> Record | None:
        """The next record (of `partitions`, when given), or None."""
        records = self._records
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
        remaining = len(self._records) if limit is None else limit
        keep: deque[Record] = deque()
        while self._records:
            record = self._records.popleft()
            tp = TopicPartition(record.topic, record.partition)
            if remaining > 0 and (partitions is None or tp in partitions):
                out.setdefault(tp, []).append(record)
                remaining -= 1
            else:
                keep.append(record)
        self._records = keep
        return out

    def first_pending(self) -> dict[TopicPartition, Record]:
        """The first undelivered record of each partition that has one."""
        first: dict[TopicPartition, Record] = {}
        for record in self._records:
            first.setdefault(TopicPartition(record.topic, record.partition), record)
        return first

    def discard(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, Record]:
        """Drop the records of `partitions`; returns the first dropped record of each."""
        dropped: dict[TopicPartition, Record] = {}
        if not self._records or not partitions:
            return dropped
        keep: deque[Record] = deque()
        for record in self._records:
            tp = TopicPartition(record.topic, record.partition)
            if tp in partitions:
                dropped.setdefault(tp, record)
            else:
                keep.append(record)
        self._records = keep
        return dropped

    def clear(self) -> None:
        self._records.clear()
