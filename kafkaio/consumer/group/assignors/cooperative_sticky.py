"""CooperativeStickyAssignor ("cooperative-sticky"): the sticky assignment, made safe for KIP-429.

A partition that changes owner is withheld for one rebalance, so its owner revokes it first.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from kafkaio.consumer.group.assignors.base import Assignments, RebalanceProtocol
from kafkaio.consumer.group.assignors.rack import PartitionRacks
from kafkaio.consumer.group.assignors.sticky import NO_GENERATION, MemberData, StickyAssignor
from kafkaio.consumer.group.consumer_protocol import Assignment, Subscription
from kafkaio.metadata.cluster import TopicPartition

_I32 = struct.Struct(">i")


def encode_generation(generation: int) -> bytes:
    """User data of the Java CooperativeStickyAssignor: the member's generation (int32), for
    subscriptions older than v2 that carry no generation field."""
    return _I32.pack(generation)


def decode_generation(data: bytes | None) -> int | None:
    if data is None or len(data) != _I32.size:
        return None
    return int(_I32.unpack(data)[0])


class CooperativeStickyAssignor(StickyAssignor):
    """Sticky and balanced like "sticky", for the cooperative protocol.

    Members report what they own in the subscription (``owned_partitions`` and
    ``generation``), so no user data is needed beyond the generation. After computing the
    sticky target, a partition that some other member still claims is removed from its new
    owner: the claimer revokes it (it is not in the claimer's assignment), rejoins, and the
    next rebalance hands it over. So no partition is ever owned by two members at once.
    """

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def subscription_user_data(self, topics: frozenset[str]) -> bytes | None:
        return encode_generation(self._generation)

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self._generation = generation

    def _member_data(self, sub: Subscription) -> MemberData:
        generation: int | None = sub.generation
        if generation == NO_GENERATION:
            generation = decode_generation(sub.user_data)
        if generation == NO_GENERATION:
            generation = None
        return MemberData(sub.owned_partitions, generation)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: PartitionRacks | None = None,
    ) -> Assignments:
        target = super().assign(partitions_per_topic, subscriptions, partition_racks)
        claims = {m: self._member_data(sub) for m, sub in subscriptions.items()}
        return withhold_transfers(target, claims)


def withhold_transfers(target: Assignments, claims: Mapping[str, MemberData]) -> Assignments:
    """Drop from each member the partitions another member still claims to own.

    Of the claims on a partition, those of the newest generation count (an older claim is
    from a member that was fenced and has already lost it); two such claims both count, so
    neither member gets it until both released it.
    """
    newest: dict[TopicPartition, tuple[int, set[str]]] = {}
    for member, data in claims.items():
        generation = NO_GENERATION if data.generation is None else data.generation
        for tp in data.partitions:
            best = newest.get(tp)
            if best is None or generation > best[0]:
                newest[tp] = (generation, {member})
            elif generation == best[0]:
                best[1].add(member)
    out: Assignments = {}
    for member, parts in target.items():
        out[member] = [tp for tp in parts if not newest.get(tp, (0, set()))[1] - {member}]
    return out
