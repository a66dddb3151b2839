"""ShareMembershipManager: one member of a share group, driven by ShareGroupHeartbeat (KIP-932).

Sans-I/O: joins with epoch 0, heartbeats on the coordinator's interval, takes the assignment
(topic ids and partitions) as given, rejoins when fenced, and leaves with epoch -1.
"""

from __future__ import annotations

import base64
import enum
import logging
import math
import random
import uuid
from collections.abc import Callable, Sequence

from kafkaio.backoff import ExponentialBackoff
from kafkaio.consumer.group.coordinator import CoordinatorManager
from kafkaio.errors import (
    BrokerResponseError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedMemberEpochError,
    KafkaError,
    NotCoordinatorError,
    UnknownMemberIdError,
    error_for_code,
)
from kafkaio.runtime.requests import PollResult, UnsentRequest
from kafkaio.share.protocol import ShareGroupHeartbeatRequestV1, ShareGroupHeartbeatResponseV1

log = logging.getLogger("kafkaio.share")

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
DEFAULT_HEARTBEAT_INTERVAL_MS = 5000.0

Assignment = dict[uuid.UUID, frozenset[int]]


class MemberState(enum.Enum):
    UNSUBSCRIBED = "unsubscribed"  # not started
    JOINING = "joining"  # a heartbeat with epoch 0 is due or in flight
    STABLE = "stable"  # member of the group; heartbeats on the interval
    LEAVING = "leaving"  # the heartbeat with epoch -1 is due or in flight
    LEFT = "left"  # left the group (or gave up leaving); final
    FATAL = "fatal"  # a non-retriable error; final


_REJOIN = (FencedMemberEpochError, UnknownMemberIdError)
_FIND_COORDINATOR = (NotCoordinatorError, CoordinatorNotAvailableError)


def new_member_id() -> str:
    """A client-generated member id, as KIP-932 asks (a random UUID, base64url, 22 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ShareMembershipManager:
    """The member's state machine; `poll(now)` returns the heartbeat to send, if one is due.

    `assignment` is the latest assignment as ``{topic_id: partitions}`` (share groups assign
    by topic id; several members may be given the same partition). `assignment_version`
    increases whenever it changes. Errors the application must see are in `fatal_error`.
    """

    def __init__(
        self,
        group_id: str,
        topics: Sequence[str],
        coordinator: CoordinatorManager,
        *,
        rack_id: str | None = None,
        member_id: str | None = None,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 1000,
        backoff_jitter: float = 0.2,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.group_id = group_id
        self._topics = sorted(set(topics))
        self._coordinator = coordinator
        self._rack_id = rack_id
        self.member_id = member_id or new_member_id()
        self.member_epoch = JOIN_EPOCH
        self.state = MemberState.UNSUBSCRIBED
        self.assignment: Assignment = {}
        self.assignment_version = 0
        self.heartbeat_interval_ms = DEFAULT_HEARTBEAT_INTERVAL_MS
        self.fatal_error: KafkaError | None = None
        self._backoff = ExponentialBackoff(
            retry_backoff_ms, retry_backoff_max_ms, jitter=backoff_jitter, rng=rng
        )
        self._failures = 0
        self._in_flight = False
        self._next_heartbeat_ms = -math.inf
        self._send_topics = True

    # -- application side -----------------------------------------------------------------------

    def join(self) -> None:
        """Start joining (UNSUBSCRIBED -> JOINING); the next poll sends the first heartbeat."""
        if self.state is MemberState.UNSUBSCRIBED:
            self._transition(MemberState.JOINING)
            self._next_heartbeat_ms = -math.inf

    def leave(self) -> None:
        """Leave the group: the next poll sends epoch -1 (LEFT at once if never joined)."""
        if self.state in (MemberState.JOINING, MemberState.STABLE) and (
            self.member_epoch != JOIN_EPOCH or self._in_flight
        ):
            self._transition(MemberState.LEAVING)
            self._next_heartbeat_ms = -math.inf
        elif self.state is not MemberState.LEAVING:
            self._transition(MemberState.LEFT)
        self._set_assignment({})

    @property
    def is_leaving(self) -> bool:
        return self.state is MemberState.LEAVING

    # -- request manager ------------------------------------------------------------------------

    def poll(self, now: float) -> PollResult:
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.LEFT, MemberState.FATAL):
            return PollResult()
        coordinator = self._coordinator.coordinator
        if self._in_flight:
            return PollResult()
        if coordinator is None:
            if self.state is MemberState.LEAVING:
                # nobody to tell; the coordinator will expire the member after its session
                self._transition(MemberState.LEFT)
            return PollResult()
        if now < self._next_heartbeat_ms:
            return PollResult(next_poll_ms=self._next_heartbeat_ms - now)
        request = self._heartbeat_request()
        self._in_flight = True
        epoch = request.member_epoch

        def handler(at: float, response: ShareGroupHeartbeatResponseV1 | None, error: BaseException | None) -> None:
            self._on_response(at, epoch, response, error)

        return PollResult([UnsentRequest(coordinator.connection_id, request, handler)])

    def _heartbeat_request(self) -> ShareGroupHeartbeatRequestV1:
        if self.state is MemberState.LEAVING:
            return ShareGroupHeartbeatRequestV1(self.group_id, self.member_id, LEAVE_EPOCH)
        joining = self.member_epoch == JOIN_EPOCH
        topics = self._topics if joining or self._send_topics else None
        rack = self._rack_id if joining else None
        return ShareGroupHeartbeatRequestV1(
            self.group_id, self.member_id, self.member_epoch, rack, topics
        )

    # -- responses ------------------------------------------------------------------------------

    def _on_response(
        self, now: float, sent_epoch: int, response: ShareGroupHeartbeatResponseV1 | None, error: BaseException | None
    ) -> None:
        self._in_flight = False
        if sent_epoch == LEAVE_EPOCH:
            # whatever the answer, this member is gone (the coordinator expires it otherwise)
            self._transition(MemberState.LEFT)
            if response is not None and response.error_code:
                log.info(
                    "share group %r: leave answered %s",
                    self.group_id,
                    error_for_code(response.error_code).name,
                )
            return
        if response is not None and response.error_code:
            error = error_for_code(response.error_code)(
                response.error_message, group_id=self.group_id, member_id=self.member_id
            )
        if error is not None:
            self._on_error(now, error)
        elif response is not None:
            self._on_success(now, response)

    def _on_success(self, now: float, response: ShareGroupHeartbeatResponseV1) -> None:
        self._failures = 0
        if self.state is MemberState.LEAVING:
            # leave() was called while this heartbeat was in flight: leave with its id now
            if response.member_id:
                self.member_id = response.member_id
            self._next_heartbeat_ms = now
            return
        self._send_topics = False
        if response.member_id:
            # KIP-932 members bring their own id; a coordinator may still hand out one
            self.member_id = response.member_id
        self.member_epoch = response.member_epoch
        if response.heartbeat_interval_ms > 0:
            self.heartbeat_interval_ms = float(response.heartbeat_interval_ms)
        if response.assignment is not None:
            self._set_assignment(
                {
                    tp.topic_id: frozenset(tp.partitions)
                    for tp in response.assignment.topic_partitions
                }
            )
        if self.state is MemberState.JOINING:
            log.info(
                "share group %r: joined as %s (epoch %d)",
                self.group_id,
                self.member_id,
                self.member_epoch,
            )
            self._transition(MemberState.STABLE)
        self._next_heartbeat_ms = now + self.heartbeat_interval_ms

    def _on_error(self, now: float, error: BaseException) -> None:
        if self.state is MemberState.LEAVING:
            self._next_heartbeat_ms = now  # leave() came while this was in flight: leave now
            return
        if isinstance(error, _REJOIN):
            log.info(
                "share group %r: member %s fenced (%s); rejoining with epoch 0",
                self.group_id,
                self.member_id,
                type(error).__name__,
            )
            self.member_epoch = JOIN_EPOCH
            self._send_topics = True
            self._set_assignment({})
            self._transition(MemberState.JOINING)
            self._next_heartbeat_ms = now
            return
        retriable = isinstance(error, KafkaError) and error.retriable
        if isinstance(error, _FIND_COORDINATOR) or not isinstance(error, BrokerResponseError):
            self._coordinator.mark_unknown(now, f"ShareGroupHeartbeat failed: {error!r}")
            retriable = True
        if isinstance(error, CoordinatorLoadInProgressError) or retriable:
            self._failures += 1
            self._next_heartbeat_ms = now + self._backoff.delay_ms(self._failures)
            log.debug("share group %r: heartbeat failed (%r); retrying", self.group_id, error)
            return
        self.fatal_error = (
            error
            if isinstance(error, KafkaError)
            else KafkaError(f"share group {self.group_id!r}: heartbeat failed: {error!r}")
        )
        log.error("share group %r: fatal heartbeat error: %r", self.group_id, error)
        self._set_assignment({})
        self._transition(MemberState.FATAL)

    # -- helpers --------------------------------------------------------------------------------

    def _set_assignment(self, assignment: Assignment) -> None:
        if assignment != self.assignment:
            self.assignment = assignment
            self.assignment_version += 1

    def _transition(self, state: MemberState) -> None:
        if state is not self.state:
            log.debug("share group %r: %s -> %s", self.group_id, self.state.value, state.value)
            self.state = state
