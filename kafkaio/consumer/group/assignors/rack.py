"""Rack awareness for the built-in assignors (KIP-881): replica racks, when they matter, and a
placement that puts as many partitions as balance allows on members in a replica's rack.

Pure functions; the group leader builds the racks map from its metadata snapshot.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kafkaio.consumer.group.assignors.base import Assignments, ConsumerPartitionAssignor
from kafkaio.consumer.group.consumer_protocol import Subscription
from kafkaio.metadata.cluster import ClusterMetadata, TopicPartition

PartitionRacks = Mapping[TopicPartition, frozenset[str]]
"""The racks hosting a replica of each partition; a partition left out has no known rack."""

K = TypeVar("K", bound=Hashable)


def partition_racks(
    cluster: ClusterMetadata, topics: Iterable[str]
) -> dict[TopicPartition, frozenset[str]]:
    """Racks of every replica (offline and out-of-sync ones too, as Java: they are expected
    back soon, and consumers do not rebalance on ISR changes) of the topics' partitions.
    Partitions none of whose replicas has a known rack are left out."""
    out: dict[TopicPartition, frozenset[str]] = {}
    for topic in topics:
        info = cluster.topics.get(topic)
        if info is None:
            continue
        for p in info.partitions:
            racks = set()
            for node_id in p.replicas:
                broker = cluster.broker(node_id)
                if broker is not None and broker.rack:
                    racks.add(broker.rack)
            if racks:
                out[TopicPartition(topic, p.partition)] = frozenset(racks)
    return out


def member_racks(subscriptions: Mapping[str, Subscription]) -> dict[str, str]:
    """The rack of every member that sent a non-empty ``rack_id``."""
    return {m: s.rack_id for m, s in subscriptions.items() if s.rack_id}


def rack_aware_needed(
    member_racks: Iterable[str | None], racks_per_partition: Iterable[frozenset[str]]
) -> bool:
    """Whether the choice of member can change how many partitions sit far from their
    replicas: some member with a rack lacks a replica of some partition, and either some
    member with a rack has a replica of some partition or some member has no rack (it is
    close to everything, Java's rule). Otherwise the plain assignment is kept.

    Java's rule also skips partitions that all share one rack set; that case still decides
    which members get the extra partitions, so it counts here.
    """
    racks = list(member_racks)
    racked = frozenset(r for r in racks if r)
    if not racked:
        return False
    sets = list(racks_per_partition)
    if all(racked <= s for s in sets):
        return False
    return any(not r for r in racks) or any(not racked.isdisjoint(s) for s in sets)


def mismatched(rack: str | None, racks: frozenset[str] | None) -> bool:
    """A member with a rack holds a partition with no replica in that rack (a member without
    a rack never mismatches)."""
    return rack is not None and (racks is None or rack not in racks)


def assign_with_racks(
    assignor: ConsumerPartitionAssignor,
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    partition_racks: PartitionRacks,
) -> Assignments:
    """Run the assignor, handing it the replica racks when it takes them and some are known."""
    if partition_racks and accepts_racks(assignor):
        assign = assignor.assign
        return assign(  # type: ignore[call-arg]
            partitions_per_topic, subscriptions, partition_racks=partition_racks
        )
    return assignor.assign(partitions_per_topic, subscriptions)


def accepts_racks(assignor: object) -> bool:
    """The assignor's ``assign`` takes ``partition_racks`` (built-ins do; third-party ones
    written against the two-argument interface are called without it)."""
    assign = getattr(assignor, "assign", None)
    if assign is None:
        return False
    try:
        params = inspect.signature(assign).parameters
    except (TypeError, ValueError):
        return False
    return "partition_racks" in params or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
    )


@dataclass(slots=True)
class Quotas:
    """Balanced shares of ``total`` items among members: every member ends with ``minimum``
    or ``minimum + 1``, and ``extra_left`` more members may still reach ``minimum + 1``.

    As long as every hand-out respects `room`, the free items always equal the room left,
    so any sequence of hand-outs ends balanced and complete.
    """

    counts: dict[str, int]
    minimum: int
    extra_left: int

    @classmethod
    def even(cls, members: Iterable[str], total: int) -> Quotas:
        counts = dict.fromkeys(members, 0)
        if not counts:
            return cls(counts, 0, 0)
        minimum, extra = divmod(total, len(counts))
        return cls(counts, minimum, extra)

    def room(self, member: str) -> int:
        limit = self.minimum + (1 if self.extra_left > 0 else 0)
        return max(0, limit - self.counts[member])

    def base_room(self, member: str) -> int:
        """Room without using one of the extra slots."""
        return max(0, self.minimum - self.counts[member])

    def take(self, member: str, n: int = 1) -> None:
        before = self.counts[member]
        self.counts[member] = before + n
        if before <= self.minimum < before + n:
            self.extra_left -= 1


_ANY = ""  # the "rack" of members without one: a partition is never remote to them


def rack_aligned_placement(
    units: Sequence[K],
    racks_of: Mapping[K, frozenset[str]],
    members: Sequence[str],
    rack_of: Mapping[str, str],
    quotas: Quotas,
) -> dict[K, str]:
    """Place as many ``units`` as ``quotas`` (updated) allow where they are not remote: on a
    member in one of the unit's racks, or on a member without a rack (Java's rule: such a
    member matches every partition). The rest is left for the caller to deal out.

    The most units that fit is a maximum flow: units -> racks that host them -> the room of
    each rack's members (their base room, plus one extra slot per member while extra slots
    last). Units with the same rack set are interchangeable, so the network has one node per
    distinct rack set and per rack, and stays tiny whatever the partition count. Within a
    rack, units go in order to members in ``members`` order (ranges stay contiguous).
    """
    by_rack: dict[str, list[str]] = {}
    for member in members:
        by_rack.setdefault(rack_of.get(member) or _ANY, []).append(member)
    classes: dict[tuple[str, ...], list[K]] = {}
    for unit in units:
        near = (racks_of.get(unit, frozenset()) - {_ANY}) & by_rack.keys()
        if _ANY in by_rack:
            near = near | {_ANY}
        if near:
            classes.setdefault(tuple(sorted(near)), []).append(unit)
    if not classes:
        return {}
    ordered = sorted(classes.items())
    flow = _Flow()
    for i, (reach, group) in enumerate(ordered):
        flow.add("S", ("class", i), len(group))
        for rack in reach:
            flow.add(("class", i), ("rack", rack), len(group))
    for rack, rack_members in by_rack.items():
        flow.add(("rack", rack), "T", sum(quotas.base_room(m) for m in rack_members))
        extra_capable = sum(1 for m in rack_members if quotas.counts[m] <= quotas.minimum)
        flow.add(("rack", rack), "X", extra_capable)
    flow.add("X", "T", quotas.extra_left)
    flow.maximise("S", "T")
    # units of each class, split among racks by the flow, then per rack among its members
    on_rack: dict[str, list[K]] = {}
    for i, (reach, group) in enumerate(ordered):
        pending = iter(group)
        for rack in reach:
            n = flow.flow(("class", i), ("rack", rack))
            on_rack.setdefault(rack, []).extend(next(pending) for _ in range(n))
    order = {unit: i for i, unit in enumerate(units)}
    placed: dict[K, str] = {}
    for rack, rack_units in on_rack.items():
        rack_units.sort(key=order.__getitem__)
        queue = deque(rack_units)
        rack_members = by_rack[rack]
        shares = {m: quotas.base_room(m) for m in rack_members}
        surplus = len(queue) - sum(shares.values())
        for member in rack_members:  # one extra slot each, in member order, if needed
            if surplus <= 0:
                break
            if quotas.counts[member] <= quotas.minimum:
                shares[member] += 1
                surplus -= 1
        for member in rack_members:
            n = min(shares[member], len(queue))
            for _ in range(n):
                placed[queue.popleft()] = member
            if n:
                quotas.take(member, n)
    return placed


Node = Hashable


class _Flow:
    """Integer max flow (Edmonds-Karp) on a small graph of hashable nodes."""

    __slots__ = ("_cap", "_orig")

    def __init__(self) -> None:
        self._cap: dict[Node, dict[Node, int]] = {}
        self._orig: dict[tuple[Node, Node], int] = {}

    def add(self, a: Node, b: Node, capacity: int) -> None:
        self._cap.setdefault(a, {})
        self._cap.setdefault(b, {})
        self._cap[a][b] = self._cap[a].get(b, 0) + capacity
        self._cap[b].setdefault(a, 0)
        self._orig[(a, b)] = self._orig.get((a, b), 0) + capacity

    def flow(self, a: Node, b: Node) -> int:
        return self._orig.get((a, b), 0) - self._cap[a][b]

    def maximise(self, source: Node, sink: Node) -> int:
        total = 0
        if source not in self._cap or sink not in self._cap:
            return 0
        while True:
            parent: dict[Node, Node] = {source: source}
            queue = deque([source])
            while queue and sink not in parent:
                node = queue.popleft()
                for nxt, cap in self._cap[node].items():
                    if cap > 0 and nxt not in parent:
                        parent[nxt] = node
                        queue.append(nxt)
            if sink not in parent:
                return total
            bottleneck = None
            node = sink
            while node != source:
                prev = parent[node]
                cap = self._cap[prev][node]
                bottleneck = cap if bottleneck is None else min(bottleneck, cap)
                node = prev
            assert bottleneck is not None
            node = sink
            while node != source:
                prev = parent[node]
                self._cap[prev][node] -= bottleneck
                self._cap[node][prev] += bottleneck
                node = prev
            total += bottleneck
