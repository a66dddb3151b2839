"""The ConsumerPartitionAssignor interface and helpers shared by the built-in assignors.

An assignor is pure: the leader hands it partition counts and member subscriptions.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

from kafkaio.consumer.group.consumer_protocol import Assignment, Subscription
from kafkaio.metadata.cluster import TopicPartition

Assignments = dict[str, list[TopicPartition]]


class RebalanceProtocol(enum.Enum):
    """How members give up partitions in a classic group (KIP-429).

    EAGER: every member revokes everything before each rebalance. COOPERATIVE: members keep
    the partitions they still own; only partitions that move are revoked, and moving ones
    reach their new owner in a second rebalance.
    """

    EAGER = "eager"
    COOPERATIVE = "cooperative"


def supported_protocols(assignor: object) -> tuple[RebalanceProtocol, ...]:
    """The protocols an assignor supports (``supported_protocols`` attribute; EAGER if absent,
    as for third-party assignors written before KIP-429)."""
    protocols = getattr(assignor, "supported_protocols", None)
    if not protocols:
        return (RebalanceProtocol.EAGER,)
    return tuple(protocols)


def common_protocol(assignors: Iterable[object]) -> RebalanceProtocol:
    """COOPERATIVE only when every configured assignor supports it (Java's rule: the protocol
    must work with whichever assignor the group picks)."""
    every = [set(supported_protocols(a)) for a in assignors]
    if every and all(RebalanceProtocol.COOPERATIVE in s for s in every):
        return RebalanceProtocol.COOPERATIVE
    return RebalanceProtocol.EAGER


@runtime_checkable
class ConsumerPartitionAssignor(Protocol):
    """A partition assignment strategy of the classic "consumer" protocol.

    ``name`` goes into JoinGroup; the group picks a name every member supports. The leader
    calls `assign` with ``partitions_per_topic`` (partition counts of the topics known in
    metadata) and every member's `Subscription`; it returns the partitions of every member
    (members that get nothing map to an empty list). Every member calls
    `subscription_user_data` when joining and `on_assignment` after each SyncGroup.

    Rack awareness (KIP-881) is opt-in: an ``assign`` that also takes a keyword argument
    ``partition_racks`` (`rack.PartitionRacks`: the racks hosting each partition's replicas)
    receives it when the leader knows any; members' racks are ``Subscription.rack_id``.
    """

    name: str

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> Assignments: ...

    def subscription_user_data(self, topics: frozenset[str]) -> bytes | None: ...

    def on_assignment(self, assignment: Assignment, generation: int) -> None: ...


class AbstractAssignor:
    """Base of the built-in assignors: no user data and nothing to remember by default."""

    name: str = ""
    supported_protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.EAGER,)

    def subscription_user_data(self, topics: frozenset[str]) -> bytes | None:
        return None

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        return None


def member_order_key(member_id: str, sub: Subscription) -> tuple[int, str]:
    """Static members first (by group instance id), then dynamic ones by member id, as Java."""
    if sub.group_instance_id is not None:
        return (0, sub.group_instance_id)
    return (1, member_id)


def sorted_members(subscriptions: Mapping[str, Subscription]) -> list[str]:
    return sorted(subscriptions, key=lambda m: member_order_key(m, subscriptions[m]))


def topic_partitions(topic: str, count: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(count)]


def all_subscribed_partitions(
    partitions_per_topic: Mapping[str, int], topics: Iterable[str]
) -> list[TopicPartition]:
    """Partitions of the given topics that metadata knows, sorted by topic then partition."""
    out: list[TopicPartition] = []
    for topic in sorted(set(topics)):
        out.extend(topic_partitions(topic, partitions_per_topic.get(topic, 0)))
    return out
