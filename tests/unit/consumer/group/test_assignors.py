"""Assignors: property tests (coverage, eligibility, balance, stickiness, determinism) and
known answers from the Java client's documentation."""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaio.consumer.group.assignors import (
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    assignor_for_name,
)
from kafkaio.consumer.group.assignors.sticky import encode_user_data
from kafkaio.consumer.group.consumer_protocol import Assignment, Subscription
from kafkaio.metadata.cluster import TopicPartition as TP

ASSIGNORS = [RangeAssignor(), RoundRobinAssignor(), StickyAssignor()]
TOPICS = ["t0", "t1", "t2", "t3"]


@st.composite
def groups(
    draw: st.DrawFn, identical: bool = False
) -> tuple[dict[str, int], dict[str, Subscription]]:
    counts = {t: draw(st.integers(0, 9)) for t in TOPICS[: draw(st.integers(1, 4))]}
    members = draw(
        st.lists(st.text("abcdefgh", min_size=1, max_size=4), min_size=1, max_size=6, unique=True)
    )
    topic_sets = st.sets(st.sampled_from(sorted(counts)), min_size=1)
    shared = draw(topic_sets)
    subs = {
        mid: Subscription(tuple(sorted(shared if identical else draw(topic_sets))))
        for mid in members
    }
    return counts, subs


def check_valid(
    counts: dict[str, int], subs: dict[str, Subscription], result: dict[str, list[TP]]
) -> None:
    assert set(result) == set(subs)
    assigned = Counter(tp for parts in result.values() for tp in parts)
    subscribed = {t for s in subs.values() for t in s.topics}
    expected = {TP(t, p) for t in subscribed for p in range(counts.get(t, 0))}
    assert set(assigned) == expected
    assert all(n == 1 for n in assigned.values())
    for member, parts in result.items():
        assert all(tp.topic in subs[member].topics for tp in parts)


@settings(max_examples=150, deadline=None)
@given(groups())
def test_every_partition_once_and_only_to_subscribers(
    group: tuple[dict[str, int], dict[str, Subscription]],
) -> None:
    counts, subs = group
    for assignor in ASSIGNORS:
        check_valid(counts, subs, assignor.assign(counts, subs))


@settings(max_examples=150, deadline=None)
@given(groups(identical=True))
def test_balance_with_identical_subscriptions(
    group: tuple[dict[str, int], dict[str, Subscription]],
) -> None:
    counts, subs = group
    for assignor in (RoundRobinAssignor(), StickyAssignor()):
        sizes = [len(p) for p in assignor.assign(counts, subs).values()]
        assert max(sizes) - min(sizes) <= 1, assignor.name
    result = RangeAssignor().assign(counts, subs)
    for topic in next(iter(subs.values())).topics:  # range balances each topic on its own
        per_member = [sum(tp.topic == topic for tp in parts) for parts in result.values()]
        assert max(per_member) - min(per_member) <= 1


@settings(max_examples=150, deadline=None)
@given(groups())
def test_sticky_leaves_no_improving_move_with_mixed_subscriptions(
    group: tuple[dict[str, int], dict[str, Subscription]],
) -> None:
    counts, subs = group
    result = StickyAssignor().assign(counts, subs)
    size = {m: len(p) for m, p in result.items()}
    for member, parts in result.items():
        for tp in parts:
            for other in subs:
                if tp.topic in subs[other].topics:
                    assert size[other] >= size[member] - 1, (tp, member, other)


@settings(max_examples=150, deadline=None)
@given(groups(identical=True), st.data())
def test_sticky_member_leaving_moves_only_its_partitions(
    group: tuple[dict[str, int], dict[str, Subscription]], data: st.DataObject
) -> None:
    counts, subs = group
    first = StickyAssignor().assign(counts, subs)
    if len(subs) < 2:
        return
    leaver = data.draw(st.sampled_from(sorted(subs)))
    use_user_data = data.draw(st.booleans())
    remaining = {}
    for mid, sub in subs.items():
        if mid == leaver:
            continue
        if use_user_data:  # eager members: the previous assignment travels in user data
            remaining[mid] = Subscription(sub.topics, encode_user_data(first[mid], 1))
        else:
            remaining[mid] = Subscription(sub.topics, None, tuple(first[mid]), 1)
    second = StickyAssignor().assign(counts, remaining)
    check_valid(counts, remaining, second)
    for mid in remaining:
        assert set(first[mid]) <= set(second[mid]), mid
    sizes = [len(p) for p in second.values()]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=100, deadline=None)
@given(groups(), st.randoms(use_true_random=False))
def test_assignments_do_not_depend_on_member_order(
    group: tuple[dict[str, int], dict[str, Subscription]], rnd: random.Random
) -> None:
    counts, subs = group
    items = list(subs.items())
    rnd.shuffle(items)
    for assignor in ASSIGNORS:
        a = assignor.assign(counts, subs)
        b = assignor.assign(dict(reversed(list(counts.items()))), dict(items))
        assert {k: sorted(v) for k, v in a.items()} == {k: sorted(v) for k, v in b.items()}


def test_range_known_answer() -> None:
    # Java docs: C0, C1 on t0, t1 with 3 partitions each
    subs = {"C0": Subscription(("t0", "t1")), "C1": Subscription(("t0", "t1"))}
    got = RangeAssignor().assign({"t0": 3, "t1": 3}, subs)
    assert got == {
        "C0": [TP("t0", 0), TP("t0", 1), TP("t1", 0), TP("t1", 1)],
        "C1": [TP("t0", 2), TP("t1", 2)],
    }


def test_range_orders_static_members_by_instance_id() -> None:
    subs = {
        "a-dynamic": Subscription(("t",)),
        "z-member": Subscription(("t",), group_instance_id="i1"),
    }
    got = RangeAssignor().assign({"t": 3}, subs)
    assert got == {"z-member": [TP("t", 0), TP("t", 1)], "a-dynamic": [TP("t", 2)]}


def test_roundrobin_known_answer_with_different_subscriptions() -> None:
    # Java docs: C0 on t0; C1 on t0, t1; C2 on t0, t1, t2 (1, 2 and 3 partitions)
    subs = {
        "C0": Subscription(("t0",)),
        "C1": Subscription(("t0", "t1")),
        "C2": Subscription(("t0", "t1", "t2")),
    }
    got = RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3}, subs)
    assert got == {
        "C0": [TP("t0", 0)],
        "C1": [TP("t1", 0)],
        "C2": [TP("t1", 1), TP("t2", 0), TP("t2", 1), TP("t2", 2)],
    }


def test_sticky_conflicting_claims_go_to_the_newest_generation() -> None:
    subs = {
        "A": Subscription(("t",), encode_user_data([TP("t", 0), TP("t", 1)], 5)),
        "B": Subscription(("t",), encode_user_data([TP("t", 1)], 6)),
    }
    got = StickyAssignor().assign({"t": 2}, subs)
    assert got == {"A": [TP("t", 0)], "B": [TP("t", 1)]}


def test_sticky_member_side_user_data_follows_assignments() -> None:
    s = StickyAssignor()
    assert s.subscription_user_data(frozenset({"t"})) is None
    s.on_assignment(Assignment((TP("t", 1),)), 3)
    assert s.subscription_user_data(frozenset({"t"})) == encode_user_data([TP("t", 1)], 3)


def test_assignor_for_name() -> None:
    assert isinstance(assignor_for_name("sticky"), StickyAssignor)
    import pytest

    from kafkaio.errors import KafkaConfigError

    assert assignor_for_name("cooperative-sticky").name == "cooperative-sticky"
    with pytest.raises(KafkaConfigError, match="roundrobin"):
        assignor_for_name("uniform")
