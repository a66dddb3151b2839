"""ConsumerMembershipManager: a member of a KIP-848 ("consumer" protocol) group.

Sans-I/O: `poll(now)` yields ConsumerGroupHeartbeat requests; the coordinator assigns
(server side), and the member reconciles: revoke, commit, acknowledge, then take new partitions.
"""

from __future__ import annotations

import base64
import enum
import logging
import math
import random
import uuid
from collections.abc import Callable
from typing import Any, ClassVar

from kafkaio.backoff import ExponentialBackoff
from kafkaio.consumer.group.coordinator import Coordinator, CoordinatorManager
from kafkaio.consumer.group.events import (
    AssignPartitions,
    GroupError,
    MembershipEvent,
    PartitionsLost,
    RevokePartitions,
)
from kafkaio.consumer.group.generation import Generation
from kafkaio.consumer.group.transitions import check_transition
from kafkaio.consumer.subscription import SubscriptionState
from kafkaio.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupAuthorizationFailedError,
    GroupMaxSizeReachedError,
    InvalidRequestError,
    KafkaConfigError,
    KafkaError,
    NotCoordinatorError,
    TopicAuthorizationFailedError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
    UnsupportedVersionError,
    error_for_code,
)
from kafkaio.metadata.cluster import ClusterMetadata, TopicPartition
from kafkaio.protocol.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from kafkaio.runtime.requests import PollResult, UnsentRequest

log = logging.getLogger("kafkaio.consumer.group")

JOIN_EPOCH = 0
LEAVE_EPOCH = -1  # a dynamic member leaves
LEAVE_STATIC_EPOCH = -2  # a static member leaves for now; its instance id keeps its partitions
DEFAULT_HEARTBEAT_INTERVAL_MS = 5000

_COORDINATOR_ERRORS = (CoordinatorNotAvailableError, NotCoordinatorError)
_FENCING_ERRORS = (FencedMemberEpochError, UnknownMemberIdError)
_FATAL_ERRORS = (
    UnreleasedInstanceIdError,
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    UnsupportedAssignorError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    InvalidRequestError,
    UnsupportedVersionError,
)


class HeartbeatRequestV1(ConsumerGroupHeartbeatRequest):
    """ConsumerGroupHeartbeat, sent up to v1 (stable since Kafka 4.0; the protocol JSON
    kafkaio was generated from still marks v1 unstable, and brokers such as librdkafka's
    mock cluster speak only v1)."""

    __slots__ = ()
    MAX_STABLE_VERSION: ClassVar[int] = 1


HeartbeatRequestV1.__name__ = "ConsumerGroupHeartbeatRequest"


class ConsumerMemberState(enum.Enum):
    UNSUBSCRIBED = "unsubscribed"  # not in the group (never joined, or left)
    JOINING = "joining"  # heartbeats with epoch 0 until the first assignment
    RECONCILING = "reconciling"  # a new target assignment is being applied (via the app)
    ACKNOWLEDGING = "acknowledging"  # applied: the next heartbeat (sent at once) says so
    STABLE = "stable"
    FENCED = "fenced"  # lost the epoch: waiting for the app to drop partitions, then rejoin
    PREPARE_LEAVING = "prepare_leaving"  # leave(): waiting for the app to revoke partitions
    LEAVING = "leaving"  # the leave heartbeat (epoch -1/-2) to send, or in flight
    STALE = "stale"  # max_poll_interval_ms expired: left; rejoins at the next app poll
    FATAL = "fatal"


C = ConsumerMemberState
_TRANSITIONS: dict[ConsumerMemberState, frozenset[ConsumerMemberState]] = {
    C.UNSUBSCRIBED: frozenset({C.JOINING, C.FATAL}),
    C.JOINING: frozenset(
        {C.RECONCILING, C.STABLE, C.FENCED, C.PREPARE_LEAVING, C.LEAVING, C.STALE, C.FATAL}
    ),
    C.RECONCILING: frozenset(
        {C.ACKNOWLEDGING, C.FENCED, C.PREPARE_LEAVING, C.LEAVING, C.STALE, C.FATAL}
    ),
    C.ACKNOWLEDGING: frozenset(
        {C.STABLE, C.RECONCILING, C.FENCED, C.PREPARE_LEAVING, C.LEAVING, C.STALE, C.FATAL}
    ),
    C.STABLE: frozenset({C.RECONCILING, C.FENCED, C.PREPARE_LEAVING, C.LEAVING, C.STALE, C.FATAL}),
    C.FENCED: frozenset({C.JOINING, C.PREPARE_LEAVING, C.LEAVING, C.FATAL}),
    C.PREPARE_LEAVING: frozenset({C.LEAVING, C.FATAL}),
    C.LEAVING: frozenset({C.UNSUBSCRIBED, C.FATAL}),
    C.STALE: frozenset({C.JOINING, C.UNSUBSCRIBED, C.FATAL}),
    C.FATAL: frozenset(),
}
_HEARTBEATING = frozenset({C.JOINING, C.RECONCILING, C.ACKNOWLEDGING, C.STABLE})
_HAS_EPOCH = frozenset({C.RECONCILING, C.ACKNOWLEDGING, C.STABLE, C.PREPARE_LEAVING})


class IllegalConsumerStateTransition(KafkaError):
    """A bug: the KIP-848 membership state machine was asked for a forbidden transition."""


TargetAssignment = frozenset[tuple[uuid.UUID, int]]


def new_member_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class ConsumerMembershipManager:
    """Heartbeats, reconciles and leaves a KIP-848 consumer group.

    Driven like `ClassicMembershipManager` (same reactor calls, same events):

    * `poll(now)`: a ConsumerGroupHeartbeat every ``heartbeat_interval_ms`` (the
      coordinator's value), at once when joining, acknowledging or after a subscription change.
      The first heartbeat (epoch 0) joins; its member id is generated here (KIP-1082).
    * A response with an assignment starts a reconciliation: topic ids are resolved through
      ``cluster()`` (``request_metadata()`` when an id is unknown), then RevokePartitions
      (commit, listener), AssignPartitions (only the added partitions), then a heartbeat
      carrying the owned partitions acknowledges it. A newer target waits for the current one.
    * FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: partitions are lost (PartitionsLost), then the
      member rejoins with epoch 0 and the same member id.
    * `leave(now)`: revoke, then a heartbeat with epoch -1 (-2 for a static member, which keeps
      its assignment until its session expires or it returns with the same instance id).
    * max_poll_interval_ms expiry: leave heartbeat, partitions lost, rejoin at the next poll.
    """

    def __init__(
        self,
        group_id: str,
        subscriptions: SubscriptionState,
        coordinator: CoordinatorManager,
        cluster: Callable[[], ClusterMetadata],
        *,
        request_metadata: Callable[[], object] = lambda: None,
        group_instance_id: str | None = None,
        remote_assignor: str | None = None,
        rebalance_timeout_ms: int | None = None,
        max_poll_interval_ms: int = 300_000,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 1000,
        rack_id: str | None = None,
        member_id: str | None = None,
        backoff_jitter: float = 0.2,
        rng: Callable[[], float] = random.random,
    ) -> None:
        if not group_id:
            raise KafkaConfigError("group_id is empty; set a group id to use subscribe()")
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.remote_assignor = remote_assignor
        self.rebalance_timeout_ms = (
            max_poll_interval_ms if rebalance_timeout_ms is None else rebalance_timeout_ms
        )
        self.max_poll_interval_ms = max_poll_interval_ms
        self._subscriptions = subscriptions
        self._coordinator = coordinator
        self._cluster = cluster
        self._request_metadata = request_metadata
        self._rack_id = rack_id
        self._backoff = ExponentialBackoff(
            retry_backoff_ms, retry_backoff_max_ms, jitter=backoff_jitter, rng=rng
        )
        self._retry_backoff_ms = retry_backoff_ms
        # KIP-1082: the client picks its member id (a base64 UUID, as Kafka's Uuid.toString)
        self.member_id = member_id or new_member_id()
        self.member_epoch = JOIN_EPOCH
        self.heartbeat_interval_ms: float = DEFAULT_HEARTBEAT_INTERVAL_MS
        self.fatal_error: KafkaError | None = None
        self._state = C.UNSUBSCRIBED
        # called with (old state, new state) values on every transition (metrics)
        self.on_transition: Callable[[str, str], None] | None = None
        self._events: list[MembershipEvent] = []
        self._app_polled = False
        self._poll_deadline_ms = math.inf
        self._next_heartbeat_ms = -math.inf
        self._heartbeat_in_flight = False
        self._failures = 0
        self._send_full = True  # the next heartbeat carries every field
        self._sent_topics: frozenset[str] | None = None
        self._target: TargetAssignment | None = None  # newest target not yet applied
        self._step: str | None = None  # "revoking" / "assigning" while the app works
        self._revoking: frozenset[TopicPartition] = frozenset()
        self._reconciled: frozenset[TopicPartition] = frozenset()  # being assigned now
        self._ids: dict[str, uuid.UUID] = {}
        self._leave_in_flight = False
        self._seen_coordinator_epoch = -1

    # -- state ---------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerMemberState:
        return self._state

    @property
    def is_leader(self) -> bool:
        return False  # the coordinator assigns

    @property
    def is_leaving(self) -> bool:
        return self._state in (C.PREPARE_LEAVING, C.LEAVING)

    @property
    def rebalance_in_progress(self) -> bool:
        return False

    @property
    def generation(self) -> Generation:
        return Generation(self.member_epoch, self.member_id, None)

    @property
    def group_subscription(self) -> frozenset[str]:
        return self._subscriptions.subscription()

    def generation_if_stable(self) -> Generation | None:
        """The member id and epoch offsets are committed with (None when not a member)."""
        if self._state in _HAS_EPOCH and self.member_epoch > 0:
            return self.generation
        return None

    def drain_events(self) -> list[MembershipEvent]:
        events, self._events = self._events, []
        return events

    def _transition(self, to: ConsumerMemberState, reason: str) -> None:
        if to is self._state:
            return
        check_transition(
            self.group_id,
            _TRANSITIONS,
            self._state,
            to,
            reason,
            IllegalConsumerStateTransition,
            self.on_transition,
        )
        self._state = to

    # -- calls from the reactor ----------------------------------------------------------

    @property
    def needs_application_poll(self) -> bool:
        """Whether the next application poll starts a join (it must not wait)."""
        return (
            self._state in (C.UNSUBSCRIBED, C.STALE) and self._subscriptions.has_auto_assignment()
        )

    def on_application_poll(self, now: float) -> None:
        self._poll_deadline_ms = now + self.max_poll_interval_ms
        self._app_polled = True
        if self._state in (C.UNSUBSCRIBED, C.STALE) and self._subscriptions.has_auto_assignment():
            self._join(now, "application polled")

    def request_rejoin(self, reason: str) -> None:
        """Send the full member state with the next heartbeat (nothing to rejoin in KIP-848)."""
        self._send_full = True
        self._next_heartbeat_ms = -math.inf

    def on_commit_fenced(self, now: float, error: KafkaError, generation: Generation) -> None:
        """A commit was refused for a stale epoch: the next heartbeat tells the truth."""
        self._next_heartbeat_ms = -math.inf

    def on_revocation_done(self, now: float) -> None:
        state = self._state
        revoked, self._revoking = self._revoking, frozenset()
        subs = self._subscriptions
        kept = frozenset(subs.assigned_partitions()) - revoked
        if subs.has_auto_assignment():
            subs.assign_from_subscribed(kept)
        if state is C.RECONCILING and self._step == "revoking":
            self._assign_step(now)
        elif state is C.FENCED:
            self._join(now, "partitions lost after fencing")
        elif state is C.PREPARE_LEAVING:
            if kept:
                self._emit_revocation(kept, lost=self.member_epoch <= 0)
            else:
                self._transition(C.LEAVING, "partitions revoked before leaving")

    def on_assignment_done(self, now: float) -> None:
        if self._state is C.RECONCILING and self._step == "assigning":
            self._step = None
            self._transition(C.ACKNOWLEDGING, "assignment reconciled")
            self._next_heartbeat_ms = -math.inf

    def leave(self, now: float, reason: str = "the consumer is being closed") -> None:
        state = self._state
        if state in (C.PREPARE_LEAVING, C.LEAVING, C.FATAL, C.UNSUBSCRIBED, C.STALE):
            return
        self._target = None
        held = frozenset(self._subscriptions.assigned_partitions())
        if self._revoking:  # a revocation is out; its acknowledgement revokes the rest
            self._step = None
            self._transition(C.PREPARE_LEAVING, reason)
            return
        self._step = None
        if held:
            self._emit_revocation(held, lost=self.member_epoch <= 0 or state is C.FENCED)
            self._transition(C.PREPARE_LEAVING, reason)
        else:
            self._transition(C.LEAVING, reason)
        log.info("group %r: member %s leaving (%s)", self.group_id, self.member_id, reason)

    # -- request manager -----------------------------------------------------------------

    def poll(self, now: float) -> PollResult:
        if self._state is C.FATAL:
            return PollResult()
        coordinator = self._coordinator.coordinator
        if coordinator is not None and self._coordinator.epoch != self._seen_coordinator_epoch:
            self._seen_coordinator_epoch = self._coordinator.epoch
            self._send_full = True
        requests: list[UnsentRequest[Any]] = []
        if self._state in _HEARTBEATING and now >= self._poll_deadline_ms:
            self._on_poll_timeout(now, coordinator, requests)
        if self._state in (C.ACKNOWLEDGING, C.STABLE) and self._target is not None:
            self._transition(C.RECONCILING, "a newer target assignment is waiting")
        if self._state is C.RECONCILING and self._step is None:
            self._reconcile(now)
        if (
            self._state in (C.UNSUBSCRIBED, C.STALE)
            and self._app_polled
            and self._subscriptions.has_auto_assignment()
        ):
            self._join(now, "subscribed")
        if self._state in _HEARTBEATING and self._topics_changed():
            self._next_heartbeat_ms = min(self._next_heartbeat_ms, now)
        if coordinator is None:
            if self._state is C.LEAVING and not self._leave_in_flight:
                self._finish_leave("coordinator unknown; not sending the leave heartbeat")
        elif self._state is C.LEAVING and not self._leave_in_flight:
            requests.append(self._leave_request(coordinator))
        elif (
            self._state in _HEARTBEATING
            and not self._heartbeat_in_flight
            and now >= self._next_heartbeat_ms
        ):
            requests.append(self._heartbeat_request(now, coordinator))
        return PollResult(requests, self._next_poll_ms(now))

    def _next_poll_ms(self, now: float) -> float:
        times = [math.inf]
        if self._state in _HEARTBEATING:
            times.append(self._poll_deadline_ms)
            if not self._heartbeat_in_flight and self._coordinator.coordinator is not None:
                times.append(self._next_heartbeat_ms)
        return max(min(times) - now, 0.0)

    def _topics_changed(self) -> bool:
        return self._sent_topics is not None and self._sent_topics != self.group_subscription

    # -- heartbeats ----------------------------------------------------------------------

    def _owned_topic_partitions(self) -> list[ConsumerGroupHeartbeatRequest.TopicPartitions]:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(self._subscriptions.assigned_partitions()):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        cluster = self._cluster()
        out = []
        for topic, parts in by_topic.items():
            topic_id = self._ids.get(topic) or cluster.topic_id(topic)
            if topic_id is not None:
                out.append(ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id, parts))
        return out

    def _heartbeat_request(self, now: float, coordinator: Coordinator) -> UnsentRequest[Any]:
        topics = self.group_subscription
        full = self._send_full or self._state is C.JOINING
        names = sorted(topics) if full or topics != self._sent_topics else None
        request = HeartbeatRequestV1(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.member_epoch,
            instance_id=self.group_instance_id if full else None,
            rack_id=self._rack_id if full else None,
            rebalance_timeout_ms=self.rebalance_timeout_ms if full else -1,
            subscribed_topic_names=names,
            # "" = no regex (as Java sends); librdkafka's mock asserts names and regex are
            # both set or both null
            subscribed_topic_regex=None if names is None else "",
            server_assignor=self.remote_assignor if full else None,
            # owned partitions: on joining, acknowledging, and whenever all fields go
            topic_partitions=(
                self._owned_topic_partitions()
                if full or self._state in (C.ACKNOWLEDGING, C.RECONCILING)
                else None
            ),
        )
        self._heartbeat_in_flight = True
        self._send_full = False
        self._sent_topics = topics
        if self._state is C.ACKNOWLEDGING:
            # the acknowledgement is out (Java moves to STABLE when it is sent)
            self._transition(C.STABLE, "acknowledgement sent")
        sent_epoch = self.member_epoch

        def handler(t: float, response: ConsumerGroupHeartbeatResponse | None, error: BaseException | None) -> None:
            self._heartbeat_in_flight = False
            self._on_heartbeat_response(t, sent_epoch, response, error)

        return UnsentRequest(coordinator.connection_id, request, handler)

    def _retry_later(self, now: float) -> None:
        self._send_full = True
        self._next_heartbeat_ms = now + self._backoff.delay_ms(self._failures)
        self._failures += 1

    def _on_heartbeat_response(
        self,
        now: float,
        sent_epoch: int,
        response: ConsumerGroupHeartbeatResponse | None,
        error: BaseException | None,
    ) -> None:
        if self._state not in _HEARTBEATING:
            return  # left, fenced or stopped meanwhile
        if error is not None or response is None:
            self._coordinator.mark_unknown(now, f"ConsumerGroupHeartbeat failed: {error!r}")
            self._retry_later(now)
            return
        if response.error_code:
            self._on_heartbeat_error(now, response)
            return
        self._failures = 0
        if response.member_id:
            self.member_id = response.member_id
        if response.heartbeat_interval_ms > 0:
            self.heartbeat_interval_ms = response.heartbeat_interval_ms
        self.member_epoch = response.member_epoch
        self._next_heartbeat_ms = now + self.heartbeat_interval_ms
        if response.assignment is not None:
            self._target = frozenset(
                (t.topic_id, p) for t in response.assignment.topic_partitions for p in t.partitions
            )
            if self._state is not C.RECONCILING:
                self._transition(
                    C.RECONCILING, f"new target assignment (epoch {self.member_epoch})"
                )
            if self._step is None:
                self._reconcile(now)
        elif self._state is C.JOINING and sent_epoch == JOIN_EPOCH and self.member_epoch > 0:
            self._transition(C.STABLE, "joined with an empty assignment")

    def _on_heartbeat_error(self, now: float, response: ConsumerGroupHeartbeatResponse) -> None:
        cls = error_for_code(response.error_code)
        detail = f": {response.error_message}" if response.error_message else ""
        error = cls(f"ConsumerGroupHeartbeat failed{detail}", group_id=self.group_id)
        if cls in _COORDINATOR_ERRORS:
            self._coordinator.mark_unknown(now, f"ConsumerGroupHeartbeat: {cls.name}")
            self._retry_later(now)
        elif cls is CoordinatorLoadInProgressError:
            self._retry_later(now)
        elif cls in _FENCING_ERRORS:
            self._fence(now, f"ConsumerGroupHeartbeat: {cls.name}")
        elif cls in _FATAL_ERRORS:
            self._fail(error)
        else:
            self._events.append(GroupError(error, fatal=False))
            self._retry_later(now)

    # -- reconciliation ------------------------------------------------------------------

    def _resolve(self, target: TargetAssignment) -> frozenset[TopicPartition] | None:
        cluster = self._cluster()
        out = []
        for topic_id, partition in target:
            name = cluster.topic_name(topic_id)
            if name is None:
                return None
            self._ids[name] = topic_id
            out.append(TopicPartition(name, partition))
        return frozenset(out)

    def _reconcile(self, now: float) -> None:
        """Start applying the newest target: revoke first, then assign."""
        target = self._target
        if target is None:
            return
        resolved = self._resolve(target)
        if resolved is None:
            self._request_metadata()  # poll() tries again when metadata arrives
            return
        self._target = None
        owned = frozenset(self._subscriptions.assigned_partitions())
        self._reconciled = resolved
        revoked = owned - resolved
        if revoked:
            self._step = "revoking"
            self._emit_revocation(revoked, lost=False)
        else:
            self._assign_step(now)

    def _assign_step(self, now: float) -> None:
        owned = frozenset(self._subscriptions.assigned_partitions())
        target = self._reconciled
        if self._subscriptions.has_auto_assignment():
            self._subscriptions.assign_from_subscribed(target)
        self._step = "assigning"
        self._events.append(AssignPartitions(target - owned))

    def _emit_revocation(self, partitions: frozenset[TopicPartition], *, lost: bool) -> None:
        self._revoking = partitions
        self._subscriptions.mark_pending_revocation(partitions)
        self._events.append(PartitionsLost(partitions) if lost else RevokePartitions(partitions))

    # -- fencing, joining, leaving -------------------------------------------------------

    def _join(self, now: float, reason: str) -> None:
        self.member_epoch = JOIN_EPOCH
        self._target = None
        self._step = None
        self._send_full = True
        self._next_heartbeat_ms = -math.inf
        log.info("group %r: joining as %s (%s)", self.group_id, self.member_id, reason)
        self._transition(C.JOINING, reason)

    def _fence(self, now: float, reason: str) -> None:
        log.info("group %r: %s; partitions are lost, rejoining", self.group_id, reason)
        self._target = None
        self._step = None
        self.member_epoch = JOIN_EPOCH
        held = frozenset(self._subscriptions.assigned_partitions())
        self._transition(C.FENCED, reason)
        if held:
            self._emit_revocation(held, lost=True)
        else:
            self._join(now, reason)

    def _on_poll_timeout(
        self, now: float, coordinator: Coordinator | None, requests: list[UnsentRequest[Any]]
    ) -> None:
        log.warning(
            "group %r: the application did not poll for max_poll_interval_ms (%d ms), so the "
            "member leaves the group and rejoins at the next poll. Process records faster, "
            "lower max_poll_records or raise max_poll_interval_ms",
            self.group_id,
            self.max_poll_interval_ms,
        )
        if coordinator is not None and self.member_epoch > 0:
            requests.append(self._leave_request(coordinator, finish=False))
        held = frozenset(self._subscriptions.assigned_partitions())
        self._target = None
        self._step = None
        self._revoking = frozenset()
        self.member_epoch = JOIN_EPOCH
        self._app_polled = False
        self._poll_deadline_ms = math.inf
        self._transition(C.STALE, "max_poll_interval_ms expired")
        if held:
            self._emit_revocation(held, lost=True)

    def _leave_request(self, coordinator: Coordinator, *, finish: bool = True) -> UnsentRequest[Any]:
        epoch = LEAVE_EPOCH if self.group_instance_id is None else LEAVE_STATIC_EPOCH
        request = HeartbeatRequestV1(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=epoch,
            instance_id=self.group_instance_id,
        )
        if finish:
            self._leave_in_flight = True

        def handler(t: float, response: ConsumerGroupHeartbeatResponse | None, error: BaseException | None) -> None:
            what: object = error
            if response is not None and response.error_code:
                what = error_for_code(response.error_code).name
            if what is not None:
                log.info("group %r: leave heartbeat failed: %s", self.group_id, what)
            if finish and self._state is C.LEAVING:
                self._leave_in_flight = False
                self._finish_leave("left the group")

        return UnsentRequest(coordinator.connection_id, request, handler)

    def _finish_leave(self, reason: str) -> None:
        self.member_epoch = JOIN_EPOCH
        self._app_polled = False
        self._sent_topics = None
        self._transition(C.UNSUBSCRIBED, reason)

    def _fail(self, error: KafkaError) -> None:
        log.error("group %r: member stopped by a fatal error: %s", self.group_id, error)
        self.fatal_error = error
        self._events.append(GroupError(error, fatal=True))
        self._transition(C.FATAL, str(error))
