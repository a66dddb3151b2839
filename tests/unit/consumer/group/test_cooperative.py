"""Cooperative rebalancing (KIP-429): the cooperative-sticky assignor's two-round convergence
and the classic member's REVOKING_ASSIGNED path, on a fake clock."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaio.consumer.group.assignors import (
    CooperativeStickyAssignor,
    RangeAssignor,
    RebalanceProtocol,
    StickyAssignor,
    common_protocol,
)
from kafkaio.consumer.group.assignors.cooperative_sticky import encode_generation
from kafkaio.consumer.group.consumer_protocol import Assignment, Subscription
from kafkaio.consumer.group.events import AssignPartitions, PartitionsLost, RevokePartitions
from kafkaio.consumer.group.membership import MemberState
from kafkaio.consumer.subscription import SubscriptionState
from kafkaio.metadata.cluster import TopicPartition as TP
from kafkaio.protocol import messages as m

from .harness import Group
from .support import only

T0, T1, T2, T3 = (TP("t", p) for p in range(4))
REBALANCE_IN_PROGRESS = 27
UNKNOWN_MEMBER_ID = 25


def test_protocol_is_cooperative_only_when_every_assignor_supports_it() -> None:
    assert common_protocol([CooperativeStickyAssignor()]) is RebalanceProtocol.COOPERATIVE
    assert common_protocol([CooperativeStickyAssignor(), RangeAssignor()]) is (
        RebalanceProtocol.EAGER
    )
    assert common_protocol([StickyAssignor()]) is RebalanceProtocol.EAGER


def test_cooperative_sticky_withholds_partitions_still_owned_elsewhere() -> None:
    a = CooperativeStickyAssignor()
    subs = {
        "A": Subscription(("t",), None, (T0, T1, T2, T3), 4),
        "B": Subscription(("t",)),
    }
    first = a.assign({"t": 4}, subs)
    assert first == {"A": [T0, T1], "B": []}  # A revokes T2, T3 first
    subs["A"] = Subscription(("t",), None, (T0, T1), 5)
    assert a.assign({"t": 4}, subs) == {"A": [T0, T1], "B": [T2, T3]}


def test_cooperative_sticky_reads_the_generation_from_user_data_of_old_subscriptions() -> None:
    a = CooperativeStickyAssignor()
    a.on_assignment(Assignment((T0,)), 7)
    assert a.subscription_user_data(frozenset({"t"})) == encode_generation(7)
    # both claim T0; the claim of generation 7 (from user data) beats generation 3
    subs = {
        "A": Subscription(("t",), encode_generation(7), (T0,), -1),
        "B": Subscription(("t",), None, (T0, T1), 3),
    }
    got = a.assign({"t": 2}, subs)
    assert T0 in got["A"] and T0 not in got["B"]


@st.composite
def rebalances(draw: st.DrawFn) -> tuple[int, list[str], list[str]]:
    count = draw(st.integers(1, 24))
    before = draw(st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=6, unique=True))
    after = draw(st.lists(st.sampled_from("abcdefghij"), min_size=1, max_size=8, unique=True))
    return count, sorted(before), sorted(after)


@settings(max_examples=200, deadline=None)
@given(rebalances())
def test_two_rounds_converge_without_double_ownership(
    case: tuple[int, list[str], list[str]],
) -> None:
    count, before, after = case
    a = CooperativeStickyAssignor()
    every = {TP("t", p) for p in range(count)}
    start = a.assign({"t": count}, {mid: Subscription(("t",)) for mid in before})
    owned = {mid: set(start[mid]) for mid in before}
    generation = 1
    for round_ in range(2):
        subs = {
            mid: Subscription(("t",), None, tuple(sorted(owned.get(mid, ()))), generation)
            for mid in after
        }
        result = a.assign({"t": count}, subs)
        claimed = Counter(tp for parts in result.values() for tp in parts)
        assert all(n == 1 for n in claimed.values())
        for mid, parts in result.items():
            for tp in parts:  # nobody else still owns what a member is given
                assert all(tp not in owned.get(o, ()) for o in after if o != mid)
        generation += 1
        # each member keeps what it still owns and was assigned; members that left are gone
        owned = {mid: set(result[mid]) for mid in after}
        if round_ == 0:
            continue
        assert set(claimed) == every  # round two assigns everything
        sizes = [len(p) for p in result.values()]
        assert max(sizes) - min(sizes) <= 1
    # stickiness: a member that stayed keeps its partitions up to the new floor quota
    for mid in set(before) & set(after):
        kept = set(start[mid]) & owned[mid]
        assert len(kept) >= min(len(start[mid]), count // len(after))


def _cooperative_group() -> Group:
    return Group(assignors=[CooperativeStickyAssignor()])


def test_rebalance_keeps_owned_partitions_and_revokes_only_what_moves() -> None:
    g = _cooperative_group()
    assert g.member.protocol is RebalanceProtocol.COOPERATIVE
    g.join_stable([T0, T1, T2, T3])
    hb = only(g.poll_after(3000), m.HeartbeatRequest)
    g.heartbeat_response(hb, REBALANCE_IN_PROGRESS)
    join = only(g.poll(), m.JoinGroupRequest)
    # no revocation before joining: the member still owns (and fetches) all four
    assert g.member.drain_events() == []
    assert g.state is MemberState.JOINING
    assert g.subs.assigned_partitions() == {T0, T1, T2, T3}
    sub = g.own_subscription(join)
    assert (sub.owned_partitions, sub.generation) == ((T0, T1, T2, T3), 1)
    assert sub.user_data == encode_generation(1)
    g.join_response(join, generation=2)
    sync = only(g.poll(), m.SyncGroupRequest)
    g.sync_response(sync, [T0, T1])
    assert g.member.drain_events() == [RevokePartitions(frozenset({T2, T3}))]
    assert g.state is MemberState.REVOKING_ASSIGNED
    assert g.subs.state(T2).pending_revocation and not g.subs.state(T0).pending_revocation
    assert g.member.generation_if_stable() is not None  # the revoke-commit may go out
    g.member.on_revocation_done(g.now)
    assert g.member.drain_events() == [AssignPartitions(frozenset())]
    assert g.subs.assigned_partitions() == {T0, T1}
    g.member.on_assignment_done(g.now)
    # second round: rejoin at once so T2, T3 reach their new owner
    join = only(g.poll(), m.JoinGroupRequest)
    assert g.own_subscription(join).owned_partitions == (T0, T1)
    assert g.member.drain_events() == []
    g.join_response(join, generation=3)
    g.sync_response(only(g.poll(), m.SyncGroupRequest), [T0, T1])
    assert g.member.drain_events() == [AssignPartitions(frozenset())]
    g.member.on_assignment_done(g.now)
    assert g.state is MemberState.STABLE
    assert m.JoinGroupRequest not in {type(r.request) for r in g.poll()}


def test_added_partitions_only_are_announced() -> None:
    g = _cooperative_group()
    g.join_stable([T0])
    g.member.request_rejoin("test")
    join = only(g.poll(), m.JoinGroupRequest)
    g.join_response(join, generation=2)
    g.sync_response(only(g.poll(), m.SyncGroupRequest), [T0, T1])
    assert g.member.drain_events() == [AssignPartitions(frozenset({T1}))]
    assert g.state is MemberState.ASSIGNING
    g.member.on_assignment_done(g.now)
    assert g.state is MemberState.STABLE


def test_fenced_cooperative_member_loses_everything() -> None:
    g = _cooperative_group()
    g.join_stable([T0, T1])
    g.heartbeat_response(only(g.poll_after(3000), m.HeartbeatRequest), UNKNOWN_MEMBER_ID)
    assert g.member.drain_events() == [PartitionsLost(frozenset({T0, T1}))]
    assert g.state is MemberState.REVOKING
    g.member.on_revocation_done(g.now)
    assert g.subs.assigned_partitions() == set()
    join = only(g.poll(), m.JoinGroupRequest)
    assert g.own_subscription(join).owned_partitions == ()


def _revoking_a_dropped_topic() -> Group:
    """A cooperative member holding T0 and u-0, told to revoke u-0 (topic u unsubscribed)."""
    g = Group(assignors=[CooperativeStickyAssignor()], topics={"t": 2, "u": 2})
    g.subs.subscribe(["t", "u"])
    g.join_stable([T0, TP("u", 0)])
    g.subs.subscribe(["t"])
    g.poll()
    assert g.member.drain_events() == [RevokePartitions(frozenset({TP("u", 0)}))]
    return g


def test_dropped_topic_is_revoked_before_joining_the_rest_kept() -> None:
    g = _revoking_a_dropped_topic()
    assert g.state is MemberState.REVOKING
    g.member.on_revocation_done(g.now)
    assert g.subs.assigned_partitions() == {T0}
    join = only(g.poll(), m.JoinGroupRequest)
    assert g.own_subscription(join).owned_partitions == (T0,)


def test_leave_while_revoking_assigned_revokes_the_rest_then_leaves() -> None:
    g = _cooperative_group()
    g.join_stable([T0, T1, T2])
    g.member.request_rejoin("test")
    g.join_response(only(g.poll(), m.JoinGroupRequest), generation=2)
    g.sync_response(only(g.poll(), m.SyncGroupRequest), [T0])
    assert g.member.drain_events() == [RevokePartitions(frozenset({T1, T2}))]
    g.member.leave(g.now)
    assert g.member.is_leaving
    g.member.on_revocation_done(g.now)
    assert g.member.drain_events() == [RevokePartitions(frozenset({T0}))]
    assert g.state is MemberState.PREPARING_LEAVE
    g.member.on_revocation_done(g.now)
    assert g.subs.assigned_partitions() == set()
    leave = only(g.poll(), m.LeaveGroupRequest)
    assert leave.request.members[0].member_id == "m1"


def _stop_polling_until_the_poll_interval_expires(g: Group) -> list[m.LeaveGroupRequest]:
    """Heartbeat on for 75 s without an application poll (max_poll_interval_ms is 60 s)."""
    leaves = []
    for _ in range(25):
        g.advance(3000)
        for req in g.poll():
            if isinstance(req.request, m.HeartbeatRequest):
                g.heartbeat_response(req)
            elif isinstance(req.request, m.LeaveGroupRequest):
                leaves.append(req.request)
    return leaves


def test_poll_timeout_during_partial_revocation_loses_the_rest_and_refetches_after_rejoin() -> None:
    g = _cooperative_group()
    g.join_stable([T0, T1, T2, T3])
    g.member.request_rejoin("test")
    g.join_response(only(g.poll(), m.JoinGroupRequest), generation=2)
    g.sync_response(only(g.poll(), m.SyncGroupRequest), [T0, T1])
    assert g.member.drain_events() == [RevokePartitions(frozenset({T2, T3}))]
    assert g.state is MemberState.REVOKING_ASSIGNED
    # the application is busy (its revocation not yet run) past max_poll_interval_ms
    leaves = _stop_polling_until_the_poll_interval_expires(g)
    assert [leave.members[0].member_id for leave in leaves] == ["m1"]
    assert g.member.drain_events() == []
    assert g.member.generation_if_stable() is None  # nothing may be committed any more
    assert g.subs.fetchable_partitions() == []
    # the application polls again: the outstanding revocation completes, the rest is lost
    g.member.on_application_poll(g.now)
    g.member.on_revocation_done(g.now)
    assert g.member.drain_events() == [PartitionsLost(frozenset({T0, T1}))]
    assert g.state is MemberState.REVOKING
    assert g.subs.assigned_partitions() == {T0, T1}
    assert m.JoinGroupRequest not in {type(r.request) for r in g.poll()}
    g.member.on_revocation_done(g.now)
    assert g.subs.assigned_partitions() == set()  # no partition keeps pending_revocation
    # rejoin as a new member owning nothing; what the group hands back is fetched again
    join = only(g.poll(), m.JoinGroupRequest)
    assert join.request.member_id == ""
    sub = g.own_subscription(join)
    assert (sub.owned_partitions, sub.generation) == ((), -1)
    g.join_response(join, generation=3, member_id="m2")
    g.sync_response(only(g.poll(), m.SyncGroupRequest), [T0, T1])
    assert g.member.drain_events() == [AssignPartitions(frozenset({T0, T1}))]
    g.member.on_assignment_done(g.now)
    assert g.state is MemberState.STABLE
    for tp in (T0, T1):
        assert not g.subs.state(tp).pending_revocation
        g.subs.seek(tp, 0)  # as the committed-offset lookup would
    assert set(g.subs.fetchable_partitions()) == {T0, T1}


def test_poll_timeout_while_revoking_a_dropped_topic_loses_the_kept_partitions() -> None:
    g = _revoking_a_dropped_topic()
    _stop_polling_until_the_poll_interval_expires(g)
    g.member.on_application_poll(g.now)
    g.member.on_revocation_done(g.now)
    assert g.member.drain_events() == [PartitionsLost(frozenset({T0}))]
    g.member.on_revocation_done(g.now)
    assert g.subs.assigned_partitions() == set()
    assert g.own_subscription(only(g.poll(), m.JoinGroupRequest)).owned_partitions == ()


def test_group_assignment_clears_a_stale_pending_revocation_flag() -> None:
    subs = SubscriptionState()
    subs.subscribe(["t"])
    subs.assign_from_subscribed([T0, T1])
    subs.mark_pending_revocation([T0, T1])
    subs.assign_from_subscribed([T0, T1])  # the same partitions, assigned again
    subs.seek(T0, 0)
    subs.seek(T1, 0)
    assert set(subs.fetchable_partitions()) == {T0, T1}


def test_eager_member_still_revokes_everything_before_joining() -> None:
    g = Group(assignors=[StickyAssignor()])
    g.join_stable([T0, T1])
    g.member.request_rejoin("test")
    g.poll()
    assert g.member.drain_events() == [RevokePartitions(frozenset({T0, T1}))]
    assert g.state is MemberState.REVOKING
