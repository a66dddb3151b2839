"""ApplicationEventProcessor: the network task's first request manager each turn.

It drains the application-event queue, hands each event to the handler registered for its
type, and fails events whose deadline passed (Java's ApplicationEventProcessor + reaper).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kafkaio.errors import KafkaError, KafkaTimeoutError
from kafkaio.runtime.completion import timeout_error
from kafkaio.runtime.events import ApplicationEvent, ApplicationEventQueue, earliest_deadline
from kafkaio.runtime.requests import PollResult

EventHandler = Callable[[Any, float], None]


class ApplicationEventProcessor:
    """Dispatches application events by type; tracks the incomplete ones until their deadline.

    Register handlers with `register(EventType, handler)`; a handler gets ``(event, now)``
    and either completes the event or hands it to a manager that completes it later. A
    handler raising KafkaError fails the event with it.
    """

    def __init__(self, queue: ApplicationEventQueue) -> None:
        self._queue = queue
        self._handlers: dict[type[ApplicationEvent[Any]], EventHandler] = {}
        self._incomplete: list[ApplicationEvent[Any]] = []
        # events that complete when a condition on the managers' state holds
        self._conditions: list[tuple[ApplicationEvent[None], Callable[[], bool]]] = []

    def register(self, event_type: type[ApplicationEvent[Any]], handler: EventHandler) -> None:
        self._handlers[event_type] = handler

    @property
    def incomplete(self) -> int:
        return len(self._incomplete)

    def complete_when(self, event: ApplicationEvent[None], done: Callable[[], bool]) -> None:
        """Complete `event` (with None) at the first poll where ``done()`` holds, e.g. once
        the member has left its group; checked every turn of the network task."""
        if done():
            event.complete(None)
        else:
            self._conditions.append((event, done))

    def poll(self, now: float) -> PollResult:
        for event in self._queue.drain():
            self.process(event, now)
        if self._conditions:
            waiting = []
            for event, done in self._conditions:
                if event.done:
                    continue
                if done():
                    event.complete(None)
                else:
                    waiting.append((event, done))
            self._conditions = waiting
        self._expire(now)
        deadline = earliest_deadline(self._incomplete)
        return PollResult([], math.inf if deadline == math.inf else max(deadline - now, 0.0))

    def process(self, event: ApplicationEvent[Any], now: float) -> None:
        if event.done:
            return
        if now >= event.deadline_ms:
            event.fail(_timeout(event))
            return
        handler = self._handlers.get(type(event))
        if handler is None:
            event.fail(KafkaError(f"no handler registered for {type(event).__name__}"))
            return
        try:
            handler(event, now)
        except KafkaError as exc:
            event.fail(exc)
            return
        if not event.done:
            self._incomplete.append(event)

    def _expire(self, now: float) -> None:
        keep = []
        for event in self._incomplete:
            if event.done:
                continue
            if now >= event.deadline_ms:
                event.fail(_timeout(event))
                continue
            keep.append(event)
        self._incomplete = keep


def _timeout(event: ApplicationEvent[Any]) -> KafkaTimeoutError:
    return timeout_error(
        event,
        f"{event.describe()} did not complete before its deadline; the brokers may be "
        "unreachable or slow: check them, or pass a longer timeout",
    )
