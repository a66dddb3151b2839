"""Correlation ids and the table of requests awaiting a response on one connection.

Sans-I/O: Kafka answers requests in the order they were sent, so a response must match the
oldest in-flight request; anything else is a protocol error.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from kafkaio.errors import KafkaError, KafkaProtocolError

INT32_MAX = 2**31 - 1

log = logging.getLogger("kafkaio.net")


class ResponseSlot(Protocol):
    """Where a request's outcome goes: a response or an error (a Completion)."""

    def complete(self, value: object) -> bool: ...

    def fail(self, error: BaseException) -> bool: ...


S = TypeVar("S", bound="ResponseSlot | None")


class CorrelationIds:
    """Correlation ids 0, 1, ... 2**31-1, then 0 again (a non-negative int32)."""

    __slots__ = ("_next",)

    def __init__(self, start: int = 0) -> None:
        if not 0 <= start <= INT32_MAX:
            raise ValueError(f"correlation id must be in 0..{INT32_MAX}, got {start}")
        self._next = start

    def next(self) -> int:
        cid = self._next
        self._next = 0 if cid == INT32_MAX else cid + 1
        return cid


@dataclass(slots=True)
class InFlightRequest(Generic[S]):
    """One request written to the wire whose response has not been read yet."""

    correlation_id: int
    api_key: int
    api_version: int
    sent_at: float
    deadline: float
    slot: S  # None for a request the connection makes for itself (ApiVersions, SASL)

    @property
    def timeout(self) -> float:
        """Seconds it was given to be answered."""
        return self.deadline - self.sent_at


class InFlightRequests(Generic[S]):
    """Requests awaiting responses on one connection, oldest first, at most ``max_in_flight``."""

    __slots__ = ("max_in_flight", "_queue")

    def __init__(self, max_in_flight: int) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self.max_in_flight = max_in_flight
        self._queue: deque[InFlightRequest[S]] = deque()

    def __len__(self) -> int:
        return len(self._queue)

    def __iter__(self) -> Iterator[InFlightRequest[S]]:
        return iter(self._queue)

    @property
    def full(self) -> bool:
        return len(self._queue) >= self.max_in_flight

    def add(
        self,
        correlation_id: int,
        api_key: int,
        api_version: int,
        sent_at: float,
        deadline: float,
        slot: S,
    ) -> InFlightRequest[S]:
        """Record a request just written; raises KafkaError if the table is already full."""
        if len(self._queue) >= self.max_in_flight:
            raise KafkaError(
                f"{len(self._queue)} requests are already in flight (the limit is "
                f"{self.max_in_flight}); wait for a response before sending another"
            )
        entry = InFlightRequest(correlation_id, api_key, api_version, sent_at, deadline, slot)
        self._queue.append(entry)
        return entry

    def pop_response(self, correlation_id: int) -> InFlightRequest[S]:
        """Remove and return the request a response with ``correlation_id`` answers.

        Raises KafkaProtocolError if no request is waiting, or if the id is not the oldest
        request's (the broker answered out of order or with an id never sent). The table is
        left unchanged then; the caller should fail everything and close the connection.
        """
        queue = self._queue
        if queue and queue[0].correlation_id == correlation_id:
            return queue.popleft()
        if not queue:
            raise KafkaProtocolError(
                f"received a response with correlation id {correlation_id} while no request "
                "was in flight"
            )
        oldest = queue[0]
        known = any(e.correlation_id == correlation_id for e in queue)
        what = "out of order" if known else "with an unknown correlation id"
        raise KafkaProtocolError(
            f"received a response {what} ({correlation_id}); expected {oldest.correlation_id}"
            f" (api key {oldest.api_key}). Kafka answers in order on a connection, so the "
            "stream is out of sync"
        )

    def next_deadline(self) -> float | None:
        """The earliest deadline among in-flight requests (None if none is in flight)."""
        return min(e.deadline for e in self._queue) if self._queue else None

    def expired(self, now: float) -> list[InFlightRequest[S]]:
        """In-flight requests whose deadline is at or before ``now`` (left in the table)."""
        return [e for e in self._queue if e.deadline <= now]

    def fail_all(
        self, error: BaseException | Callable[[InFlightRequest[S]], BaseException]
    ) -> list[InFlightRequest[S]]:
        """Empty the table, failing each request's slot; returns the failed requests.

        ``error`` is one exception for all, or a function making each request's own
        exception (so that tasks do not raise one shared exception object). A slot's
        callback that raises is logged; the other slots are failed all the same.
        """
        failed = list(self._queue)
        self._queue.clear()
        for entry in failed:
            slot = entry.slot
            if slot is None:
                continue
            try:
                slot.fail(error if isinstance(error, BaseException) else error(entry))
            except Exception:  # a done-callback's bug must not leave the others waiting
                log.exception("a response callback failed")
        return failed
