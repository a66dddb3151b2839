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
        if len(set(topics_of.values())) == 1:
            return _assign_identical(members, partitions, owned)
        eligible = {t: [m for m in members if t in topics_of[m]] for t in all_topics}
        return _assign_general(members, partitions, owned, eligible)


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
) -> Assignments:
    min_quota, extra_slots = divmod(len(partitions), len(members))
    result: Assignments = {m: [] for m in members}
    taken: set[TopicPartition] = set()
    # members that owned the most keep the few "min_quota + 1" slots first
    for member in sorted(members, key=lambda m: (-len(owned[m]), m)):
        keep = owned[member][:min_quota]
        if len(owned[member]) > min_quota and extra_slots > 0:
            keep = owned[member][: min_quota + 1]
            extra_slots -= 1
        result[member] = list(keep)
        taken.update(keep)
    free = iter([tp for tp in partitions if tp not in taken])
    for member in members:
        while len(result[member]) < min_quota:
            result[member].append(next(free))
    for member in members:
        if extra_slots == 0:
            break
        if len(result[member]) == min_quota:
            result[member].append(next(free))
            extra_slots -= 1
    return result


def _assign_general(
    members: list[str],
    partitions: list[TopicPartition],
    owned: Mapping[str, list[TopicPartition]],
    eligible: Mapping[str, list[str]],
) -> Assignments:
    result: Assignments = {m: list(owned[m]) for m in members}
    previous = {tp: m for m, parts in owned.items() for tp in parts}
    # partitions with the fewest candidate members first, so they find room
    free = sorted(
        (tp for tp in partitions if tp not in previous),
        key=lambda tp: (len(eligible[tp.topic]), tp),
    )
    for tp in free:
        target = min(eligible[tp.topic], key=lambda m: (len(result[m]), m))
        result[target].append(tp)
    # move single partitions from fuller to emptier eligible members until none can move;
    # each move lowers the sum of squared counts, so this ends
    while True:
        move = _find_move(members, result, previous, eligible)
        if move is None:
            break
        tp, donor, target = move
        result[donor].remove(tp)
        result[target].append(tp)
    for parts in result.values():
        parts.sort()
    return result


def _find_move(
    members: list[str],
    result: Assignments,
    previous: Mapping[TopicPartition, str],
    eligible: Mapping[str, list[str]],
) -> tuple[TopicPartition, str, str] | None:
    for donor in sorted(members, key=lambda m: (-len(result[m]), m)):
        size = len(result[donor])
        # move newly assigned partitions before ones the donor already owned
        for tp in sorted(result[donor], key=lambda tp: (previous.get(tp) == donor, tp)):
            candidates = [m for m in eligible[tp.topic] if len(result[m]) <= size - 2]
            if candidates:
                target = min(candidates, key=lambda m: (len(result[m]), m))
                return tp, donor, target
    return None
