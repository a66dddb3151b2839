"""Application and background events: how the application side and the network task talk.

Application calls become events carrying a completion and a deadline (Java's
CompletableEvent); background events (errors, later rebalance callbacks) flow back.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import anyio

from kafkaio.errors import KafkaTimeoutError
from kafkaio.metadata.cluster import TopicPartition

T = TypeVar("T")

_PENDING: Any = object()


@dataclass(slots=True, eq=False)
class ApplicationEvent(Generic[T]):
    """Base of every application event: a deadline (ms, driver clock) and a completion.

    The network task calls `complete` or `fail` exactly once (later calls are ignored); the
    application awaits `wait`. Sans-I/O until `wait` is called: creating and completing an
    event needs no event loop, so managers can be tested with plain calls.
    """

    deadline_ms: float
    _result: Any = field(default=_PENDING, init=False, repr=False)
    _error: BaseException | None = field(default=None, init=False, repr=False)
    _waiter: anyio.Event | None = field(default=None, init=False, repr=False)
    # why the event is not done yet: the last error of an attempt that is being retried
    # (`note_error`), or where a manager keeps it (`error_source`); a timeout carries it
    _last_error: BaseException | None = field(default=None, init=False, repr=False)
    error_source: Callable[[], BaseException | None] | None = field(
        default=None, init=False, repr=False
    )

    def note_error(self, error: BaseException | None) -> None:
        """Remember the error of an attempt that will be retried (for the timeout)."""
        if error is not None:
            self._last_error = error

    @property
    def last_error(self) -> BaseException | None:
        """The last error seen while working on the event, if any."""
        if self.error_source is not None:
            error = self.error_source()
            if error is not None:
                return error
        return self._last_error

    @property
    def done(self) -> bool:
        return self._result is not _PENDING or self._error is not None

    def complete(self, value: T) -> None:
        if not self.done:
            self._result = value
            self._wake()

    def fail(self, error: BaseException) -> None:
        if not self.done:
            self._error = error
            self._wake()

    def result(self) -> T:
        """The value, or raise the error; the event must be done."""
        if self._error is not None:
            raise self._error
        if self._result is _PENDING:
            raise RuntimeError("the event is not complete yet")
        return self._result  # type: ignore[no-any-return]

    def _wake(self) -> None:
        if self._waiter is not None:
            self._waiter.set()

    async def wait(self, timeout_s: float | None = None) -> T:
        """Wait for completion; raise KafkaTimeoutError after `timeout_s` seconds."""
        if not self.done:
            self._waiter = anyio.Event()
            with anyio.move_on_after(timeout_s):
                await self._waiter.wait()
            if not self.done:
                self.fail(
                    timeout_error(
                        self, f"{type(self).__name__} did not complete within {timeout_s:g} s"
                    )
                )
        return self.result()

    def describe(self) -> str:
        return type(self).__name__


def timeout_error(event: ApplicationEvent[Any], message: str) -> KafkaTimeoutError:
    """KafkaTimeoutError(`message`) naming the event's last error (also its ``__cause__``)."""
    cause = event.last_error
    if cause is not None:
        message = f"{message} (last error: {cause})"
    error = KafkaTimeoutError(message)
    error.__cause__ = cause
    return error


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


# -- queues --------------------------------------------------------------------------------


class ApplicationEventQueue:
    """Events the application submitted and the network task has not taken yet."""

    def __init__(self, wakeup: Callable[[], None] = lambda: None) -> None:
        self._events: deque[ApplicationEvent[Any]] = deque()
        self._wakeup = wakeup

    def set_wakeup(self, wakeup: Callable[[], None]) -> None:
        self._wakeup = wakeup

    def put(self, event: ApplicationEvent[Any]) -> None:
        self._events.append(event)
        self._wakeup()

    def drain(self) -> list[ApplicationEvent[Any]]:
        events = list(self._events)
        self._events.clear()
        return events

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
