"""RoundRobinAssignor ("roundrobin"): all partitions, sorted, dealt to members in turn.

A member not subscribed to a partition's topic is skipped for that partition (Java semantics).
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkaio.consumer.group.assignors.base import (
    AbstractAssignor,
    Assignments,
    all_subscribed_partitions,
    sorted_members,
)
from kafkaio.consumer.group.consumer_protocol import Subscription


class RoundRobinAssignor(AbstractAssignor):
    """Counts differ by at most one when every member has the same subscription."""

    name = "roundrobin"

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> Assignments:
        result: Assignments = {m: [] for m in subscriptions}
        members = sorted_members(subscriptions)
        if not members:
            return result
        topics = {t for s in subscriptions.values() for t in s.topics}
        cursor = 0
        for tp in all_subscribed_partitions(partitions_per_topic, topics):
            # the next member (circularly) subscribed to this topic; one always exists
            for step in range(len(members)):
                member = members[(cursor + step) % len(members)]
                if tp.topic in subscriptions[member].topics:
                    result[member].append(tp)
                    cursor = (cursor + step + 1) % len(members)
                    break
        return result
