"""RangeAssignor ("range"): per topic, contiguous ranges of partitions to the sorted members.

The first ``partitions % members`` members of a topic get one partition more (Java semantics).
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkaio.consumer.group.assignors.base import AbstractAssignor, Assignments, sorted_members
from kafkaio.consumer.group.assignors.rack import (
    PartitionRacks,
    Quotas,
    member_racks,
    rack_aligned_placement,
    rack_aware_needed,
)
from kafkaio.consumer.group.consumer_protocol import Subscription
from kafkaio.metadata.cluster import TopicPartition


class RangeAssignor(AbstractAssignor):
    """Balanced per topic (counts differ by at most one) but not across topics: with many
    topics the first members get more partitions overall.

    Rack-aware (KIP-881) when ``partition_racks`` is given, members sent a ``rack_id`` and
    some partitions have replicas on only some racks: per topic (or per set of co-partitioned
    topics: same members, same partition count), as many partitions as the per-topic balance
    allows go to members in a replica's rack first; the rest are dealt as ranges. Partition
    ``i`` of co-partitioned topics still goes to one member. Without racks the assignment is
    exactly the classic one.
    """

    name = "range"

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: PartitionRacks | None = None,
    ) -> Assignments:
        result: Assignments = {m: [] for m in subscriptions}
        members = sorted_members(subscriptions)
        topics = sorted({t for s in subscriptions.values() for t in s.topics})
        # topics with the same members and partition count are assigned together
        groups: dict[tuple[tuple[str, ...], int], list[str]] = {}
        for topic in topics:
            count = partitions_per_topic.get(topic, 0)
            consumers = tuple(m for m in members if topic in subscriptions[m].topics)
            if count and consumers:
                groups.setdefault((consumers, count), []).append(topic)
        racks_of_member = member_racks(subscriptions) if partition_racks else {}
        for (consumers, count), group in groups.items():
            quotas = Quotas.even(consumers, count)
            free = list(range(count))
            if racks_of_member:
                racks = partition_racks or {}
                placed = _rack_pass(consumers, count, group, racks_of_member, racks, quotas)
                if placed:
                    for p, member in placed.items():
                        result[member].extend(TopicPartition(t, p) for t in group)
                    free = [p for p in free if p not in placed]
            start = 0
            for member in consumers:
                n = min(quotas.room(member), len(free) - start)
                if n <= 0:
                    continue
                taken = free[start : start + n]
                start += n
                quotas.take(member, n)
                for topic in group:
                    result[member].extend(TopicPartition(topic, p) for p in taken)
        for parts in result.values():  # topic by topic, as the classic order
            parts.sort()
        return result


def _rack_pass(
    consumers: tuple[str, ...],
    count: int,
    topics: list[str],
    racks_of_member: Mapping[str, str],
    partition_racks: PartitionRacks,
    quotas: Quotas,
) -> dict[int, str]:
    """Partition index -> member for the indexes that can sit in a member's rack; empty when
    rack awareness does not apply to these topics."""
    consumer_racks = [racks_of_member.get(m) for m in consumers]
    if not any(
        rack_aware_needed(
            consumer_racks,
            (partition_racks.get(TopicPartition(t, p), frozenset()) for p in range(count)),
        )
        for t in topics
    ):
        return {}
    # co-partitioned topics: index i is local to a rack only if every topic's i is
    racks_of: dict[int, frozenset[str]] = {}
    for p in range(count):
        common: frozenset[str] | None = None
        for t in topics:
            racks = partition_racks.get(TopicPartition(t, p), frozenset())
            common = racks if common is None else common & racks
        if common:
            racks_of[p] = common
    return rack_aligned_placement(list(range(count)), racks_of, consumers, racks_of_member, quotas)
