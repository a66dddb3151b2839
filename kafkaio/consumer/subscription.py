"""SubscriptionState: what the consumer is subscribed to, what it is assigned, and where it is.

Shared by every consumer request manager (membership, fetch, offsets, commit) as Java's
SubscriptionState is. Sans-I/O and synchronous: only the network task mutates it, except for
the calls the application makes through events (which the network task also processes).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass

from kafkaio.errors import KafkaConfigError, KafkaError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.structs import OffsetAndMetadata


class SubscriptionType(enum.Enum):
    NONE = "none"
    AUTO_TOPICS = "topics"  # subscribe(topics): the group assigns partitions
    AUTO_PATTERN = "pattern"  # subscribe(pattern=...): topics re-matched on metadata updates
    USER_ASSIGNED = "assigned"  # assign(partitions): no group management


class OffsetResetStrategy(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    NONE = "none"

    @classmethod
    def parse(cls, value: str) -> OffsetResetStrategy:
        try:
            return cls(value.lower())
        except ValueError:
            raise KafkaConfigError(
                f"auto_offset_reset is {value!r}; use 'earliest', 'latest' or 'none'"
            ) from None


class FetchState(enum.Enum):
    INITIALIZING = "initializing"  # no position yet: look up the committed offset
    AWAIT_RESET = "await_reset"  # position to be reset by ListOffsets (earliest/latest/time)
    AWAIT_VALIDATION = "await_validation"  # leader changed: validate with OffsetForLeaderEpoch
    FETCHING = "fetching"  # has a valid position


@dataclass(slots=True)
class FetchPosition:
    """The next offset to fetch, the leader epoch of the record before it (None if unknown),
    and the leader/epoch it was validated against."""

    offset: int
    offset_epoch: int | None = None
    leader_id: int | None = None
    leader_epoch: int | None = None


@dataclass(slots=True)
class PartitionState:
    fetch_state: FetchState = FetchState.INITIALIZING
    position: FetchPosition | None = None
    paused: bool = False
    pending_revocation: bool = False
    reset_strategy: OffsetResetStrategy | None = None
    reset_timestamp: int | None = None  # for offsets_for_times-style resets
    next_reset_allowed_ms: float = 0.0
    high_watermark: int | None = None
    log_start_offset: int | None = None
    last_stable_offset: int | None = None
    preferred_read_replica: int | None = None
    preferred_read_replica_expires_ms: float = 0.0
    # (error, position): validation found the log truncated at this position with
    # auto_offset_reset 'none'; stands until the position changes (seek)
    truncation: tuple[BaseException, FetchPosition] | None = None

    def truncated(self) -> BaseException | None:
        """The LogTruncationError of the current position, if validation found one."""
        mark = self.truncation
        if mark is None or mark[1] is not self.position:
            return None
        return mark[0]


class SubscriptionState:
    """Subscription, assignment and per-partition fetch state (positions, pause, resets)."""

    def __init__(self, default_reset: OffsetResetStrategy = OffsetResetStrategy.LATEST) -> None:
        self.default_reset = default_reset
        self.type = SubscriptionType.NONE
        self._topics: frozenset[str] = frozenset()
        self._pattern: re.Pattern[str] | None = None
        self._assignment: dict[TopicPartition, PartitionState] = {}
        # increases whenever the assignment changes, so managers can spot stale work
        self.assignment_id = 0

    # -- subscription ----------------------------------------------------------------------

    def _set_type(self, kind: SubscriptionType) -> None:
        if self.type is not SubscriptionType.NONE and self.type is not kind:
            raise KafkaError(
                "subscribe() and assign() cannot be mixed: call unsubscribe() before switching "
                f"(the consumer is using {self.type.value!r})"
            )
        self.type = kind

    def subscribe(self, topics: Iterable[str]) -> bool:
        """Subscribe to topics; returns whether the set changed."""
        names = frozenset(topics)
        for name in names:
            if not name or not name.strip():
                raise KafkaConfigError("topic names must not be empty")
        self._set_type(SubscriptionType.AUTO_TOPICS)
        changed = names != self._topics
        self._topics = names
        return changed

    def subscribe_pattern(self, pattern: str | re.Pattern[str]) -> None:
        self._set_type(SubscriptionType.AUTO_PATTERN)
        self._pattern = re.compile(pattern) if isinstance(pattern, str) else pattern

    def match_pattern(self, all_topics: Iterable[str]) -> bool:
        """Re-evaluate the pattern against the cluster's topics; returns whether it changed."""
        if self._pattern is None:
            return False
        matched = frozenset(t for t in all_topics if self._pattern.fullmatch(t))
        changed = matched != self._topics
        self._topics = matched
        return changed

    @property
    def pattern(self) -> re.Pattern[str] | None:
        return self._pattern

    def subscription(self) -> frozenset[str]:
        """Topics subscribed to (for a pattern: the topics it currently matches)."""
        return self._topics

    def has_auto_assignment(self) -> bool:
        return self.type in (SubscriptionType.AUTO_TOPICS, SubscriptionType.AUTO_PATTERN)

    def unsubscribe(self) -> None:
        self.type = SubscriptionType.NONE
        self._topics = frozenset()
        self._pattern = None
        self._set_assignment(())

    # -- assignment ------------------------------------------------------------------------

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> bool:
        """Manual assignment (no group). Keeps the state of partitions that stay assigned."""
        self._set_type(SubscriptionType.USER_ASSIGNED)
        parts = list(partitions)
        if not parts:
            self.unsubscribe()
            return True
        self._topics = frozenset(tp.topic for tp in parts)
        return self._set_assignment(parts)

    def assign_from_subscribed(self, partitions: Iterable[TopicPartition]) -> bool:
        """Assignment chosen by the group (all partitions must belong to subscribed topics).

        The partitions are (again) this consumer's: a `mark_pending_revocation` flag left
        from an earlier revocation does not carry over, so they are fetchable once positioned.
        """
        if not self.has_auto_assignment():
            raise KafkaError("the group assigned partitions but the consumer is not subscribed")
        changed = self._set_assignment(partitions)
        for st in self._assignment.values():
            st.pending_revocation = False
        return changed

    def _set_assignment(self, partitions: Iterable[TopicPartition]) -> bool:
        new = {}
        for tp in partitions:
            new[tp] = self._assignment.get(tp) or PartitionState()
        if new.keys() == self._assignment.keys():
            return False
        self._assignment = new
        self.assignment_id += 1
        return True

    def assigned_partitions(self) -> set[TopicPartition]:
        return set(self._assignment)

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self._assignment

    def state(self, tp: TopicPartition) -> PartitionState:
        try:
            return self._assignment[tp]
        except KeyError:
            raise KafkaError(
                f"partition {tp} is not assigned to this consumer; assign() it or wait for the "
                "group to assign it"
            ) from None

    def mark_pending_revocation(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching partitions about to be revoked (cooperative rebalance)."""
        for tp in partitions:
            if tp in self._assignment:
                self._assignment[tp].pending_revocation = True

    # -- positions -------------------------------------------------------------------------

    def seek(self, tp: TopicPartition, offset: int, offset_epoch: int | None = None) -> None:
        """Set the next offset to fetch; the position is trusted (no validation)."""
        if offset < 0:
            raise KafkaConfigError(f"cannot seek {tp} to negative offset {offset}")
        st = self.state(tp)
        st.position = FetchPosition(offset, offset_epoch)
        st.fetch_state = FetchState.FETCHING
        st.reset_strategy = None

    def seek_validated(self, tp: TopicPartition, position: FetchPosition) -> None:
        st = self.state(tp)
        st.position = position
        st.fetch_state = FetchState.FETCHING

    def seek_unvalidated(self, tp: TopicPartition, position: FetchPosition) -> None:
        """A position (e.g. a committed offset with its epoch) that must be validated against
        the current leader's epoch before fetching (KIP-320)."""
        st = self.state(tp)
        st.position = position
        st.fetch_state = FetchState.AWAIT_VALIDATION

    def position(self, tp: TopicPartition) -> FetchPosition | None:
        return self.state(tp).position

    def advance(self, tp: TopicPartition, next_offset: int, offset_epoch: int | None) -> None:
        """Move the position after records were handed to the application."""
        st = self._assignment.get(tp)
        if st is not None and st.position is not None:
            st.position.offset = next_offset
            if offset_epoch is not None:
                st.position.offset_epoch = offset_epoch

    def request_offset_reset(
        self, tp: TopicPartition, strategy: OffsetResetStrategy | None = None
    ) -> None:
        st = self.state(tp)
        st.reset_strategy = strategy or self.default_reset
        st.fetch_state = FetchState.AWAIT_RESET
        st.position = None

    def initializing_partitions(self) -> list[TopicPartition]:
        """Partitions without a position that need their committed offset looked up."""
        return [
            tp for tp, st in self._assignment.items() if st.fetch_state is FetchState.INITIALIZING
        ]

    def partitions_needing_validation(self) -> list[TopicPartition]:
        return [
            tp
            for tp, st in self._assignment.items()
            if st.fetch_state is FetchState.AWAIT_VALIDATION
        ]

    def fetchable_partitions(self) -> list[TopicPartition]:
        """Assigned, positioned, not paused and not being revoked: may be fetched now."""
        return [
            tp
            for tp, st in self._assignment.items()
            if st.fetch_state is FetchState.FETCHING and not st.paused and not st.pending_revocation
        ]

    def all_consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """Positions of every positioned partition: what an auto-commit commits."""
        return {
            tp: OffsetAndMetadata(st.position.offset, "", st.position.offset_epoch)
            for tp, st in self._assignment.items()
            if st.position is not None and st.fetch_state is FetchState.FETCHING
        }

    # -- pause -----------------------------------------------------------------------------

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.state(tp).paused = True

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.state(tp).paused = False

    def paused_partitions(self) -> set[TopicPartition]:
        return {tp for tp, st in self._assignment.items() if st.paused}

    # -- partition metadata from fetch responses -----------------------------------------------

    def update_watermarks(
        self,
        tp: TopicPartition,
        *,
        high_watermark: int | None = None,
        log_start_offset: int | None = None,
        last_stable_offset: int | None = None,
    ) -> None:
        st = self._assignment.get(tp)
        if st is None:
            return
        if high_watermark is not None and high_watermark >= 0:
            st.high_watermark = high_watermark
        if log_start_offset is not None and log_start_offset >= 0:
            st.log_start_offset = log_start_offset
        if last_stable_offset is not None and last_stable_offset >= 0:
            st.last_stable_offset = last_stable_offset

    def lag(self, tp: TopicPartition) -> int | None:
        """High watermark minus position, when both are known."""
        st = self._assignment.get(tp)
        if st is None or st.position is None or st.high_watermark is None:
            return None
        return max(st.high_watermark - st.position.offset, 0)
