"""ClassicMembershipManager timelines on a fake clock: join, sync, heartbeat, rebalance, leave."""

from __future__ import annotations

import pytest

from kafkaio.consumer.group.consumer_protocol import Subscription, decode_assignment
from kafkaio.consumer.group.coordinator import coordinator_connection_id
from kafkaio.consumer.group.events import (
    AssignPartitions,
    GroupError,
    PartitionsLost,
    RevokePartitions,
)
from kafkaio.consumer.group.membership import MemberState
from kafkaio.errors import (
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    KafkaConfigError,
    KafkaConnectionError,
)
from kafkaio.metadata.cluster import TopicPartition as TP
from kafkaio.protocol import messages as m

from .harness import Group
from .support import answer, cluster, fail, kinds, only

NOT_COORDINATOR = 16
COORDINATOR_NOT_AVAILABLE = 15
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
GROUP_AUTHORIZATION_FAILED = 30
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82

T0, T1, T2, T3 = (TP("t", p) for p in range(4))


def test_no_join_before_the_application_polls() -> None:
    g = Group()
    g.discover()
    assert kinds(g.poll()) == []
    assert g.state is MemberState.UNJOINED
    g.member.on_application_poll(g.now)
    assert kinds(g.poll()) == ["JoinGroupRequest"]


def test_first_join_member_id_required_then_leader_assigns_and_syncs() -> None:
    g = Group()
    g.discover()
    g.member.on_application_poll(0)
    join = only(g.poll(), m.JoinGroupRequest)
    assert join.node_id == coordinator_connection_id(1)
    assert join.timeout_ms == 60_000 + 5000  # rebalance timeout (= max poll interval) + lapse
    assert (join.request.member_id, join.request.session_timeout_ms) == ("", 10_000)
    assert join.request.rebalance_timeout_ms == 60_000
    assert g.own_subscription(join).topics == ("t",)
    g.join_response(join, generation=-1, member_id="m1", leader="", error=MEMBER_ID_REQUIRED)
    assert g.state is MemberState.JOINING
    join = only(g.poll(), m.JoinGroupRequest)  # at once, with the member id it was given
    assert join.request.member_id == "m1"
    other = Subscription(("t",))
    g.join_response(
        join,
        generation=3,
        member_id="m1",
        leader="m1",
        members=[("m1", g.own_subscription(join)), ("m2", other)],
    )
    assert g.state is MemberState.AWAITING_SYNC and g.member.is_leader
    sync = only(g.poll(), m.SyncGroupRequest)
    assert (sync.request.generation_id, sync.request.member_id) == (3, "m1")
    given = {
        a.member_id: decode_assignment(a.assignment).partitions for a in sync.request.assignments
    }
    assert given == {"m1": (T0, T1), "m2": (T2, T3)}
    g.sync_response(sync, [T0, T1])
    (event,) = g.member.drain_events()
    assert event == AssignPartitions(frozenset({T0, T1}))
    assert g.subs.assigned_partitions() == {T0, T1}
    assert g.state is MemberState.ASSIGNING
    g.member.on_assignment_done(g.now)
    assert g.state is MemberState.STABLE
    assert g.member.generation.generation_id == 3


def test_follower_syncs_with_no_assignments() -> None:
    g = Group()
    g.discover()
    g.member.on_application_poll(0)
    g.join_response(only(g.poll(), m.JoinGroupRequest), leader="m9")
    sync = only(g.poll(), m.SyncGroupRequest)
    assert sync.request.assignments == [] and not g.member.is_leader
    g.sync_response(sync, [T3])
    assert g.subs.assigned_partitions() == {T3}


def test_heartbeats_keep_their_cadence_without_application_polls() -> None:
    g = Group()
    g.join_stable([T0])
    start = g.now
    sent = []
    for _ in range(60):  # 30 s in 500 ms steps; the application never polls
        g.advance(500)
        for req in g.poll():
            assert isinstance(req.request, m.HeartbeatRequest)
            assert (req.request.generation_id, req.request.member_id) == (1, "m1")
            sent.append(g.now - start)
            g.heartbeat_response(req)
    assert sent == [3000.0 * i for i in range(1, 11)]
    assert g.state is MemberState.STABLE
    result = g.member.poll(g.now + 100)
    assert result.next_poll_ms == pytest.approx(2900)


def test_rebalance_in_progress_revokes_commits_then_rejoins() -> None:
    g = Group()
    g.join_stable([T0, T1])
    g.subs.seek(T0, 42)
    g.advance(3000)
    g.heartbeat_response(only(g.poll(), m.HeartbeatRequest), REBALANCE_IN_PROGRESS)
    assert kinds(g.poll()) == []  # no JoinGroup before the revocation is done
    (event,) = g.member.drain_events()
    assert event == RevokePartitions(frozenset({T0, T1}))
    assert g.state is MemberState.REVOKING
    assert g.subs.fetchable_partitions() == []  # nothing fetched while revoking
    handle = g.commits.maybe_auto_commit_sync(g.now + 1000)  # commit-before-revoke
    assert handle is not None
    commit = only(g.poll(commits=True), m.OffsetCommitRequest)
    assert (commit.request.generation_id_or_member_epoch, commit.request.member_id) == (1, "m1")
    (topic,) = commit.request.topics
    assert [(p.partition_index, p.committed_offset) for p in topic.partitions] == [(0, 42)]
    answer(
        commit,
        g.now,
        m.OffsetCommitResponse(
            topics=[
                m.OffsetCommitResponse.OffsetCommitResponseTopic(
                    "t", [m.OffsetCommitResponse.OffsetCommitResponsePartition(0, 0)]
                )
            ]
        ),
        9,
    )
    assert handle.done and handle.error is None
    g.member.on_revocation_done(g.now)
    assert g.subs.assigned_partitions() == set()
    join = only(g.poll(), m.JoinGroupRequest)
    assert join.request.member_id == "m1"
    assert g.own_subscription(join).generation == 1


def test_coordinator_moves_mid_heartbeat() -> None:
    g = Group()
    g.join_stable([T0])
    g.advance(3000)
    g.heartbeat_response(only(g.poll(), m.HeartbeatRequest), NOT_COORDINATOR)
    assert g.coordinator.coordinator is None
    g.advance(100)
    reqs = g.poll()
    assert kinds(reqs) == ["FindCoordinatorRequest"]  # no heartbeat without a coordinator
    answer(
        reqs[0],
        g.now,
        m.FindCoordinatorResponse(
            coordinators=[m.FindCoordinatorResponse.Coordinator("g", 2, "b2", 9092, 0, None)]
        ),
        4,
    )
    hb = only(g.poll(), m.HeartbeatRequest)  # retry backoff since the failure has passed
    assert hb.node_id == coordinator_connection_id(2)
    g.heartbeat_response(hb)
    assert g.state is MemberState.STABLE and g.member.drain_events() == []


def test_connection_failure_on_heartbeat_marks_the_coordinator_unknown() -> None:
    g = Group()
    g.join_stable([T0])
    g.advance(3000)
    fail(only(g.poll(), m.HeartbeatRequest), g.now, KafkaConnectionError("reset"))
    assert g.coordinator.coordinator is None and g.state is MemberState.STABLE


@pytest.mark.parametrize(
    ("code", "keeps_member_id"), [(ILLEGAL_GENERATION, True), (UNKNOWN_MEMBER_ID, False)]
)
def test_fenced_generation_loses_partitions_and_rejoins(code: int, keeps_member_id: bool) -> None:
    g = Group()
    g.join_stable([T0, T1])
    g.advance(3000)
    g.heartbeat_response(only(g.poll(), m.HeartbeatRequest), code)
    (event,) = g.member.drain_events()
    assert event == PartitionsLost(frozenset({T0, T1}))  # lost: nothing may be committed
    assert g.member.generation_if_stable() is None
    g.member.on_revocation_done(g.now)
    join = only(g.poll(), m.JoinGroupRequest)
    assert join.request.member_id == ("m1" if keeps_member_id else "")
    assert g.own_subscription(join).generation == -1


def test_fenced_instance_id_is_fatal_for_static_members() -> None:
    g = Group(group_instance_id="instance-1")
    g.join_stable([T0])
    g.advance(3000)
    hb = only(g.poll(), m.HeartbeatRequest)
    assert hb.request.group_instance_id == "instance-1"
    g.heartbeat_response(hb, FENCED_INSTANCE_ID)
    (event,) = g.member.drain_events()
    assert isinstance(event, GroupError) and event.fatal
    assert isinstance(event.error, FencedInstanceIdError)
    assert g.state is MemberState.FATAL and g.poll() == []


def test_max_poll_interval_expiry_leaves_and_rejoins_on_next_poll() -> None:
    g = Group()
    g.join_stable([T0])
    for _ in range(19):  # heartbeats keep going for 57 s without application polls
        g.advance(3000)
        g.heartbeat_response(only(g.poll(), m.HeartbeatRequest))
    assert g.state is MemberState.STABLE
    g.advance(3000)  # 60 s since the last application poll
    leave = only(g.poll(), m.LeaveGroupRequest)
    assert leave.request.member_id == "m1"
    assert [x.member_id for x in wire_leave(leave)] == ["m1"]
    assert g.state is MemberState.UNJOINED
    answer(leave, g.now, m.LeaveGroupResponse(), 5)
    g.advance(10_000)
    assert kinds(g.poll()) == []  # waits for the application
    g.member.on_application_poll(g.now)
    (event,) = g.member.drain_events()
    assert event == PartitionsLost(frozenset({T0}))
    g.member.on_revocation_done(g.now)
    join = only(g.poll(), m.JoinGroupRequest)
    assert join.request.member_id == ""


def wire_leave(req: object) -> list[m.LeaveGroupRequest.MemberIdentity]:
    from .support import wire

    return wire(req.request, 5).members  # type: ignore[attr-defined]


def test_leave_on_close_revokes_then_sends_leave_group() -> None:
    g = Group()
    g.join_stable([T0])
    g.member.leave(g.now)
    assert g.member.is_leaving
    (event,) = g.member.drain_events()
    assert event == RevokePartitions(frozenset({T0}))
    assert g.member.generation_if_stable() is not None  # commit-before-revoke still allowed
    assert kinds(g.poll()) == []
    g.member.on_revocation_done(g.now)
    leave = only(g.poll(), m.LeaveGroupRequest)
    assert leave.request.members[0].reason == "the consumer is being closed"
    answer(leave, g.now, m.LeaveGroupResponse(), 3)
    assert g.state is MemberState.UNJOINED and not g.member.is_leaving


def test_static_member_does_not_send_leave_group_on_close() -> None:
    g = Group(group_instance_id="instance-1")
    g.join_stable([T0])
    g.member.leave(g.now)
    g.member.drain_events()
    g.member.on_revocation_done(g.now)
    assert kinds(g.poll()) == []
    assert g.state is MemberState.UNJOINED


def test_join_coordinator_error_rediscovers_and_retries_after_backoff() -> None:
    g = Group()
    g.discover()
    g.member.on_application_poll(0)
    g.join_response(only(g.poll(), m.JoinGroupRequest), error=COORDINATOR_NOT_AVAILABLE)
    assert g.coordinator.coordinator is None
    g.advance(100)
    g.discover(2)
    assert kinds(g.member.poll(g.now).requests) == []  # join backoff: 100 * 2**1
    g.advance(100)
    join = only(g.member.poll(g.now).requests, m.JoinGroupRequest)
    assert join.node_id == coordinator_connection_id(2)


def test_sync_rebalance_in_progress_rejoins_at_once() -> None:
    g = Group()
    g.discover()
    g.member.on_application_poll(0)
    g.join_response(only(g.poll(), m.JoinGroupRequest))
    g.sync_response(only(g.poll(), m.SyncGroupRequest), [], error=REBALANCE_IN_PROGRESS)
    assert g.state is MemberState.JOINING
    assert kinds(g.poll()) == ["JoinGroupRequest"]


def test_group_authorization_failure_on_join_is_fatal() -> None:
    g = Group()
    g.discover()
    g.member.on_application_poll(0)
    g.join_response(only(g.poll(), m.JoinGroupRequest), error=GROUP_AUTHORIZATION_FAILED)
    (event,) = g.member.drain_events()
    assert isinstance(event, GroupError) and isinstance(event.error, GroupAuthorizationFailedError)
    assert g.state is MemberState.FATAL


def test_leader_rejoins_when_partition_counts_change() -> None:
    g = Group()
    g.discover()
    g.member.on_application_poll(0)
    join = only(g.poll(), m.JoinGroupRequest)
    g.join_response(join, leader="m1", members=[("m1", g.own_subscription(join))])
    g.sync_response(only(g.poll(), m.SyncGroupRequest), [T0, T1, T2, T3])
    g.member.on_assignment_done(g.now)
    g.member.drain_events()
    g.cluster = cluster({"t": 4}, version=2)  # same counts: nothing to do
    assert kinds(g.poll()) == [] and g.state is MemberState.STABLE
    g.cluster = cluster({"t": 6}, version=3)
    g.poll()
    assert g.state is MemberState.REVOKING


def test_subscription_change_triggers_a_rejoin() -> None:
    g = Group(topics={"t": 4, "u": 2})
    g.join_stable([T0])
    g.subs.subscribe(["t", "u"])
    g.poll()
    assert isinstance(g.member.drain_events()[0], RevokePartitions)
    g.member.on_revocation_done(g.now)
    assert g.own_subscription(only(g.poll(), m.JoinGroupRequest)).topics == ("t", "u")


def test_join_waits_for_metadata_of_every_subscribed_topic() -> None:
    g = Group()
    g.subs.subscribe(["t", "new"])
    g.discover()
    g.member.on_application_poll(g.now)
    assert not any(isinstance(r.request, m.JoinGroupRequest) for r in g.poll())
    g.cluster = cluster({"t": 4, "new": 1}, version=2)
    assert g.own_subscription(only(g.poll(), m.JoinGroupRequest)).topics == ("new", "t")


def test_session_timeout_marks_the_coordinator_unknown() -> None:
    g = Group()
    g.join_stable([T0])
    g.advance(3000)
    only(g.poll(), m.HeartbeatRequest)  # never answered
    g.advance(7000)
    g.poll()
    assert g.coordinator.coordinator is None


def test_invalid_configuration_is_rejected() -> None:
    with pytest.raises(KafkaConfigError, match="session_timeout_ms"):
        Group(heartbeat_interval_ms=10_000)
