"""ClassicMembershipManager: a member of a classic (JoinGroup/SyncGroup) group, eager or
cooperative (KIP-429) rebalancing.

Sans-I/O state machine: `poll(now)` yields JoinGroup/SyncGroup/Heartbeat/LeaveGroup requests;
application-side steps (revoke, assign, lose partitions) come out of `drain_events`.
"""

from __future__ import annotations

import enum
import logging
import math
import random
from collections.abc import Callable, Sequence
from typing import Any

from kafkaio.backoff import ExponentialBackoff
from kafkaio.consumer.group.assignors import (
    ConsumerPartitionAssignor,
    RangeAssignor,
    RebalanceProtocol,
    assign_with_racks,
    common_protocol,
    partition_racks,
)
from kafkaio.consumer.group.consumer_protocol import (
    PROTOCOL_TYPE,
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kafkaio.consumer.group.coordinator import Coordinator, CoordinatorManager
from kafkaio.consumer.group.events import (
    AssignPartitions,
    GroupError,
    MembershipEvent,
    PartitionsLost,
    RevokePartitions,
)
from kafkaio.consumer.group.generation import NO_GENERATION, Generation
from kafkaio.consumer.group.heartbeat import HeartbeatTimers
from kafkaio.consumer.group.transitions import check_transition
from kafkaio.consumer.subscription import SubscriptionState
from kafkaio.errors import (
    BrokerResponseError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    KafkaConfigError,
    KafkaError,
    KafkaProtocolError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnsupportedVersionError,
    error_for_code,
)
from kafkaio.metadata.cluster import ClusterMetadata, TopicPartition
from kafkaio.protocol.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafkaio.runtime.requests import PollResult, UnsentRequest

log = logging.getLogger("kafkaio.consumer.group")

JOIN_GROUP_TIMEOUT_LAPSE_MS = 5000  # JoinGroup may wait the rebalance timeout, plus this
MAX_REASON_LENGTH = 255

_COORDINATOR_ERRORS = (CoordinatorNotAvailableError, NotCoordinatorError)
_FENCING_ERRORS = (IllegalGenerationError, UnknownMemberIdError, FencedInstanceIdError)
# JoinGroup/SyncGroup errors after which the member stops (Java raises them to the app)
_FATAL_JOIN_ERRORS = (
    FencedInstanceIdError,
    InconsistentGroupProtocolError,
    InvalidSessionTimeoutError,
    InvalidGroupIdError,
    GroupAuthorizationFailedError,
    GroupMaxSizeReachedError,
    UnsupportedVersionError,
)


class MemberState(enum.Enum):
    UNJOINED = "unjoined"  # not in the group (never joined, left, fenced out or expired)
    REVOKING = "revoking"  # waiting for the app to revoke/lose partitions before joining
    JOINING = "joining"  # JoinGroup to send, or in flight
    AWAITING_SYNC = "awaiting_sync"  # joined a generation: SyncGroup to send, or in flight
    # cooperative: SyncGroup took partitions away; waiting for the app to revoke them before
    # the rest of the new assignment is taken (then the member rejoins)
    REVOKING_ASSIGNED = "revoking_assigned"
    ASSIGNING = "assigning"  # waiting for the app to take the new assignment
    STABLE = "stable"
    PREPARING_LEAVE = "preparing_leave"  # leave(): waiting for the app to revoke partitions
    LEAVING = "leaving"  # LeaveGroup to send, or in flight
    FATAL = "fatal"  # stopped by a fatal error; see `fatal_error`


S = MemberState
_TRANSITIONS: dict[MemberState, frozenset[MemberState]] = {
    S.UNJOINED: frozenset({S.REVOKING, S.JOINING, S.PREPARING_LEAVE, S.LEAVING, S.FATAL}),
    S.REVOKING: frozenset({S.JOINING, S.PREPARING_LEAVE, S.FATAL}),
    S.JOINING: frozenset(
        {S.REVOKING, S.AWAITING_SYNC, S.UNJOINED, S.PREPARING_LEAVE, S.LEAVING, S.FATAL}
    ),
    S.AWAITING_SYNC: frozenset(
        {
            S.REVOKING,
            S.REVOKING_ASSIGNED,
            S.ASSIGNING,
            S.JOINING,
            S.UNJOINED,
            S.PREPARING_LEAVE,
            S.LEAVING,
            S.FATAL,
        }
    ),
    S.REVOKING_ASSIGNED: frozenset({S.ASSIGNING, S.REVOKING, S.PREPARING_LEAVE, S.FATAL}),
    S.ASSIGNING: frozenset(
        {S.STABLE, S.REVOKING, S.JOINING, S.UNJOINED, S.PREPARING_LEAVE, S.LEAVING, S.FATAL}
    ),
    S.STABLE: frozenset({S.REVOKING, S.JOINING, S.UNJOINED, S.PREPARING_LEAVE, S.LEAVING, S.FATAL}),
    S.PREPARING_LEAVE: frozenset({S.LEAVING, S.FATAL}),
    S.LEAVING: frozenset({S.UNJOINED, S.FATAL}),
    S.FATAL: frozenset(),
}
_IN_GROUP = frozenset(
    {S.JOINING, S.AWAITING_SYNC, S.REVOKING_ASSIGNED, S.ASSIGNING, S.STABLE, S.REVOKING}
)
_HEARTBEAT_STATES = frozenset(
    {S.AWAITING_SYNC, S.REVOKING_ASSIGNED, S.ASSIGNING, S.STABLE, S.REVOKING, S.PREPARING_LEAVE}
)


class IllegalStateTransition(KafkaError):
    """A bug: the membership state machine was asked for a transition it does not allow."""


def _reason(text: str) -> str:
    return text[:MAX_REASON_LENGTH]


class ClassicMembershipManager:
    """Joins, syncs, heartbeats and leaves a classic consumer group.

    The rebalance protocol follows the assignors (`common_protocol`): EAGER revokes every
    partition before each JoinGroup; COOPERATIVE (all assignors support it, e.g.
    "cooperative-sticky") keeps owned partitions through the rebalance, sends them in the
    subscription, revokes only what the new assignment dropped (RevokePartitions, state
    REVOKING_ASSIGNED), hands out only what it added (AssignPartitions), and rejoins after a
    revocation so the released partitions reach their new owner (KIP-429's second round).

    How the reactor drives it:

    * `poll(now)` every loop (a RequestManager): sends go to
      ``coordinator.connection_id``; handlers run the transitions.
    * `on_application_poll(now)` whenever the application polls. The member first joins
      after the first application poll, and if the application does not poll for
      ``max_poll_interval_ms`` it leaves the group (LeaveGroup, dynamic members only) and
      rejoins at the next application poll, as the Java client does.
    * `drain_events()` after each poll/handler and after `on_application_poll`; run each
      event on the application side in order: `RevokePartitions` (commit consumed offsets
      first, then the listener) and `PartitionsLost` end with `on_revocation_done(now)`;
      `AssignPartitions` ends with `on_assignment_done(now)`; `GroupError` is raised
      from the application's poll.
    * `leave(now)` on close or unsubscribe (before clearing the subscription); the member
      revokes its partitions through the same events, sends LeaveGroup unless it is a static
      member, and ends in UNJOINED (`is_leaving` turns False).

    Heartbeats follow their own schedule (``heartbeat_interval_ms``) from `poll`, so a slow
    application never starves them. The leader reads partition counts from ``cluster()``;
    the reactor should keep metadata for `group_subscription` fresh, and the leader rejoins
    when those counts change.
    """

    def __init__(
        self,
        group_id: str,
        subscriptions: SubscriptionState,
        coordinator: CoordinatorManager,
        cluster: Callable[[], ClusterMetadata],
        *,
        assignors: Sequence[ConsumerPartitionAssignor] | None = None,
        group_instance_id: str | None = None,
        session_timeout_ms: int = 45_000,
        rebalance_timeout_ms: int | None = None,
        heartbeat_interval_ms: int = 3_000,
        max_poll_interval_ms: int = 300_000,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 1000,
        rack_id: str | None = None,
        backoff_jitter: float = 0.2,
        rng: Callable[[], float] = random.random,
    ) -> None:
        if not group_id:
            raise KafkaConfigError("group_id is empty; set a group id to use subscribe()")
        if heartbeat_interval_ms >= session_timeout_ms:
            raise KafkaConfigError(
                f"heartbeat_interval_ms ({heartbeat_interval_ms}) must be lower than "
                f"session_timeout_ms ({session_timeout_ms}); a third of it is typical"
            )
        chosen = list(assignors) if assignors is not None else [RangeAssignor()]
        if not chosen:
            raise KafkaConfigError("partition_assignment_strategy is empty; name at least one")
        names = [a.name for a in chosen]
        if len(set(names)) != len(names) or not all(names):
            raise KafkaConfigError(f"assignor names must be unique and non-empty, got {names}")
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self._subscriptions = subscriptions
        self._coordinator = coordinator
        self._cluster = cluster
        self._assignors = chosen
        self._assignor_by_name = {a.name: a for a in chosen}
        self.protocol = common_protocol(chosen)
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = (
            max_poll_interval_ms if rebalance_timeout_ms is None else rebalance_timeout_ms
        )
        self._request_timeout_ms = request_timeout_ms
        self._rack_id = rack_id
        self._backoff = ExponentialBackoff(
            retry_backoff_ms, retry_backoff_max_ms, jitter=backoff_jitter, rng=rng
        )
        self._hb = HeartbeatTimers(
            interval_ms=heartbeat_interval_ms,
            session_timeout_ms=session_timeout_ms,
            max_poll_interval_ms=max_poll_interval_ms,
            retry_backoff_ms=retry_backoff_ms,
        )
        self._state = MemberState.UNJOINED
        # called with (old state, new state) values on every transition (metrics)
        self.on_transition: Callable[[str, str], None] | None = None
        self.generation: Generation = NO_GENERATION
        self.fatal_error: KafkaError | None = None
        self._events: list[MembershipEvent] = []
        self._app_polled = False
        self._rejoin_needed = True
        self._rejoin_reason = "initial join"
        # one round = JoinGroup + SyncGroup; bumped on reset so stale responses are dropped
        self._round = 0
        self._join_in_flight = False
        self._join_failures = 0
        self._next_join_ms = -math.inf
        self._pending_sync: SyncGroupRequest | None = None
        self._sync_in_flight = False
        self._leave_in_flight = False
        self._leave_reason = ""
        self._joined_topics: frozenset[str] = frozenset()
        self._is_leader = False
        self._leader_counts: dict[str, int] = {}
        self._leader_racks: dict[TopicPartition, frozenset[str]] = {}  # KIP-881
        self._leader_metadata_version = -1
        self._group_topics: frozenset[str] = frozenset()
        self._seen_coordinator_epoch = -1
        self._revoking: frozenset[TopicPartition] = frozenset()  # out for the app to revoke
        self._pending_assignment: frozenset[TopicPartition] = frozenset()

    # -- state ---------------------------------------------------------------------------

    @property
    def state(self) -> MemberState:
        return self._state

    @property
    def is_leader(self) -> bool:
        return self._is_leader

    @property
    def is_leaving(self) -> bool:
        """True from `leave` until the member is out of the group."""
        return self._state in (S.PREPARING_LEAVE, S.LEAVING)

    @property
    def group_subscription(self) -> frozenset[str]:
        """Topics whose metadata this member needs: its own, plus, for the leader, every
        member's (the leader assigns them all)."""
        return self._subscriptions.subscription() | self._group_topics

    def generation_if_stable(self) -> Generation | None:
        """The generation offsets may be committed with, or None during a (re)join.

        Commits before a revocation (REVOKING/PREPARING_LEAVE) still use the old generation,
        which the coordinator accepts until the member rejoins.
        """
        if self._state in (S.STABLE, S.ASSIGNING):
            return self.generation
        revoking = (S.REVOKING, S.REVOKING_ASSIGNED, S.PREPARING_LEAVE)
        if self._state in revoking and self.generation.is_valid:
            return self.generation
        return None

    @property
    def rebalance_in_progress(self) -> bool:
        return self._state in (S.JOINING, S.AWAITING_SYNC)

    def drain_events(self) -> list[MembershipEvent]:
        """The application-side steps to run, oldest first."""
        events, self._events = self._events, []
        return events

    # -- the one transition function -------------------------------------------------------

    def _transition(self, to: MemberState, reason: str) -> None:
        if to is self._state:
            return
        check_transition(
            self.group_id,
            _TRANSITIONS,
            self._state,
            to,
            reason,
            IllegalStateTransition,
            self.on_transition,
        )
        self._state = to

    # -- calls from the reactor ----------------------------------------------------------

    @property
    def needs_application_poll(self) -> bool:
        """Whether the next application poll starts a (re)join (it must not wait)."""
        return self._state is S.UNJOINED and self._subscriptions.has_auto_assignment()

    def on_application_poll(self, now: float) -> None:
        """The application polled: restart the max-poll-interval clock, and (re)join if the
        member is out of the group (first poll, or after the interval expired)."""
        self._hb.polled(now)
        self._app_polled = True
        if self._state is S.UNJOINED and self._subscriptions.has_auto_assignment():
            self._start_rejoin(now, self._rejoin_reason or "application polled")

    def request_rejoin(self, reason: str) -> None:
        """Rejoin at the next opportunity (e.g. the subscription changed)."""
        if not self._rejoin_needed:
            log.info("group %r: rejoin requested: %s", self.group_id, reason)
        self._rejoin_needed = True
        self._rejoin_reason = reason

    def on_revocation_done(self, now: float) -> None:
        """The application finished `RevokePartitions`/`PartitionsLost`."""
        state = self._state
        if state not in (S.REVOKING, S.REVOKING_ASSIGNED, S.PREPARING_LEAVE):
            return  # a late acknowledgement after the state moved on
        revoked, self._revoking = self._revoking, frozenset()
        subs = self._subscriptions
        if not subs.has_auto_assignment():
            kept: frozenset[TopicPartition] = frozenset()
        else:
            kept = frozenset(subs.assigned_partitions()) - revoked
            subs.assign_from_subscribed(kept)
        if state is S.PREPARING_LEAVE:
            if kept:  # leaving while a partial (cooperative) revocation was out
                self._emit_revocation(kept, lost=not self.generation.is_valid)
            else:
                self._transition(S.LEAVING, "partitions revoked before leaving")
        elif kept and not self.generation.is_valid:
            # the generation was reset (poll timeout, fencing) while a partial revocation
            # was out: the partitions still held are lost too (Java's onJoinPrepare), and a
            # new assignment from the void generation is dropped
            self._pending_assignment = frozenset()
            self._emit_revocation(kept, lost=True)
            self._transition(S.REVOKING, "generation reset while revoking")
        elif state is S.REVOKING:
            self._transition(S.JOINING, "partitions revoked")
        else:
            self._take_assignment(now, self._pending_assignment, kept, revoked=True)

    def on_assignment_done(self, now: float) -> None:
        """The application finished `AssignPartitions`."""
        if self._state is S.ASSIGNING:
            self._transition(S.STABLE, "assignment taken")

    def leave(self, now: float, reason: str = "the consumer is being closed") -> None:
        """Leave the group: revoke partitions (via events), then LeaveGroup unless static."""
        self._leave_reason = reason
        state = self._state
        if state in (S.PREPARING_LEAVE, S.LEAVING, S.FATAL):
            return
        held = frozenset(self._subscriptions.assigned_partitions())
        if state in (S.REVOKING, S.REVOKING_ASSIGNED):
            # a revocation is already out; its acknowledgement revokes the rest, if any
            self._transition(S.PREPARING_LEAVE, reason)
            return
        if state is S.UNJOINED and not held:
            return
        if held:
            lost = not self.generation.is_valid or state in (S.JOINING, S.AWAITING_SYNC)
            self._emit_revocation(held, lost)
            self._transition(S.PREPARING_LEAVE, reason)
        else:
            self._transition(S.LEAVING, reason)

    # -- request manager -----------------------------------------------------------------

    def poll(self, now: float) -> PollResult:
        if self._state is S.FATAL:
            return PollResult()
        requests: list[UnsentRequest[Any]] = []
        coordinator = self._coordinator.coordinator
        if coordinator is not None and self._coordinator.epoch != self._seen_coordinator_epoch:
            self._seen_coordinator_epoch = self._coordinator.epoch
            self._hb.reset_session(now)
        self._check_timers(now, coordinator, requests)
        self._check_rejoin(now)
        coordinator = self._coordinator.coordinator
        if coordinator is None:
            if self._state is S.AWAITING_SYNC and not self._sync_in_flight:
                self._restart_join(now, "coordinator lost before SyncGroup", backoff=True)
            elif self._state is S.LEAVING and not self._leave_in_flight:
                self._finish_leave("coordinator unknown; not sending LeaveGroup")
        else:
            self._send_due(now, coordinator, requests)
        return PollResult(requests, self._next_poll_ms(now))

    def _check_timers(
        self, now: float, coordinator: Coordinator | None, requests: list[UnsentRequest[Any]]
    ) -> None:
        if self._state not in _IN_GROUP:
            return
        if self._hb.poll_expired(now):
            self._on_poll_timeout(now, coordinator, requests)
        elif self._heartbeating() and coordinator is not None and self._hb.session_expired(now):
            self._coordinator.mark_unknown(now, "session timed out without a heartbeat response")
            self._hb.reset_session(now)

    def _check_rejoin(self, now: float) -> None:
        if self._state is S.STABLE:
            subscribed = self._subscriptions.subscription()
            if subscribed != self._joined_topics:
                self.request_rejoin("the subscription changed")
            elif self._is_leader and self._leader_metadata_changed():
                self.request_rejoin("partition counts of subscribed topics changed")
            if self._rejoin_needed:
                self._start_rejoin(now, self._rejoin_reason)
        elif self._state is S.UNJOINED:
            if self._app_polled and self._subscriptions.has_auto_assignment():
                self._start_rejoin(now, self._rejoin_reason or "subscribed")

    def _send_due(
        self, now: float, coordinator: Coordinator, requests: list[UnsentRequest[Any]]
    ) -> None:
        state = self._state
        if (
            state is S.JOINING
            and self._app_polled
            and not self._join_in_flight
            and now >= self._next_join_ms
            and self._metadata_covers_subscription()
        ):
            requests.append(self._join_request(now, coordinator))
        elif state is S.AWAITING_SYNC and self._pending_sync is not None:
            if not self._sync_in_flight:
                requests.append(self._sync_request(coordinator))
        elif state is S.LEAVING and not self._leave_in_flight:
            if self.group_instance_id is None and self.generation.member_id:
                requests.append(self._leave_request(coordinator, finish=True))
            else:
                self._finish_leave("static member: the session timeout removes it")
        if self._heartbeating() and self._hb.due(now):
            requests.append(self._heartbeat_request(now, coordinator))

    def _metadata_covers_subscription(self) -> bool:
        """JoinGroup waits until the metadata snapshot mentions every subscribed topic (an
        error entry counts), so a leader's first assignment sees their partitions rather
        than assigning nothing and rebalancing again. Metadata responses wake the driver."""
        known = self._cluster().topics
        return all(topic in known for topic in self._subscriptions.subscription())

    def _heartbeating(self) -> bool:
        return self._state in _HEARTBEAT_STATES and self.generation.is_valid

    def _next_poll_ms(self, now: float) -> float:
        times = [math.inf]
        if self._state in _IN_GROUP:
            times.append(self._hb.poll_deadline_ms)
        if self._coordinator.coordinator is not None:
            if self._heartbeating() and not self._hb.in_flight:
                times.append(self._hb.next_heartbeat_ms)
                times.append(self._hb.session_deadline_ms)
            if self._state is S.JOINING and self._app_polled and not self._join_in_flight:
                times.append(self._next_join_ms)
        return max(min(times) - now, 0.0)

    # -- rejoin, fencing, leaving ----------------------------------------------------------

    def _emit_revocation(self, held: frozenset[TopicPartition], lost: bool) -> None:
        self._revoking = held
        self._subscriptions.mark_pending_revocation(held)
        self._events.append(PartitionsLost(held) if lost else RevokePartitions(held))

    def _start_rejoin(self, now: float, reason: str) -> None:
        """Give up what must go (via the app) and join again: everything when eager or when
        the generation is gone (lost), else (cooperative) only partitions of topics no
        longer subscribed."""
        held = frozenset(self._subscriptions.assigned_partitions())
        self._rejoin_reason = reason
        self._rejoin_needed = False
        self._round += 1
        self._join_in_flight = self._sync_in_flight = False
        self._pending_sync = None
        lost = not self.generation.is_valid
        if self.protocol is RebalanceProtocol.COOPERATIVE and not lost:
            subscribed = self._subscriptions.subscription()
            held = frozenset(tp for tp in held if tp.topic not in subscribed)
        if held:
            self._emit_revocation(held, lost=lost)
            self._transition(S.REVOKING, reason)
        else:
            self._transition(S.JOINING, reason)

    def _restart_join(self, now: float, reason: str, *, backoff: bool) -> None:
        """Send JoinGroup again (after a failed JoinGroup or SyncGroup)."""
        self._round += 1
        self._join_in_flight = self._sync_in_flight = False
        self._pending_sync = None
        if backoff:
            self._join_failures += 1
            self._next_join_ms = now + self._backoff.delay_ms(self._join_failures)
        else:
            self._next_join_ms = now
        self._transition(S.JOINING, reason)

    def _reset_generation(self, *, reset_member_id: bool) -> None:
        self.generation = NO_GENERATION if reset_member_id else self.generation.without_generation()
        self._is_leader = False
        self._group_topics = frozenset()

    def _fence(self, now: float, error: KafkaError, reason: str) -> None:
        """The coordinator no longer knows this generation: reset it and rejoin; partitions
        held are lost (not revoked), so nothing is committed for them."""
        if isinstance(error, FencedInstanceIdError) and self.group_instance_id is not None:
            self._fail(error)
            return
        log.info("group %r: %s; resetting the generation and rejoining", self.group_id, reason)
        self._reset_generation(reset_member_id=not isinstance(error, IllegalGenerationError))
        if self._state in (S.JOINING, S.AWAITING_SYNC, S.ASSIGNING, S.STABLE):
            self._start_rejoin(now, reason)
        else:
            self.request_rejoin(reason)

    def on_commit_fenced(self, now: float, error: KafkaError, generation: Generation) -> None:
        """An OffsetCommit sent with ``generation`` failed with UNKNOWN_MEMBER_ID or
        ILLEGAL_GENERATION (called by the commit manager)."""
        if generation == self.generation and self._state is not S.FATAL:
            self._fence(
                now,
                error,
                f"offset commit failed: {error.name if isinstance(error, BrokerResponseError) else error}",
            )

    def _on_poll_timeout(
        self, now: float, coordinator: Coordinator | None, requests: list[UnsentRequest[Any]]
    ) -> None:
        log.warning(
            "group %r: the application did not poll for max_poll_interval_ms (%d ms), so the "
            "member leaves the group and rejoins at the next poll. Process records faster, "
            "lower max_poll_records or raise max_poll_interval_ms",
            self.group_id,
            self._hb.max_poll_interval_ms,
        )
        if coordinator is not None and self.group_instance_id is None and self.generation.member_id:
            self._leave_reason = "consumer poll timeout has expired"
            requests.append(self._leave_request(coordinator, finish=False))
        held = frozenset(self._subscriptions.assigned_partitions())
        self._subscriptions.mark_pending_revocation(held)
        self._reset_generation(reset_member_id=True)
        self._app_polled = False
        self._hb.poll_deadline_ms = math.inf
        self.request_rejoin("consumer poll timeout has expired")
        self._round += 1
        self._join_in_flight = self._sync_in_flight = False
        self._pending_sync = None
        # an outstanding revocation still gets its ack, which then loses the partitions still
        # held (on_revocation_done); otherwise they are lost at the next application poll
        if self._state is S.REVOKING_ASSIGNED:  # the new assignment is void
            self._pending_assignment = frozenset()
            self._transition(S.REVOKING, "max_poll_interval_ms expired")
        elif self._state is not S.REVOKING:
            self._transition(S.UNJOINED, "max_poll_interval_ms expired")

    def _finish_leave(self, reason: str) -> None:
        self._reset_generation(reset_member_id=True)
        self._app_polled = False
        self._rejoin_needed = True
        self._transition(S.UNJOINED, reason)

    def _fail(self, error: KafkaError) -> None:
        log.error("group %r: member stopped by a fatal error: %s", self.group_id, error)
        self.fatal_error = error
        self._events.append(GroupError(error, fatal=True))
        self._transition(S.FATAL, str(error))

    # -- JoinGroup -----------------------------------------------------------------------

    def _metadata(self, assignor: ConsumerPartitionAssignor, topics: frozenset[str]) -> bytes:
        sub = Subscription(
            tuple(sorted(topics)),
            assignor.subscription_user_data(topics),
            tuple(sorted(self._subscriptions.assigned_partitions())),
            self.generation.generation_id,
            self._rack_id,
        )
        return encode_subscription(sub)

    def _join_request(self, now: float, coordinator: Coordinator) -> UnsentRequest[Any]:
        self._join_in_flight = True
        round_ = self._round
        topics = self._subscriptions.subscription()
        self._joined_topics = topics
        request = JoinGroupRequest(
            group_id=self.group_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            member_id=self.generation.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocols=[
                JoinGroupRequest.JoinGroupRequestProtocol(a.name, self._metadata(a, topics))
                for a in self._assignors
            ],
            reason=_reason(self._rejoin_reason),
        )
        timeout = max(
            self._request_timeout_ms, self.rebalance_timeout_ms + JOIN_GROUP_TIMEOUT_LAPSE_MS
        )
        log.info("group %r: joining (%s)", self.group_id, self._rejoin_reason)

        def handler(t: float, response: JoinGroupResponse | None, error: BaseException | None) -> None:
            if round_ == self._round and self._state is S.JOINING:
                self._join_in_flight = False
                self._on_join_response(t, response, error)

        return UnsentRequest(coordinator.connection_id, request, handler, timeout_ms=timeout)

    def _on_join_response(
        self, now: float, response: JoinGroupResponse | None, error: BaseException | None
    ) -> None:
        if error is not None or response is None:
            self._coordinator.mark_unknown(now, f"JoinGroup failed: {error!r}")
            self._restart_join(now, "JoinGroup failed", backoff=True)
            return
        if response.error_code:
            self._on_join_error(now, response)
            return
        if response.protocol_type is not None and response.protocol_type != PROTOCOL_TYPE:
            self._fail(
                InconsistentGroupProtocolError(
                    f"JoinGroup returned protocol type {response.protocol_type!r}, expected "
                    f"{PROTOCOL_TYPE!r}",
                    group_id=self.group_id,
                )
            )
            return
        self.generation = Generation(
            response.generation_id, response.member_id, response.protocol_name
        )
        self._join_failures = 0
        self._hb.reset_timeouts(now)
        assignments: list[SyncGroupRequest.SyncGroupRequestAssignment] = []
        self._is_leader = response.leader == response.member_id
        if self._is_leader and not response.skip_assignment:
            try:
                assignments = self._leader_assign(response)
            except KafkaConfigError as exc:
                self._fail(exc)
                return
            except KafkaError as exc:
                self._events.append(GroupError(exc, fatal=False))
                self._restart_join(now, f"leader assignment failed: {exc}", backoff=True)
                return
        log.info(
            "group %r: joined generation %d as %s (%s)",
            self.group_id,
            response.generation_id,
            response.member_id,
            "leader" if self._is_leader else "follower",
        )
        self._pending_sync = SyncGroupRequest(
            group_id=self.group_id,
            generation_id=self.generation.generation_id,
            member_id=self.generation.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=self.generation.protocol,
            assignments=assignments,
        )
        self._transition(S.AWAITING_SYNC, "JoinGroup succeeded")

    def _on_join_error(self, now: float, response: JoinGroupResponse) -> None:
        cls = error_for_code(response.error_code)
        error = cls(None, group_id=self.group_id)
        if cls is MemberIdRequiredError:
            # KIP-394: the coordinator hands out the member id; join again with it at once
            self.generation = Generation(NO_GENERATION.generation_id, response.member_id, None)
            self._restart_join(now, "member id required", backoff=False)
        elif cls is UnknownMemberIdError:
            self._reset_generation(reset_member_id=True)
            self._restart_join(now, "unknown member id", backoff=False)
        elif cls is IllegalGenerationError:
            self._reset_generation(reset_member_id=False)
            self._restart_join(now, "illegal generation", backoff=False)
        elif cls is RebalanceInProgressError:
            self._restart_join(now, "rebalance in progress", backoff=False)
        elif cls is CoordinatorLoadInProgressError:
            self._restart_join(now, "coordinator loading", backoff=True)
        elif cls in _COORDINATOR_ERRORS:
            self._coordinator.mark_unknown(now, f"JoinGroup: {cls.name}")
            self._restart_join(now, cls.name, backoff=True)
        elif cls in _FATAL_JOIN_ERRORS:
            self._fail(error)
        else:
            self._events.append(GroupError(error, fatal=False))
            self._restart_join(now, f"JoinGroup failed with {cls.name}", backoff=True)

    def _leader_assign(
        self, response: JoinGroupResponse
    ) -> list[SyncGroupRequest.SyncGroupRequestAssignment]:
        assignor = self._assignor_by_name.get(response.protocol_name or "")
        if assignor is None:
            raise KafkaConfigError(
                f"the coordinator chose assignor {response.protocol_name!r}, which this member "
                f"did not offer ({sorted(self._assignor_by_name)})"
            )
        try:
            subscriptions = {
                m.member_id: decode_subscription(m.metadata, m.group_instance_id)
                for m in response.members
            }
        except KafkaProtocolError as exc:
            raise KafkaProtocolError(f"a group member sent unreadable metadata: {exc}") from exc
        topics = frozenset(t for s in subscriptions.values() for t in s.topics)
        cluster = self._cluster()
        counts = self._partition_counts(cluster, topics)
        racks = partition_racks(cluster, topics)
        result = assign_with_racks(
            assignor, {t: n for t, n in counts.items() if n > 0}, subscriptions, racks
        )
        self._group_topics = topics
        self._leader_counts = counts
        self._leader_racks = racks
        self._leader_metadata_version = cluster.version
        return [
            SyncGroupRequest.SyncGroupRequestAssignment(
                member_id, encode_assignment(Assignment(tuple(result.get(member_id, ()))))
            )
            for member_id in sorted(subscriptions)
        ]

    @staticmethod
    def _partition_counts(cluster: ClusterMetadata, topics: frozenset[str]) -> dict[str, int]:
        counts = {}
        for topic in topics:
            parts = cluster.partitions_for(topic)
            counts[topic] = len(parts) if parts else 0
        return counts

    def _leader_metadata_changed(self) -> bool:
        cluster = self._cluster()
        if cluster.version == self._leader_metadata_version:
            return False
        self._leader_metadata_version = cluster.version
        if self._rack_id and partition_racks(cluster, self._group_topics) != self._leader_racks:
            return True  # KIP-881: replica racks changed; rebalance to realign (as Java)
        return self._partition_counts(cluster, self._group_topics) != self._leader_counts

    # -- SyncGroup -----------------------------------------------------------------------

    def _sync_request(self, coordinator: Coordinator) -> UnsentRequest[Any]:
        assert self._pending_sync is not None
        self._sync_in_flight = True
        round_ = self._round

        def handler(t: float, response: SyncGroupResponse | None, error: BaseException | None) -> None:
            if round_ == self._round and self._state is S.AWAITING_SYNC:
                self._sync_in_flight = False
                self._on_sync_response(t, response, error)

        return UnsentRequest(coordinator.connection_id, self._pending_sync, handler)

    def _on_sync_response(
        self, now: float, response: SyncGroupResponse | None, error: BaseException | None
    ) -> None:
        if error is not None or response is None:
            self._coordinator.mark_unknown(now, f"SyncGroup failed: {error!r}")
            self._restart_join(now, "SyncGroup failed", backoff=True)
            return
        if response.error_code:
            cls = error_for_code(response.error_code)
            if cls is RebalanceInProgressError:
                self._restart_join(now, "rebalance in progress", backoff=False)
            elif cls in (UnknownMemberIdError, IllegalGenerationError):
                self._reset_generation(reset_member_id=cls is UnknownMemberIdError)
                self._restart_join(now, cls.name, backoff=False)
            elif cls in _COORDINATOR_ERRORS:
                self._coordinator.mark_unknown(now, f"SyncGroup: {cls.name}")
                self._restart_join(now, cls.name, backoff=True)
            elif cls in (FencedInstanceIdError, GroupAuthorizationFailedError):
                self._fail(cls(None, group_id=self.group_id))
            else:
                self._events.append(GroupError(cls(None, group_id=self.group_id), fatal=False))
                self._restart_join(now, f"SyncGroup failed with {cls.name}", backoff=True)
            return
        inconsistent = (
            response.protocol_type is not None and response.protocol_type != PROTOCOL_TYPE
        ) or (
            response.protocol_name is not None
            and response.protocol_name != self.generation.protocol
        )
        if inconsistent:
            self._fail(
                InconsistentGroupProtocolError(
                    f"SyncGroup returned protocol {response.protocol_type}/{response.protocol_name}, "
                    f"expected {PROTOCOL_TYPE}/{self.generation.protocol}",
                    group_id=self.group_id,
                )
            )
            return
        try:
            assignment = decode_assignment(response.assignment)
        except KafkaProtocolError as exc:
            self._events.append(GroupError(exc, fatal=False))
            self._restart_join(now, "unreadable assignment", backoff=True)
            return
        self._apply_assignment(now, assignment)

    def _apply_assignment(self, now: float, assignment: Assignment) -> None:
        partitions = frozenset(assignment.partitions)
        subscribed = self._subscriptions.subscription()
        stray = sorted(tp for tp in partitions if tp.topic not in subscribed)
        if stray or not self._subscriptions.has_auto_assignment():
            # the subscription changed while joining (as Java: do not take it, rejoin)
            self._restart_join(
                now, f"assignment does not match the subscription: {stray}", backoff=False
            )
            return
        assignor = self._assignor_by_name[self.generation.protocol or ""]
        assignor.on_assignment(assignment, self.generation.generation_id)
        self._rejoin_needed = False
        self._rejoin_reason = ""
        self._pending_sync = None
        log.info(
            "group %r: generation %d assigned %d partitions",
            self.group_id,
            self.generation.generation_id,
            len(partitions),
        )
        owned = frozenset(self._subscriptions.assigned_partitions())
        revoked = owned - partitions
        if self.protocol is RebalanceProtocol.COOPERATIVE and revoked:
            # revoke first (commit, listener), then take the rest, then rejoin (KIP-429)
            self._pending_assignment = partitions
            self._emit_revocation(revoked, lost=False)
            self._transition(S.REVOKING_ASSIGNED, "SyncGroup took partitions away")
            return
        self._take_assignment(now, partitions, owned, revoked=False)

    def _take_assignment(
        self,
        now: float,
        partitions: frozenset[TopicPartition],
        owned: frozenset[TopicPartition],
        *,
        revoked: bool,
    ) -> None:
        """Install the assignment; AssignPartitions carries everything (eager) or only the
        added partitions (cooperative, as Java's onPartitionsAssigned)."""
        self._pending_assignment = frozenset()
        self._subscriptions.assign_from_subscribed(partitions)
        cooperative = self.protocol is RebalanceProtocol.COOPERATIVE
        self._events.append(AssignPartitions(partitions - owned if cooperative else partitions))
        if cooperative and revoked:
            self.request_rejoin("partitions were revoked; rejoining so they can be reassigned")
        self._transition(S.ASSIGNING, "SyncGroup succeeded")

    # -- Heartbeat -----------------------------------------------------------------------

    def _heartbeat_request(self, now: float, coordinator: Coordinator) -> UnsentRequest[Any]:
        self._hb.sent(now)
        sent = self.generation
        request = HeartbeatRequest(
            group_id=self.group_id,
            generation_id=sent.generation_id,
            member_id=sent.member_id,
            group_instance_id=self.group_instance_id,
        )

        def handler(t: float, response: HeartbeatResponse | None, error: BaseException | None) -> None:
            self._on_heartbeat_response(t, sent, response, error)

        return UnsentRequest(coordinator.connection_id, request, handler)

    def _on_heartbeat_response(
        self,
        now: float,
        sent: Generation,
        response: HeartbeatResponse | None,
        error: BaseException | None,
    ) -> None:
        if self._state is S.FATAL:
            return
        if error is not None or response is None:
            self._hb.failed(now)
            self._coordinator.mark_unknown(now, f"heartbeat failed: {error!r}")
            return
        if not response.error_code:
            self._hb.received(now)
            return
        cls = error_for_code(response.error_code)
        if cls in _COORDINATOR_ERRORS:
            self._hb.failed(now)
            self._coordinator.mark_unknown(now, f"heartbeat: {cls.name}")
        elif cls is RebalanceInProgressError:
            self._hb.received(now)
            if self._state in (S.STABLE, S.ASSIGNING, S.REVOKING_ASSIGNED):
                self.request_rejoin("the group is rebalancing")
        elif cls in _FENCING_ERRORS:
            self._hb.failed(now)
            if sent == self.generation:  # else: an answer about an older generation
                self._fence(now, cls(None, group_id=self.group_id), f"heartbeat: {cls.name}")
        elif cls is GroupAuthorizationFailedError:
            self._fail(cls(None, group_id=self.group_id))
        else:
            self._hb.failed(now)
            self._events.append(GroupError(cls(None, group_id=self.group_id), fatal=False))

    # -- LeaveGroup ----------------------------------------------------------------------

    def _leave_request(self, coordinator: Coordinator, *, finish: bool) -> UnsentRequest[Any]:
        member_id = self.generation.member_id
        reason = _reason(self._leave_reason)
        request = LeaveGroupRequest(
            group_id=self.group_id,
            member_id=member_id,
            members=[LeaveGroupRequest.MemberIdentity(member_id, None, reason)],
        )
        log.info("group %r: member %s leaving (%s)", self.group_id, member_id, reason)
        if finish:
            self._leave_in_flight = True

        def handler(t: float, response: LeaveGroupResponse | None, error: BaseException | None) -> None:
            self._on_leave_response(t, response, error, finish)

        return UnsentRequest(coordinator.connection_id, request, handler)

    def _on_leave_response(
        self,
        now: float,
        response: LeaveGroupResponse | None,
        error: BaseException | None,
        finish: bool,
    ) -> None:
        # leaving is best effort (as Java): failures are logged, never retried
        if error is not None:
            log.info("group %r: LeaveGroup failed: %r", self.group_id, error)
        elif response is not None and response.error_code:
            log.info(
                "group %r: LeaveGroup failed: %s",
                self.group_id,
                error_for_code(response.error_code).name,
            )
        if finish and self._state is S.LEAVING:
            self._leave_in_flight = False
            self._finish_leave("left the group")
