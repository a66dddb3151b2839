"""RangeAssignor ("range"): per topic, contiguous ranges of partitions to the sorted members.

The first ``partitions % members`` members of a topic get one partition more (Java semantics).
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkaio.consumer.group.assignors.base import AbstractAssignor, Assignments, sorted_members
from kafkaio.consumer.group.consumer_protocol import Subscription
from kafkaio.metadata.cluster import TopicPartition


class RangeAssignor(AbstractAssignor):
    """Balanced per topic (counts differ by at most one) but not across topics: with many
    topics the first members get more partitions overall. Rack awareness is not applied."""

    name = "range"

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> Assignments:
        result: Assignments = {m: [] for m in subscriptions}
        members = sorted_members(subscriptions)
        topics = sorted({t for s in subscriptions.values() for t in s.topics})
        for topic in topics:
            count = partitions_per_topic.get(topic, 0)
            consumers = [m for m in members if topic in subscriptions[m].topics]
            if not count or not consumers:
                continue
            per, extra = divmod(count, len(consumers))
            start = 0
            for i, member in enumerate(consumers):
                length = per + (1 if i < extra else 0)
                result[member].extend(
                    TopicPartition(topic, p) for p in range(start, start + length)
                )
                start += length
        return result
