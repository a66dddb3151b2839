"""The consumer's application events (the network task applies them: see handlers.py and
the managers that register for them). The event machinery is kafkaio.runtime.events.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkaio.metadata.cluster import TopicPartition
from kafkaio.runtime.events import ApplicationEvent


@dataclass(slots=True, eq=False)
class ListOffsetsEvent(ApplicationEvent[dict[TopicPartition, tuple[int, int, int | None] | None]]):
    """Look up offsets by timestamp (-2 earliest, -1 latest, or ms) for partitions.

    Completes with {tp: (offset, timestamp, leader_epoch) or None when no record matches}.
    """

    timestamps: dict[TopicPartition, int] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class AwaitPositionsEvent(ApplicationEvent[dict[TopicPartition, int]]):
    """Completes when every partition has a valid position, with those positions."""

    partitions: tuple[TopicPartition, ...] = ()


@dataclass(slots=True, eq=False)
class CommitEvent(ApplicationEvent[dict[TopicPartition, Any]]):
    """Commit offsets ({tp: OffsetAndMetadata}) for the group; completes with them.

    ``retry``: retry retriable errors until the deadline (commit); otherwise one attempt
    once the coordinator is known (commit_async).
    """

    offsets: dict[TopicPartition, Any] = field(default_factory=dict)
    retry: bool = True
    # called once with the error (or None) when the commit finishes (commit callbacks)
    on_done: Callable[[BaseException | None], None] | None = None


@dataclass(slots=True, eq=False)
class FetchCommittedEvent(ApplicationEvent[dict[TopicPartition, Any]]):
    """Look up the group's committed offsets: {tp: OffsetAndMetadata or None}."""

    partitions: tuple[TopicPartition, ...] = ()


# -- subscription, assignment, positions, membership (no result: they complete when the
# network task applied them) ---------------------------------------------------------------


@dataclass(slots=True, eq=False)
class SubscriptionChangeEvent(ApplicationEvent[None]):
    """subscribe(): the group assigns partitions of `topics`, or of topics matching
    `pattern` (Java's TopicSubscriptionChangeEvent / TopicPatternSubscriptionChangeEvent)."""

    topics: tuple[str, ...] = ()
    pattern: Any = None  # re.Pattern[str]


@dataclass(slots=True, eq=False)
class AssignmentChangeEvent(ApplicationEvent[None]):
    """assign(): consume exactly `partitions` (Java's AssignmentChangeEvent)."""

    partitions: tuple[TopicPartition, ...] = ()


@dataclass(slots=True, eq=False)
class UnsubscribeEvent(ApplicationEvent[None]):
    """unsubscribe(): leave the group (when subscribed) and drop the subscription or
    assignment; completes once the member is out (Java's UnsubscribeEvent)."""


@dataclass(slots=True, eq=False)
class LeaveGroupOnCloseEvent(ApplicationEvent[None]):
    """close(): revoke (the listener runs on the application side) and leave the group;
    completes once the member is out (Java's LeaveGroupOnCloseEvent)."""

    reason: str = "the consumer is being closed"


@dataclass(slots=True, eq=False)
class SeekEvent(ApplicationEvent[None]):
    """seek(): fetch `partition` from `offset` next (Java's SeekUnvalidatedEvent)."""

    partition: TopicPartition = TopicPartition("", 0)
    offset: int = 0
    leader_epoch: int | None = None


@dataclass(slots=True, eq=False)
class ResetOffsetsEvent(ApplicationEvent[None]):
    """seek_to_beginning() / seek_to_end(): reset `partitions` by `strategy` (Java's
    ResetOffsetEvent)."""

    partitions: tuple[TopicPartition, ...] = ()
    strategy: Any = None  # OffsetResetStrategy


@dataclass(slots=True, eq=False)
class PauseEvent(ApplicationEvent[None]):
    """pause() (Java's PausePartitionsEvent)."""

    partitions: tuple[TopicPartition, ...] = ()


@dataclass(slots=True, eq=False)
class ResumeEvent(ApplicationEvent[None]):
    """resume() (Java's ResumePartitionsEvent)."""

    partitions: tuple[TopicPartition, ...] = ()


@dataclass(slots=True, eq=False)
class PollEvent(ApplicationEvent[None]):
    """The application polled (getmany, getone, iteration): resets the max_poll_interval_ms
    clock and starts a (re)join when needed (Java's PollEvent)."""


@dataclass(slots=True, eq=False)
class RebalanceStepDoneEvent(ApplicationEvent[None]):
    """The application side finished a rebalance step (revoked or lost partitions: the
    listener ran, consumed offsets were committed; or assigned ones): the membership goes
    on (Java's ConsumerRebalanceListenerCallbackCompletedEvent)."""

    step: str = "revocation"  # "revocation" or "assignment"
