"""ConsumerMembershipManager (KIP-848) on a fake clock: every state and transition — join,
reconcile (revoke, assign, acknowledge), fencing, unknown topic ids, poll timeout, leave."""

from __future__ import annotations

import uuid

import pytest

from kafkaio.consumer.group.consumer_membership import (
    LEAVE_EPOCH,
    LEAVE_STATIC_EPOCH,
    ConsumerMembershipManager,
    ConsumerMemberState,
)
from kafkaio.consumer.group.coordinator import CoordinatorManager
from kafkaio.consumer.group.events import (
    AssignPartitions,
    GroupError,
    PartitionsLost,
    RevokePartitions,
)
from kafkaio.consumer.subscription import SubscriptionState
from kafkaio.errors import UnreleasedInstanceIdError
from kafkaio.metadata.cluster import (
    BrokerNode,
    ClusterMetadata,
    PartitionInfo,
    TopicInfo,
)
from kafkaio.metadata.cluster import TopicPartition as TP
from kafkaio.protocol import messages as m
from kafkaio.runtime.requests import UnsentRequest

from .support import answer, discover, fail, only

S = ConsumerMemberState
T_ID = uuid.UUID(int=0xAA)
U_ID = uuid.UUID(int=0xBB)
T0, T1, T2, T3 = (TP("t", p) for p in range(4))
Resp = m.ConsumerGroupHeartbeatResponse
FENCED_MEMBER_EPOCH = 110
UNKNOWN_MEMBER_ID = 25
NOT_COORDINATOR = 16
UNRELEASED_INSTANCE_ID = 111
REQUEST_TIMED_OUT = 7


def _cluster(topics: dict[str, tuple[uuid.UUID, int]], version: int = 1) -> ClusterMetadata:
    infos = {
        name: TopicInfo(
            name, tid, False, tuple(PartitionInfo(name, p, 1, 0, (1,), (1,)) for p in range(n))
        )
        for name, (tid, n) in topics.items()
    }
    return ClusterMetadata(brokers={1: BrokerNode(1, "b1", 9092)}, topics=infos, version=version)


class Member:
    def __init__(self, **options: object) -> None:
        self.now = 0.0
        self.subs = SubscriptionState()
        self.subs.subscribe(["t"])
        self.coordinator = CoordinatorManager("g", 100, 1000, backoff_jitter=0)
        self.cluster = _cluster({"t": (T_ID, 4)})
        self.metadata_requests = 0
        self.member = ConsumerMembershipManager(
            "g",
            self.subs,
            self.coordinator,
            lambda: self.cluster,
            request_metadata=self._request_metadata,
            member_id="me",
            max_poll_interval_ms=60_000,
            backoff_jitter=0,
            **options,  # type: ignore[arg-type]
        )
        discover(self.coordinator, self.now)

    def _request_metadata(self) -> None:
        self.metadata_requests += 1

    @property
    def state(self) -> ConsumerMemberState:
        return self.member.state

    def poll(self, after: float = 0) -> list[UnsentRequest]:
        self.now += after
        return self.coordinator.poll(self.now).requests + self.member.poll(self.now).requests

    def heartbeat(self, after: float = 0) -> UnsentRequest:
        return only(self.poll(after), m.ConsumerGroupHeartbeatRequest)

    def respond(
        self,
        req: UnsentRequest,
        *,
        epoch: int = 1,
        assignment: list[TP] | None = None,
        error: int = 0,
        interval: int = 1000,
        ids: dict[str, uuid.UUID] | None = None,
    ) -> None:
        ids = ids or {"t": T_ID, "u": U_ID}
        assigned = None
        if assignment is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in sorted(assignment):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            assigned = Resp.Assignment(
                [Resp.TopicPartitions(ids[t], ps) for t, ps in by_topic.items()]
            )
        resp = Resp(
            error_code=error,
            member_id="me" if not error else None,
            member_epoch=epoch,
            heartbeat_interval_ms=interval,
            assignment=assigned,
        )
        answer(req, self.now, resp, 1)

    def joined(self, partitions: list[TP], epoch: int = 1) -> None:
        """From UNSUBSCRIBED to STABLE owning `partitions`."""
        self.member.on_application_poll(self.now)
        self.respond(self.heartbeat(), epoch=epoch, assignment=partitions)
        events = self.member.drain_events()
        assert events == [AssignPartitions(frozenset(partitions))]
        self.member.on_assignment_done(self.now)
        assert self.state is S.ACKNOWLEDGING
        ack = self.heartbeat()
        assert self.state is S.STABLE
        owned = {(t.topic_id, p) for t in ack.request.topic_partitions for p in t.partitions}
        assert owned == {(T_ID, tp.partition) for tp in partitions}
        self.respond(ack, epoch=epoch)


def test_join_sends_every_field_with_epoch_zero_then_reconciles_and_acknowledges() -> None:
    g = Member(group_instance_id="i1", remote_assignor="uniform", rack_id="r1")
    assert g.state is S.UNSUBSCRIBED and g.poll() == []  # nothing before the app polls
    g.member.on_application_poll(g.now)
    assert g.state is S.JOINING
    hb = g.heartbeat()
    r = hb.request
    assert (r.member_id, r.member_epoch, r.instance_id, r.rack_id) == ("me", 0, "i1", "r1")
    assert (r.subscribed_topic_names, r.subscribed_topic_regex) == (["t"], "")
    assert (r.server_assignor, r.rebalance_timeout_ms, r.topic_partitions) == (
        "uniform",
        60_000,
        [],
    )
    assert g.member.generation_if_stable() is None
    g.respond(hb, epoch=3, assignment=[T0, T1])
    assert g.state is S.RECONCILING and g.member.member_epoch == 3
    assert g.member.drain_events() == [AssignPartitions(frozenset({T0, T1}))]
    assert g.subs.assigned_partitions() == {T0, T1}
    assert g.poll() == []  # the acknowledgement waits for the app
    g.member.on_assignment_done(g.now)
    assert g.state is S.ACKNOWLEDGING
    ack = g.heartbeat()
    assert g.state is S.STABLE
    assert [(t.topic_id, t.partitions) for t in ack.request.topic_partitions] == [(T_ID, [0, 1])]
    assert g.member.generation_if_stable() is not None
    assert g.member.generation_if_stable().generation_id == 3  # type: ignore[union-attr]


def test_stable_heartbeats_follow_the_coordinators_interval_and_send_only_changes() -> None:
    g = Member()
    g.joined([T0])
    assert g.poll(999) == []
    hb = g.heartbeat(1)
    assert hb.request.subscribed_topic_names is None and hb.request.topic_partitions is None
    assert hb.request.member_epoch == 1
    g.respond(hb, interval=250)
    assert g.poll(249) == []
    g.subs.subscribe(["t", "u"])  # a subscription change goes out at once
    assert g.heartbeat().request.subscribed_topic_names == ["t", "u"]


def test_new_target_revokes_first_then_assigns_only_added_partitions() -> None:
    g = Member()
    g.joined([T0, T1])
    g.respond(g.heartbeat(1000), epoch=2, assignment=[T1, T2])
    assert g.state is S.RECONCILING
    assert g.member.drain_events() == [RevokePartitions(frozenset({T0}))]
    assert g.subs.state(T0).pending_revocation
    assert g.member.generation_if_stable() is not None  # commit before revoke is allowed
    g.member.on_revocation_done(g.now)
    assert g.member.drain_events() == [AssignPartitions(frozenset({T2}))]
    assert g.subs.assigned_partitions() == {T1, T2}
    g.member.on_assignment_done(g.now)
    ack = g.heartbeat()
    assert [(t.topic_id, t.partitions) for t in ack.request.topic_partitions] == [(T_ID, [1, 2])]
    assert g.state is S.STABLE


def test_newer_target_during_reconciliation_waits_for_the_current_one() -> None:
    g = Member()
    g.joined([T0, T1])
    g.respond(g.heartbeat(1000), epoch=2, assignment=[T1])
    assert g.member.drain_events() == [RevokePartitions(frozenset({T0}))]
    # the heartbeat goes on while the app revokes; the owned partitions are reported
    hb = g.heartbeat(1000)
    assert hb.request.topic_partitions is not None
    g.respond(hb, epoch=3, assignment=[T1, T3])
    assert g.member.drain_events() == []
    g.member.on_revocation_done(g.now)
    assert g.member.drain_events() == [AssignPartitions(frozenset())]
    g.member.on_assignment_done(g.now)
    assert g.state is S.ACKNOWLEDGING
    g.poll()  # the waiting target starts now
    assert g.state is S.RECONCILING
    assert g.member.drain_events() == [AssignPartitions(frozenset({T3}))]


def test_unknown_topic_id_waits_for_metadata() -> None:
    g = Member()
    g.member.on_application_poll(g.now)
    g.respond(g.heartbeat(), assignment=[T0, TP("u", 0)])
    assert g.state is S.RECONCILING and g.member.drain_events() == []
    assert g.metadata_requests == 1
    g.cluster = _cluster({"t": (T_ID, 4), "u": (U_ID, 1)}, version=2)
    g.poll()
    assert g.member.drain_events() == [AssignPartitions(frozenset({T0, TP("u", 0)}))]


@pytest.mark.parametrize("code", [FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID])
def test_fenced_member_loses_partitions_and_rejoins_with_epoch_zero(code: int) -> None:
    g = Member()
    g.joined([T0, T1], epoch=5)
    g.respond(g.heartbeat(1000), error=code)
    assert g.state is S.FENCED
    assert g.member.drain_events() == [PartitionsLost(frozenset({T0, T1}))]
    assert g.poll() == []  # no heartbeat until the app dropped them
    g.member.on_revocation_done(g.now)
    assert g.state is S.JOINING and g.subs.assigned_partitions() == set()
    hb = g.heartbeat()
    assert (hb.request.member_id, hb.request.member_epoch) == ("me", 0)
    assert hb.request.topic_partitions == []


def test_fenced_member_without_partitions_rejoins_at_once() -> None:
    g = Member()
    g.joined([])
    g.respond(g.heartbeat(1000), error=FENCED_MEMBER_EPOCH)
    assert g.state is S.JOINING and g.member.drain_events() == []


def test_coordinator_errors_and_timeouts_retry_after_a_backoff() -> None:
    g = Member()
    g.joined([T0])
    g.respond(g.heartbeat(1000), error=NOT_COORDINATOR)
    assert g.coordinator.coordinator is None and g.state is S.STABLE
    discover(g.coordinator, g.now)
    assert g.poll(99) == []
    hb = g.heartbeat(1)
    assert hb.request.subscribed_topic_names == ["t"]  # everything again after a failure
    fail(hb, g.now, TimeoutError("lost"))
    assert g.state is S.STABLE


def test_non_fatal_error_is_reported_and_retried() -> None:
    g = Member()
    g.joined([T0])
    g.respond(g.heartbeat(1000), error=REQUEST_TIMED_OUT)
    (event,) = g.member.drain_events()
    assert isinstance(event, GroupError) and not event.fatal
    assert g.state is S.STABLE
    assert g.heartbeat(200).request.member_epoch == 1


def test_fatal_error_stops_the_member() -> None:
    g = Member(group_instance_id="i1")
    g.member.on_application_poll(g.now)
    g.respond(g.heartbeat(), error=UNRELEASED_INSTANCE_ID)
    assert g.state is S.FATAL
    (event,) = g.member.drain_events()
    assert isinstance(event, GroupError) and event.fatal
    assert isinstance(g.member.fatal_error, UnreleasedInstanceIdError)
    assert g.poll(10_000) == []


@pytest.mark.parametrize(("instance", "epoch"), [(None, LEAVE_EPOCH), ("i1", LEAVE_STATIC_EPOCH)])
def test_leave_revokes_then_sends_the_leave_epoch(instance: str | None, epoch: int) -> None:
    g = Member(group_instance_id=instance)
    g.joined([T0])
    g.member.leave(g.now)
    assert g.state is S.PREPARE_LEAVING and g.member.is_leaving
    assert g.member.drain_events() == [RevokePartitions(frozenset({T0}))]
    assert g.poll(5000) == []  # nothing while the app revokes
    g.member.on_revocation_done(g.now)
    assert g.state is S.LEAVING
    leave = g.heartbeat()
    assert (leave.request.member_epoch, leave.request.instance_id) == (epoch, instance)
    g.respond(leave, epoch=epoch)
    assert g.state is S.UNSUBSCRIBED and not g.member.is_leaving
    assert g.poll(10_000) == []  # no rejoin without an application poll


def test_leave_while_revoking_revokes_the_rest() -> None:
    g = Member()
    g.joined([T0, T1])
    g.respond(g.heartbeat(1000), epoch=2, assignment=[T1])
    assert g.member.drain_events() == [RevokePartitions(frozenset({T0}))]
    g.member.leave(g.now)
    g.member.on_revocation_done(g.now)
    assert g.member.drain_events() == [RevokePartitions(frozenset({T1}))]
    g.member.on_revocation_done(g.now)
    assert g.state is S.LEAVING


def test_leave_without_a_coordinator_finishes_locally() -> None:
    g = Member()
    g.joined([])
    g.coordinator.mark_unknown(g.now, "test")
    g.member.leave(g.now)
    g.member.poll(g.now)
    assert g.state is S.UNSUBSCRIBED


def test_poll_timeout_leaves_goes_stale_loses_partitions_and_rejoins_on_poll() -> None:
    g = Member()
    g.joined([T0, T1], epoch=4)
    requests = g.poll(60_000)
    leave = only(requests, m.ConsumerGroupHeartbeatRequest)
    assert leave.request.member_epoch == LEAVE_EPOCH
    assert g.state is S.STALE
    assert g.member.drain_events() == [PartitionsLost(frozenset({T0, T1}))]
    g.member.on_revocation_done(g.now)
    assert g.poll(10_000) == []
    g.member.on_application_poll(g.now)
    assert g.state is S.JOINING
    assert g.heartbeat().request.member_epoch == 0
