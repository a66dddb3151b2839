"""Application and background events: how a client's application side and its network task
talk (Java's ApplicationEventHandler / BackgroundEventHandler).

Application calls become events (a Completion with a deadline, Java's CompletableEvent) on the
ApplicationEventQueue, which the network task drains through the ApplicationEventProcessor
(kafkaio.runtime.processor); what the network task hands back (errors, rebalance callbacks to
run in the application's task) goes on the BackgroundEventQueue. Each client defines its
events next to it (kafkaio.consumer.events, kafkaio.share, kafkaio.producer.events).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

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
    and (with the group managers) callbacks to run on the application side.

    ``events`` is the queue itself (one deque for the queue's life): the consumer's
    iteration fast path tests it directly, saving a ``__len__`` call per record."""

    __slots__ = ("events", "on_put")

    def __init__(self) -> None:
        self.events: deque[BaseException | Callable[[], Any]] = deque()
        self.on_put: Callable[[], None] = lambda: None

    def put_error(self, error: BaseException) -> None:
        self.events.append(error)
        self.on_put()

    def put_callback(self, callback: Callable[[], Any]) -> None:
        """A plain or async callable the application side runs (e.g. rebalance listeners)."""
        self.events.append(callback)
        self.on_put()

    def drain(self) -> list[BaseException | Callable[[], Any]]:
        events = list(self.events)
        self.events.clear()
        return events

    def __len__(self) -> int:
        return len(self.events)


def earliest_deadline(events: Any) -> float:
    return min((e.deadline_ms for e in events), default=math.inf)
