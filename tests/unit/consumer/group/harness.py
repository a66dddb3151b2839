"""A fake-clock harness around ClassicMembershipManager + CommitManager for timeline tests.

Tests move `now`, call `poll`, and answer requests with generated response dataclasses.
"""

from __future__ import annotations

from typing import Any

from kafkaio.consumer.group.commit import CommitManager
from kafkaio.consumer.group.consumer_protocol import (
    Assignment,
    Subscription,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kafkaio.consumer.group.coordinator import CoordinatorManager
from kafkaio.consumer.group.membership import ClassicMembershipManager, MemberState
from kafkaio.consumer.subscription import SubscriptionState
from kafkaio.metadata.cluster import ClusterMetadata, TopicPartition
from kafkaio.protocol import messages as m
from kafkaio.runtime.requests import UnsentRequest

from .support import answer, cluster, discover, only

JoinResp = m.JoinGroupResponse
Member = m.JoinGroupResponse.JoinGroupResponseMember


class Group:
    """One member of group "g" subscribed to topic "t" (4 partitions), coordinator node 1."""

    def __init__(self, *, topics: dict[str, int] | None = None, **member_options: Any) -> None:
        self.now = 0.0
        self.subs = SubscriptionState()
        self.subs.subscribe(["t"])
        self.coordinator = CoordinatorManager("g", 100, 1000, backoff_jitter=0)
        self.cluster: ClusterMetadata = cluster(topics or {"t": 4})
        options: dict[str, Any] = {
            "heartbeat_interval_ms": 3000,
            "session_timeout_ms": 10_000,
            "max_poll_interval_ms": 60_000,
            "backoff_jitter": 0,
        }
        options.update(member_options)
        self.member = ClassicMembershipManager(
            "g", self.subs, self.coordinator, lambda: self.cluster, **options
        )
        self.protocol_name = self.member._assignors[0].name
        self.commits = CommitManager(
            "g",
            self.subs,
            self.coordinator,
            self.member,
            auto_commit_interval_ms=5000,
            backoff_jitter=0,
        )

    @property
    def state(self) -> MemberState:
        return self.member.state

    def advance(self, ms: float) -> None:
        self.now += ms

    def poll(self, *, commits: bool = False) -> list[UnsentRequest]:
        """One driver turn: coordinator, membership (and the commit manager if asked)."""
        out: list[UnsentRequest] = []
        managers: list[Any] = [self.coordinator, self.member]
        if commits:
            managers.append(self.commits)
        for manager in managers:
            out.extend(manager.poll(self.now).requests)
        return out

    def poll_after(self, ms: float) -> list[UnsentRequest]:
        self.advance(ms)
        return self.poll()

    def discover(self, node_id: int = 1) -> None:
        discover(self.coordinator, self.now, node_id)

    def join_response(
        self,
        req: UnsentRequest,
        *,
        generation: int = 1,
        member_id: str = "m1",
        leader: str = "other",
        members: list[tuple[str, Subscription]] | None = None,
        error: int = 0,
        version: int = 9,
    ) -> None:
        resp = JoinResp(
            error_code=error,
            generation_id=generation,
            protocol_type="consumer",
            protocol_name=self.protocol_name,
            leader=leader,
            member_id=member_id,
            members=[Member(mid, None, encode_subscription(s)) for mid, s in members or []],
        )
        answer(req, self.now, resp, version)

    def sync_response(
        self, req: UnsentRequest, partitions: list[TopicPartition], error: int = 0
    ) -> None:
        resp = m.SyncGroupResponse(
            error_code=error,
            protocol_type="consumer",
            protocol_name=self.protocol_name,
            assignment=encode_assignment(Assignment(tuple(partitions))) if not error else b"",
        )
        answer(req, self.now, resp, 5)

    def heartbeat_response(self, req: UnsentRequest, error: int = 0) -> None:
        answer(req, self.now, m.HeartbeatResponse(error_code=error), 4)

    def join_stable(self, partitions: list[TopicPartition], generation: int = 1) -> None:
        """From scratch (or from JOINING) to STABLE as a follower."""
        if self.coordinator.coordinator is None:
            self.discover()
        self.member.on_application_poll(self.now)
        self.member.drain_events()
        join = only(self.poll(), m.JoinGroupRequest)
        self.join_response(join, generation=generation)
        sync = only(self.poll(), m.SyncGroupRequest)
        self.sync_response(sync, partitions)
        self.member.drain_events()
        self.member.on_assignment_done(self.now)
        assert self.state is MemberState.STABLE

    @staticmethod
    def own_subscription(req: UnsentRequest) -> Subscription:
        (protocol,) = req.request.protocols
        return decode_subscription(protocol.metadata)
