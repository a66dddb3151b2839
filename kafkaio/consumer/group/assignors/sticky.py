"""StickyAssignor ("sticky"): a balanced assignment that moves as few partitions as possible.

Eager members revoke everything before joining, so the previous assignment travels in user data.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kafkaio.consumer.group.assignors.base import (
    AbstractAssignor,
    Assignments,
    all_subscribed_partitions,
)
from kafkaio.consumer.group.assignors.rack import (
    PartitionRacks,
    Quotas,
    member_racks,
    mismatched,
    rack_aligned_placement,
    rack_aware_needed,
)
from kafkaio.consumer.group.consumer_protocol import Assignment, Subscription
from kafkaio.metadata.cluster import TopicPartition

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
NO_GENERATION = -1


@dataclass(frozen=True, slots=True)
class MemberData:
    """What a member owned before this rebalance, and in which generation (None: unknown)."""

    partitions: tuple[TopicPartition, ...]
    generation: int | None


def encode_user_data(partitions: Iterable[TopicPartition], generation: int) -> bytes:
    """The Java StickyAssignor user data (v1): the previous assignment and its generation."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = bytearray(_I32.pack(len(by_topic)))
    for topic, parts in by_topic.items():
        name = topic.encode()
        out += _I16.pack(len(name)) + name + _I32.pack(len(parts))
        out += struct.pack(f">{len(parts)}i", *parts)
    out += _I32.pack(generation)
    return bytes(out)


def decode_user_data(data: bytes) -> MemberData | None:
    """Parse v1 (with a generation) or v0 (without); None if the bytes are not user data."""
    try:
        pos = 0
        (count,) = _I32.unpack_from(data, pos)
        pos += 4
        if count < 0:
            return None
        parts: list[TopicPartition] = []
        for _ in range(count):
            (n,) = _I16.unpack_from(data, pos)
            pos += 2
            if n < 0 or pos + n > len(data):
                return None
            topic = data[pos : pos + n].decode()
            pos += n
            (k,) = _I32.unpack_from(data, pos)
            pos += 4
            if k < 0 or pos + 4 * k > len(data):
                return None
            parts.extend(TopicPartition(topic, p) for p in struct.unpack_from(f">{k}i", data, pos))
            pos += 4 * k
        if pos == len(data):
            return MemberData(tuple(parts), None)  # v0
        (generation,) = _I32.unpack_from(data, pos)
        return MemberData(tuple(parts), generation)
    except (struct.error, UnicodeDecodeError):
        return None


def member_data(sub: Subscription) -> MemberData:
    """User data when present (eager members), else the subscription's owned partitions."""
    if sub.user_data:
        decoded = decode_user_data(sub.user_data)
        if decoded is not None:
            return decoded
    generation = None if sub.generation == NO_GENERATION else sub.generation
    return MemberData(sub.owned_partitions, generation)


class StickyAssignor(AbstractAssignor):
    """Balanced first, sticky second.

    With identical subscriptions every member ends with ``floor`` or ``ceil`` of
    partitions/members, keeping as many of its previous partitions as that allows. With
    different subscriptions, partitions go only to subscribed members, and the result is
    balanced in the sense that no partition could move to an eligible member holding two or
    more fewer partitions. A partition claimed by several members goes to the claim of the
    highest generation; a tie between claims drops them all.

    Rack-aware (KIP-881) when ``partition_racks`` is given, members sent a ``rack_id`` and
    some partitions have replicas on only some racks. Balance still comes first, then rack
    alignment, then stickiness: a member keeps only previous partitions with a replica in its
    rack. With identical subscriptions the free partitions are then placed so that as many
    as the quotas allow sit in a replica's rack (a maximum matching); with different
    subscriptions placement prefers rack-local members among the least loaded, and
    partitions are swapped between members while that aligns more of them.
    """

    name = "sticky"

    def __init__(self) -> None:
        self._previous: tuple[TopicPartition, ...] | None = None
        self._generation = NO_GENERATION

    # -- member side ---------------------------------------------------------------------

    def subscription_user_data(self, topics: frozenset[str]) -> bytes | None:
        if self._previous is None:
            return None
        return encode_user_data(self._previous, self._generation)

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self._previous = assignment.partitions
        self._generation = generation

    # -- leader side ---------------------------------------------------------------------

    def _member_data(self, sub: Subscription) -> MemberData:
        return member_data(sub)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: PartitionRacks | None = None,
    ) -> Assignments:
        members = sorted(subscriptions)
        if not members:
            return {}
        topics_of = {m: frozenset(subscriptions[m].topics) for m in members}
        all_topics = frozenset().union(*topics_of.values())
        partitions = all_subscribed_partitions(partitions_per_topic, all_topics)
        owned = _resolve_ownership(
            subscriptions, topics_of, partitions_per_topic, self._member_data
        )
        racks = _rack_view(subscriptions, partitions, partition_racks)
        if len(set(topics_of.values())) == 1:
            return _assign_identical(members, partitions, owned, racks)
        eligible = {t: [m for m in members if t in topics_of[m]] for t in all_topics}
        return _assign_general(members, partitions, owned, eligible, racks)


@dataclass(frozen=True, slots=True)
class _Racks:
    """Member and partition racks of one rebalance that uses rack-aware assignment."""

    of_member: Mapping[str, str]
    of_partition: PartitionRacks

    def mismatch(self, member: str, tp: TopicPartition) -> bool:
        return mismatched(self.of_member.get(member), self.of_partition.get(tp))

    def local(self, member: str, tp: TopicPartition) -> bool:
        rack = self.of_member.get(member)
        return rack is not None and rack in self.of_partition.get(tp, frozenset())


def _rack_view(
    subscriptions: Mapping[str, Subscription],
    partitions: list[TopicPartition],
    partition_racks: PartitionRacks | None,
) -> _Racks | None:
    if not partition_racks:
        return None
    of_member = member_racks(subscriptions)
    empty: frozenset[str] = frozenset()
    if not rack_aware_needed(
        (of_member.get(m) for m in subscriptions),
        (partition_racks.get(tp, empty) for tp in partitions),
    ):
        return None
    return _Racks(of_member, partition_racks)


def _resolve_ownership(
    subscriptions: Mapping[str, Subscription],
    topics_of: Mapping[str, frozenset[str]],
    partitions_per_topic: Mapping[str, int],
    read: Callable[[Subscription], MemberData] = member_data,
) -> dict[str, list[TopicPartition]]:
    """Each member's still-valid previous partitions; conflicts go to the newest generation."""
    claims: dict[TopicPartition, list[tuple[int, str]]] = {}
    for member in sorted(subscriptions):
        data = read(subscriptions[member])
        generation = NO_GENERATION if data.generation is None else data.generation
        for tp in set(data.partitions):
            if tp.topic not in topics_of[member]:
                continue
            if not 0 <= tp.partition < partitions_per_topic.get(tp.topic, 0):
                continue
            claims.setdefault(tp, []).append((generation, member))
    owned: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
    for tp, claimants in claims.items():
        best = max(g for g, _ in claimants)
        winners = [m for g, m in claimants if g == best]
        if len(winners) == 1:
            owned[winners[0]].append(tp)
    for parts in owned.values():
        parts.sort()
    return owned


def _assign_identical(
    members: list[str],
    partitions: list[TopicPartition],
    owned: Mapping[str, list[TopicPartition]],
    racks: _Racks | None = None,
) -> Assignments:
    quotas = Quotas.even(members, len(partitions))
    result: Assignments = {m: [] for m in members}
    taken: set[TopicPartition] = set()
    keepable = owned
    if racks is not None:  # only previous partitions in the member's rack are kept
        keepable = {m: [tp for tp in owned[m] if not racks.mismatch(m, tp)] for m in members}
    # members that owned the most keep the few "minimum + 1" slots first
    for member in sorted(members, key=lambda m: (-len(keepable[m]), m)):
        keep = keepable[member][: quotas.room(member)]
        quotas.take(member, len(keep))
        result[member] = list(keep)
        taken.update(keep)
    free = [tp for tp in partitions if tp not in taken]
    if racks is not None:
        placed = rack_aligned_placement(free, racks.of_partition, members, racks.of_member, quotas)
        for tp, member in placed.items():
            result[member].append(tp)
        free = [tp for tp in free if tp not in placed]
        # partitions no rack-local member could take go back to their owner if it has room
        previous = {tp: m for m, parts in owned.items() for tp in parts}
        rest = []
        for tp in free:
            owner = previous.get(tp)
            if owner is not None and quotas.room(owner) > 0:
                result[owner].append(tp)
                quotas.take(owner)
            else:
                rest.append(tp)
        free = rest
    pending = iter(free)
    for member in members:
        while quotas.counts[member] < quotas.minimum:
            result[member].append(next(pending))
            quotas.take(member)
    for member in members:
        if quotas.extra_left == 0:
            break
        if quotas.counts[member] == quotas.minimum:
            result[member].append(next(pending))
            quotas.take(member)
    if racks is not None:
        for parts in result.values():
            parts.sort()
    return result


def _assign_general(
    members: list[str],
    partitions: list[TopicPartition],
    owned: Mapping[str, list[TopicPartition]],
    eligible: Mapping[str, list[str]],
    racks: _Racks | None = None,
) -> Assignments:
    if racks is not None:  # give up a previous partition a rack-local member could take
        owned = {
            m: [
                tp
                for tp in parts
                if not racks.mismatch(m, tp)
                or not any(racks.local(o, tp) for o in eligible[tp.topic])
            ]
            for m, parts in owned.items()
        }
    result: Assignments = {m: list(owned[m]) for m in members}
    previous = {tp: m for m, parts in owned.items() for tp in parts}

    def far(member: str, tp: TopicPartition) -> bool:
        return racks is not None and racks.mismatch(member, tp)

    def local_count(tp: TopicPartition) -> int:
        return 0 if racks is None else sum(racks.local(m, tp) for m in eligible[tp.topic])

    # partitions with the fewest candidate members (rack-local ones next) first, so they
    # find room
    free = sorted(
        (tp for tp in partitions if tp not in previous),
        key=lambda tp: (len(eligible[tp.topic]), local_count(tp), tp),
    )
    for tp in free:
        target = min(eligible[tp.topic], key=lambda m: (len(result[m]), far(m, tp), m))
        result[target].append(tp)
    # move single partitions from fuller to emptier eligible members until none can move;
    # each move lowers the sum of squared counts, so this ends
    while True:
        move = _find_move(members, result, previous, eligible, far)
        if move is None:
            break
        tp, donor, target = move
        result[donor].remove(tp)
        result[target].append(tp)
    if racks is not None:
        _swap_for_racks(members, result, eligible, racks)
    for parts in result.values():
        parts.sort()
    return result


def _find_move(
    members: list[str],
    result: Assignments,
    previous: Mapping[TopicPartition, str],
    eligible: Mapping[str, list[str]],
    far: Callable[[str, TopicPartition], bool],
) -> tuple[TopicPartition, str, str] | None:
    for donor in sorted(members, key=lambda m: (-len(result[m]), m)):
        size = len(result[donor])
        # move rack-remote, then newly assigned partitions before ones the donor owned
        for tp in sorted(
            result[donor], key=lambda tp: (not far(donor, tp), previous.get(tp) == donor, tp)
        ):
            candidates = [m for m in eligible[tp.topic] if len(result[m]) <= size - 2]
            if candidates:
                target = min(candidates, key=lambda m: (far(m, tp), len(result[m]), m))
                return tp, donor, target
    return None


def _swap_for_racks(
    members: list[str],
    result: Assignments,
    eligible: Mapping[str, list[str]],
    racks: _Racks,
) -> None:
    """Swap partitions between two members while that puts more of them in a replica's rack.

    Counts do not change; a swap is made only if neither partition could then move to an
    eligible member holding two or more fewer partitions, so the balance guarantee holds.
    Every swap removes at least one rack mismatch, so this ends.
    """
    size = {m: len(result[m]) for m in members}
    least = {t: min(size[m] for m in ms) for t, ms in eligible.items() if ms}
    # topics whose partitions may move onto a member without breaking the balance guarantee
    takes = {
        m: {t for t, ms in eligible.items() if m in ms and least[t] >= size[m] - 1} for m in members
    }
    by_rack: dict[str, list[str]] = {}
    for m in members:
        rack = racks.of_member.get(m)
        if rack is not None:
            by_rack.setdefault(rack, []).append(m)
    held = {m: set(result[m]) for m in members}
    swapped = True
    while swapped:
        swapped = False
        for a in members:
            for tp1 in sorted(tp for tp in held[a] if racks.mismatch(a, tp)):
                swap = _find_swap(a, tp1, held, racks, takes, by_rack)
                if swap is None:
                    continue
                b, tp2 = swap
                held[a].remove(tp1)
                held[b].remove(tp2)
                held[a].add(tp2)
                held[b].add(tp1)
                swapped = True
    for m in members:
        result[m] = sorted(held[m])


def _find_swap(
    a: str,
    tp1: TopicPartition,
    held: Mapping[str, set[TopicPartition]],
    racks: _Racks,
    takes: Mapping[str, set[str]],
    by_rack: Mapping[str, list[str]],
) -> tuple[str, TopicPartition] | None:
    """A member ``b`` local to ``tp1`` (remote on ``a``) and a partition of ``b`` to give
    ``a`` in exchange that is remote on ``b`` or local to ``a``."""
    for rack in sorted(racks.of_partition.get(tp1, frozenset())):
        for b in by_rack.get(rack, ()):
            if b == a or tp1.topic not in takes[b]:
                continue
            for tp2 in sorted(held[b]):
                if tp2.topic not in takes[a]:
                    continue
                if racks.mismatch(a, tp2) and not racks.mismatch(b, tp2):
                    continue  # tp2 would go from local on b to remote on a
                return b, tp2
    return None
