"""Rack-aware assignment (KIP-881): range, sticky and cooperative-sticky with replica racks.

Properties (coverage, balance, unchanged without racks, optimal alignment checked by brute
force on small groups), known answers, and the group leader handing racks to the assignor.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kafkaio.consumer.group.assignors import (
    CooperativeStickyAssignor,
    RangeAssignor,
    StickyAssignor,
    assign_with_racks,
    partition_racks,
)
from kafkaio.consumer.group.assignors.rack import Quotas, rack_aligned_placement
from kafkaio.consumer.group.consumer_protocol import Subscription, decode_assignment
from kafkaio.consumer.group.membership import MemberState
from kafkaio.metadata.cluster import BrokerNode, ClusterMetadata, PartitionInfo, TopicInfo
from kafkaio.metadata.cluster import TopicPartition as TP
from kafkaio.protocol import messages as m

from .harness import Group
from .support import only

RACKS = ["a", "b", "c"]
Racks = dict[TP, frozenset[str]]
Group_ = tuple[dict[str, int], dict[str, Subscription], Racks]


@st.composite
def rack_groups(draw: st.DrawFn, identical: bool = False, owned: bool = False) -> Group_:
    topics = ["t0", "t1", "t2"][: draw(st.integers(1, 3))]
    counts = {t: draw(st.integers(0, 8)) for t in topics}
    members = [f"m{i}" for i in range(draw(st.integers(1, 5)))]
    topic_sets = st.sets(st.sampled_from(topics), min_size=1)
    shared = draw(topic_sets)
    subs = {}
    for mid in members:
        mine = sorted(shared if identical else draw(topic_sets))
        held: tuple[TP, ...] = ()
        if owned:
            held = tuple(
                TP(t, p) for t in mine for p in range(counts[t]) if draw(st.integers(0, 3)) == 0
            )
        rack = draw(st.sampled_from([*RACKS, None]))
        subs[mid] = Subscription(tuple(mine), None, held, 1 if held else -1, rack_id=rack)
    racks: Racks = {}
    for t in topics:
        for p in range(counts[t]):
            chosen = draw(st.sets(st.sampled_from(RACKS), max_size=2))
            if chosen:
                racks[TP(t, p)] = frozenset(chosen)
    return counts, subs, racks


def check_valid(counts: dict[str, int], subs: Mapping[str, Subscription], result: Any) -> None:
    assert set(result) == set(subs)
    assigned = Counter(tp for parts in result.values() for tp in parts)
    subscribed = {t for s in subs.values() for t in s.topics}
    assert set(assigned) == {TP(t, p) for t in subscribed for p in range(counts.get(t, 0))}
    assert all(n == 1 for n in assigned.values())
    for member, parts in result.items():
        assert all(tp.topic in subs[member].topics for tp in parts)


def local(subs: Mapping[str, Subscription], racks: Racks, result: Any) -> int:
    """Partitions not remote from their member: it has no rack (Java: matches anything) or
    its rack hosts a replica."""
    return sum(
        1
        for member, parts in result.items()
        for tp in parts
        if aligned(subs[member].rack_id, racks.get(tp, frozenset()))
    )


def aligned(rack: str | None, replica_racks: frozenset[str]) -> bool:
    return rack is None or rack in replica_racks


def check_range_balance(subs: Mapping[str, Subscription], result: Any) -> None:
    for topic in {t for s in subs.values() for t in s.topics}:
        per = [
            sum(tp.topic == topic for tp in result[mid])
            for mid, s in subs.items()
            if topic in s.topics
        ]
        assert max(per) - min(per) <= 1, topic


def check_no_improving_move(subs: Mapping[str, Subscription], result: Any) -> None:
    size = {mid: len(p) for mid, p in result.items()}
    for member, parts in result.items():
        for tp in parts:
            for other, sub in subs.items():
                if tp.topic in sub.topics:
                    assert size[other] >= size[member] - 1, (tp, member, other)


# -- properties ---------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(rack_groups())
def test_range_covers_every_partition_once_and_balances_each_topic(group: Group_) -> None:
    counts, subs, racks = group
    result = RangeAssignor().assign(counts, subs, racks)
    check_valid(counts, subs, result)
    check_range_balance(subs, result)


@settings(max_examples=200, deadline=None)
@given(rack_groups())
def test_range_keeps_co_partitioned_topics_together(group: Group_) -> None:
    counts, subs, racks = group
    result = RangeAssignor().assign(counts, subs, racks)
    owner = {tp: mid for mid, parts in result.items() for tp in parts}
    topics = sorted({t for s in subs.values() for t in s.topics})
    for t1, t2 in itertools.combinations(topics, 2):
        same_members = all((t1 in s.topics) == (t2 in s.topics) for s in subs.values())
        if same_members and counts[t1] == counts[t2]:
            for p in range(counts[t1]):
                assert owner[TP(t1, p)] == owner[TP(t2, p)]


@settings(max_examples=200, deadline=None)
@given(rack_groups(owned=True))
def test_sticky_covers_every_partition_once_and_stays_balanced(group: Group_) -> None:
    counts, subs, racks = group
    result = StickyAssignor().assign(counts, subs, racks)
    check_valid(counts, subs, result)
    check_no_improving_move(subs, result)


@settings(max_examples=150, deadline=None)
@given(rack_groups(identical=True, owned=True))
def test_sticky_identical_subscriptions_stay_within_one(group: Group_) -> None:
    counts, subs, racks = group
    sizes = [len(p) for p in StickyAssignor().assign(counts, subs, racks).values()]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=150, deadline=None)
@given(rack_groups(owned=True))
def test_cooperative_sticky_never_gives_a_claimed_partition_to_another_member(
    group: Group_,
) -> None:
    counts, subs, racks = group
    result = CooperativeStickyAssignor().assign(counts, subs, racks)
    assert set(result) == set(subs)
    assigned = Counter(tp for parts in result.values() for tp in parts)
    assert all(n == 1 for n in assigned.values())
    claimed = {tp: mid for mid, s in subs.items() for tp in s.owned_partitions}
    for mid, parts in result.items():
        for tp in parts:
            assert claimed.get(tp, mid) == mid


@settings(max_examples=150, deadline=None)
@given(rack_groups(owned=True), st.sampled_from(["no member racks", "same racks", "none"]))
def test_no_change_when_racks_do_not_matter(group: Group_, case: str) -> None:
    counts, subs, racks = group
    if case == "no member racks":
        subs = {
            mid: Subscription(s.topics, None, s.owned_partitions, s.generation)
            for mid, s in subs.items()
        }
    elif case == "same racks":  # every partition has replicas on every rack
        racks = {TP(t, p): frozenset(RACKS) for t in counts for p in range(counts[t])}
    arg = None if case == "none" else racks
    for assignor in (RangeAssignor(), StickyAssignor(), CooperativeStickyAssignor()):
        assert assignor.assign(counts, subs, arg) == assignor.assign(counts, subs), assignor.name


@settings(max_examples=150, deadline=None)
@given(rack_groups(identical=True))
def test_rack_awareness_never_aligns_fewer_partitions(group: Group_) -> None:
    counts, subs, racks = group
    assignors: list[Any] = [StickyAssignor()]
    subscribed = [counts[t] for t in next(iter(subs.values())).topics if counts[t]]
    if len(set(subscribed)) == len(subscribed):
        # (co-partitioned topics count alignment per partition index: see the brute force)
        assignors.append(RangeAssignor())
    for assignor in assignors:
        aware = assignor.assign(counts, subs, racks)
        plain = assignor.assign(counts, subs)
        assert local(subs, racks, aware) >= local(subs, racks, plain), assignor.name


def best_balanced(members: list[str], units: list[Any], is_local: Any) -> int:
    """Brute force: the most units placed locally over every balanced placement."""
    lo, extra = divmod(len(units), len(members))
    best = 0
    for choice in itertools.product(range(len(members)), repeat=len(units)):
        sizes = Counter(choice)
        if any(sizes[i] not in (lo, lo + 1) for i in range(len(members))):
            continue
        if sum(sizes[i] == lo + 1 for i in range(len(members))) != extra:
            continue
        best = max(best, sum(is_local(members[i], u) for i, u in zip(choice, units, strict=True)))
    return best


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from([*RACKS, None]), min_size=1, max_size=3),
    st.lists(st.sets(st.sampled_from(RACKS), max_size=2), min_size=1, max_size=6),
)
def test_sticky_aligns_as_many_partitions_as_balance_allows(
    member_racks: list[str | None], replica_racks: list[set[str]]
) -> None:
    subs = {f"m{i}": Subscription(("t",), rack_id=r) for i, r in enumerate(member_racks)}
    racks = {TP("t", p): frozenset(r) for p, r in enumerate(replica_racks) if r}
    assume(racks)  # no rack known at all: the plain assignment, by design
    result = StickyAssignor().assign({"t": len(replica_racks)}, subs, racks)
    members = sorted(subs)
    units = [TP("t", p) for p in range(len(replica_racks))]
    best = best_balanced(
        members, units, lambda mid, tp: aligned(subs[mid].rack_id, racks.get(tp, frozenset()))
    )
    assert local(subs, racks, result) == best


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from([*RACKS, None]), min_size=1, max_size=3),
    st.lists(
        st.tuples(
            st.sets(st.sampled_from(RACKS), max_size=2), st.sets(st.sampled_from(RACKS), max_size=2)
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_range_aligns_as_many_co_partitioned_indexes_as_balance_allows(
    member_racks: list[str | None], replica_racks: list[tuple[set[str], set[str]]]
) -> None:
    # two co-partitioned topics: index i of both goes to one member, so i is local to a
    # member only when both topics' partition i have a replica in its rack
    subs = {f"m{i}": Subscription(("t0", "t1"), rack_id=r) for i, r in enumerate(member_racks)}
    racks: Racks = {}
    for p, (r0, r1) in enumerate(replica_racks):
        if r0:
            racks[TP("t0", p)] = frozenset(r0)
        if r1:
            racks[TP("t1", p)] = frozenset(r1)
    assume(racks)
    n = len(replica_racks)
    result = RangeAssignor().assign({"t0": n, "t1": n}, subs, racks)
    both = {p: frozenset(r0 & r1) for p, (r0, r1) in enumerate(replica_racks)}
    local_indexes = sum(
        1
        for mid, parts in result.items()
        for tp in parts
        if tp.topic == "t0" and aligned(subs[mid].rack_id, both[tp.partition])
    )
    best = best_balanced(
        sorted(subs), list(range(n)), lambda mid, p: aligned(subs[mid].rack_id, both[p])
    )
    assert local_indexes == best


# -- known answers --------------------------------------------------------------------------


def one_rack_each(count: int) -> Racks:
    """Partition p of "t" has its only replica in rack RACKS[p % 3]."""
    return {TP("t", p): frozenset({RACKS[p % 3]}) for p in range(count)}


def test_range_gives_each_member_its_racks_partitions() -> None:
    subs = {f"c{i}": Subscription(("t",), rack_id=RACKS[i]) for i in range(3)}
    got = RangeAssignor().assign({"t": 6}, subs, one_rack_each(6))
    assert got == {
        "c0": [TP("t", 0), TP("t", 3)],
        "c1": [TP("t", 1), TP("t", 4)],
        "c2": [TP("t", 2), TP("t", 5)],
    }
    # without racks: plain ranges
    assert RangeAssignor().assign({"t": 6}, subs)["c0"] == [TP("t", 0), TP("t", 1)]


def test_range_balance_beats_alignment() -> None:
    # every partition lives in rack a, but c1 (rack b) still gets its share
    subs = {"c0": Subscription(("t",), rack_id="a"), "c1": Subscription(("t",), rack_id="b")}
    racks = {TP("t", p): frozenset({"a"}) for p in range(4)}
    racks[TP("t", 3)] = frozenset({"b"})
    got = RangeAssignor().assign({"t": 4}, subs, racks)
    assert got == {"c0": [TP("t", 0), TP("t", 1)], "c1": [TP("t", 2), TP("t", 3)]}
    assert local(subs, racks, got) == 3


def test_sticky_keeps_local_partitions_and_moves_remote_ones() -> None:
    racks = one_rack_each(6)
    # c0 (rack a) owned 0,1,2; c1 (rack b) owned 3,4,5; c2 (rack c) is new
    subs = {
        "c0": Subscription(("t",), None, (TP("t", 0), TP("t", 1), TP("t", 2)), 3, "a"),
        "c1": Subscription(("t",), None, (TP("t", 3), TP("t", 4), TP("t", 5)), 3, "b"),
        "c2": Subscription(("t",), rack_id="c"),
    }
    got = StickyAssignor().assign({"t": 6}, subs, racks)
    assert got == {
        "c0": [TP("t", 0), TP("t", 3)],
        "c1": [TP("t", 1), TP("t", 4)],
        "c2": [TP("t", 2), TP("t", 5)],
    }
    # the cooperative variant withholds what is still owned elsewhere for one rebalance
    coop = CooperativeStickyAssignor().assign({"t": 6}, subs, racks)
    assert coop == {"c0": [TP("t", 0)], "c1": [TP("t", 4)], "c2": []}


def test_sticky_returns_remote_partitions_to_their_owner_when_no_local_member_has_room() -> None:
    # all partitions live in rack c, which no member is in: stickiness decides alone
    racks = {TP("t", p): frozenset({"c"}) for p in range(4)}
    racks[TP("t", 0)] = frozenset({"a"})
    subs = {
        "c0": Subscription(("t",), None, (TP("t", 2), TP("t", 3)), 2, "a"),
        "c1": Subscription(("t",), None, (TP("t", 0), TP("t", 1)), 2, "b"),
    }
    got = StickyAssignor().assign({"t": 4}, subs, racks)
    # t-0 moves to c0 (rack a); c0 keeps one of its remote partitions, c1 keeps t-1
    assert TP("t", 0) in got["c0"] and TP("t", 1) in got["c1"]
    assert sorted(len(p) for p in got.values()) == [2, 2]
    moved = sum(tp not in subs[mid].owned_partitions for mid, parts in got.items() for tp in parts)
    assert moved == 2  # t-0 and one partition in exchange: the fewest moves that align it


def test_sticky_mixed_subscriptions_swaps_partitions_into_their_racks() -> None:
    # x: only c0 and c1 subscribe; y: only c1 and c2. Balance leaves c1 one of each topic,
    # and rack alignment picks which.
    subs = {
        "c0": Subscription(("x",), rack_id="a"),
        "c1": Subscription(("x", "y"), rack_id="b"),
        "c2": Subscription(("y",), rack_id="c"),
    }
    racks = {
        TP("x", 0): frozenset({"b"}),
        TP("x", 1): frozenset({"a"}),
        TP("y", 0): frozenset({"c"}),
        TP("y", 1): frozenset({"b"}),
    }
    got = StickyAssignor().assign({"x": 2, "y": 2}, subs, racks)
    assert got == {"c0": [TP("x", 1)], "c1": [TP("x", 0), TP("y", 1)], "c2": [TP("y", 0)]}
    assert local(subs, racks, got) == 4


# -- the leader side ---------------------------------------------------------------------


def racked_cluster(
    version: int = 1, replicas: dict[int, tuple[int, ...]] | None = None
) -> ClusterMetadata:
    """Brokers 1, 2, 3 in racks a, b, c; partition p of "t" (4) on broker p % 3 + 1."""
    brokers = {i: BrokerNode(i, f"b{i}", 9092, RACKS[i - 1]) for i in (1, 2, 3)}
    layout = replicas or {p: (p % 3 + 1,) for p in range(4)}
    parts = tuple(
        PartitionInfo("t", p, r[0] if r else None, 0, r, r) for p, r in sorted(layout.items())
    )
    return ClusterMetadata(
        brokers=brokers, topics={"t": TopicInfo("t", None, False, parts)}, version=version
    )


def test_partition_racks_from_metadata() -> None:
    cluster = racked_cluster(replicas={0: (1, 2), 1: (3,), 2: (9,), 3: ()})
    assert partition_racks(cluster, ["t", "unknown"]) == {
        TP("t", 0): frozenset({"a", "b"}),
        TP("t", 1): frozenset({"c"}),
    }


def test_assign_with_racks_calls_two_argument_assignors_without_racks() -> None:
    class Legacy:
        name = "legacy"

        def assign(
            self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
        ) -> dict[str, list[TP]]:
            return {mid: [] for mid in subscriptions}

        def subscription_user_data(self, topics: frozenset[str]) -> bytes | None:
            return None

        def on_assignment(self, assignment: Any, generation: int) -> None:
            return None

    subs = {"c0": Subscription(("t",), rack_id="a")}
    assert assign_with_racks(Legacy(), {"t": 1}, subs, {TP("t", 0): frozenset("a")}) == {"c0": []}
    assert assign_with_racks(RangeAssignor(), {"t": 1}, subs, {}) == {"c0": [TP("t", 0)]}


def test_rack_aligned_placement_respects_quotas() -> None:
    quotas = Quotas.even(["m0", "m1"], 3)  # 1 each, one member may take 2
    racks = {u: frozenset({"a"}) for u in "xyz"}
    placed = rack_aligned_placement(
        list("xyz"), racks, ["m0", "m1"], {"m0": "a", "m1": "b"}, quotas
    )
    assert placed == {"x": "m0", "y": "m0"}
    assert quotas.counts == {"m0": 2, "m1": 0} and quotas.extra_left == 0
    # a member without a rack is close to everything
    quotas = Quotas.even(["m0", "m1"], 3)
    placed = rack_aligned_placement(list("xyz"), racks, ["m0", "m1"], {"m0": "b"}, quotas)
    assert placed == {"x": "m1", "y": "m1"}


def test_leader_assigns_by_rack_and_rejoins_when_replica_racks_change() -> None:
    g = Group(rack_id="a")
    g.cluster = racked_cluster()
    g.discover()
    g.member.on_application_poll(0)
    join = only(g.poll(), m.JoinGroupRequest)
    own = g.own_subscription(join)
    assert own.rack_id == "a"
    other = Subscription(("t",), rack_id="c")
    g.join_response(join, leader="m1", members=[("m1", own), ("m2", other)])
    sync = only(g.poll(), m.SyncGroupRequest)
    got = {
        a.member_id: decode_assignment(a.assignment).partitions for a in sync.request.assignments
    }
    # partitions 0 and 3 live in rack a (broker 1), 2 in rack c (broker 3), 1 in rack b
    assert TP("t", 0) in got["m1"] and TP("t", 3) in got["m1"]
    assert TP("t", 2) in got["m2"]
    g.sync_response(sync, list(got["m1"]))
    g.member.on_assignment_done(g.now)
    g.member.drain_events()
    g.cluster = racked_cluster(version=2)  # same racks: nothing to do
    g.poll()
    assert g.state is MemberState.STABLE
    g.cluster = racked_cluster(version=3, replicas={p: (2,) for p in range(4)})
    g.poll()
    assert g.state is not MemberState.STABLE  # the leader rebalances to realign


@pytest.mark.parametrize("members", [3, 7])
def test_large_group_aligns_every_partition(members: int) -> None:
    # 3000 partitions, each with replicas in two of three racks: the flow network stays a
    # handful of nodes, and a fully aligned balanced assignment exists
    subs = {f"c{i:02d}": Subscription(("t",), rack_id=RACKS[i % 3]) for i in range(members)}
    racks = {TP("t", p): frozenset({RACKS[p % 3], RACKS[(p + 1) % 3]}) for p in range(3000)}
    for assignor in (RangeAssignor(), StickyAssignor()):
        result = assignor.assign({"t": 3000}, subs, racks)
        check_valid({"t": 3000}, subs, result)
        assert local(subs, racks, result) == 3000
