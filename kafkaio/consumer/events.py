"""Application and background events: how the application side and the network task talk.

Application calls become events carrying a completion and a deadline (Java's
CompletableEvent); background events (errors, later rebalance callbacks) flow back.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kafkaio.metadata.cluster import TopicPartition
from kafkaio.runtime.completion import Completion

T = TypeVar("T")


@dataclass(slots=True, eq=False)
class ApplicationEvent(Completion[T]):
    """Base of every application event: a Completion with a deadline (ms, driver clock),
    Java's CompletableEvent. The network task completes or fails it; the processor fails
    it when its deadline passes; the application awaits it."""

    deadline_ms: float

    def __post_init__(self) -> None:
        Completion.__init__(self)


# -- the events this package defines (the group managers add their own) --------------------


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


# -- queues --------------------------------------------------------------------------------


class ApplicationEventQueue:
    """Events the application submitted and the network task has not taken yet."""

    def __init__(self, wakeup: Callable[[], None] = lambda: None) -> None:
        self._events: deque[ApplicationEvent[Any]] = deque()
        self._wakeup = wakeup
        # called after the network task took the events (the application may wait for it)
        self.on_drained: Callable[[], None] = lambda: None

    def set_wakeup(self, wakeup: Callable[[], None]) -> None:
        self._wakeup = wakeup

    def put(self, event: ApplicationEvent[Any], *, wake: bool = True) -> None:
        """Queue `event`; wake the network task (unless `wake` is False: it is taken at the
        task's next turn)."""
        self._events.append(event)
        if wake:
            self._wakeup()

    def drain(self) -> list[ApplicationEvent[Any]]:
        events = list(self._events)
        self._events.clear()
        if events:
            self.on_drained()
        return events

    def waiting(self, but: type[ApplicationEvent[Any]] | None = None) -> bool:
        """Whether events (other than those of type `but`) wait to be taken."""
        return any(type(event) is not but for event in self._events)

    def pending(self) -> list[ApplicationEvent[Any]]:
        """The events not taken by the network task yet, oldest first (not removed)."""
        return list(self._events)

    def __len__(self) -> int:
        return len(self._events)


class BackgroundEventQueue:
    """What the network task hands the application: errors to raise from getmany()/__anext__,
    and (with the group managers) callbacks to run on the application side."""

    def __init__(self) -> None:
        self._events: deque[BaseException | Callable[[], Any]] = deque()
        self.on_put: Callable[[], None] = lambda: None

    def put_error(self, error: BaseException) -> None:
        self._events.append(error)
        self.on_put()

    def put_callback(self, callback: Callable[[], Any]) -> None:
        """A plain or async callable the application side runs (e.g. rebalance listeners)."""
        self._events.append(callback)
        self.on_put()

    def drain(self) -> list[BaseException | Callable[[], Any]]:
        events = list(self._events)
        self._events.clear()
        return events

    def __len__(self) -> int:
        return len(self._events)


def earliest_deadline(events: Any) -> float:
    return min((e.deadline_ms for e in events), default=math.inf)
