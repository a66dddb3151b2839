"""CoordinatorManager: finds and remembers the group coordinator (FindCoordinator, key_type 0).

Sans-I/O: `poll(now)` returns the lookup to send; the other group managers read `coordinator`.
The request and its answer are kafkaio.metadata.coordinators' (shared with the transactional
producer and the Admin client).
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from kafkaio.backoff import ExponentialBackoff
from kafkaio.errors import BrokerResponseError, KafkaError
from kafkaio.metadata.coordinators import (
    CoordinatorAddress,
    CoordinatorType,
    lookup_request,
    parse_lookup,
)
from kafkaio.protocol.messages import FindCoordinatorResponse
from kafkaio.runtime.requests import PollResult, UnsentRequest

log = logging.getLogger("kafkaio.consumer.group")

_MAX_INT32 = 2**31 - 1


def coordinator_connection_id(node_id: int) -> int:
    """The synthetic node id under which the coordinator gets its own connection.

    Like the Java client (``Integer.MAX_VALUE - nodeId``), coordinator traffic (JoinGroup
    waits up to the rebalance timeout) uses a connection separate from fetches to the same
    broker. The reactor registers ``{connection_id: (host, port)}`` with the
    ConnectionManager next to the brokers from metadata (see `CoordinatorManager.addresses`).
    """
    return _MAX_INT32 - node_id


@dataclass(frozen=True, slots=True)
class Coordinator:
    """The broker coordinating the group: its broker id, address and connection id."""

    node_id: int
    host: str
    port: int
    connection_id: int

    @classmethod
    def of(cls, node_id: int, host: str, port: int, *, separate_connection: bool) -> Coordinator:
        conn = coordinator_connection_id(node_id) if separate_connection else node_id
        return cls(node_id, host, port, conn)


class CoordinatorManager:
    """Looks up the group coordinator whenever it is unknown, with backoff between lookups.

    Drive it with `poll(now)` and send what it returns (any broker: ``node_id`` None). Other
    managers send group requests to ``coordinator.connection_id`` and call `mark_unknown` on
    NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or a lost connection; the next poll looks the
    coordinator up again. Lookups are at least ``retry_backoff_ms`` apart, growing
    exponentially to ``retry_backoff_max_ms`` while they fail. GROUP_AUTHORIZATION_FAILED and
    other non-retriable errors are queued for the application (`drain_errors`) and the lookup
    is retried after the backoff, as the Java client does.

    With ``separate_connection`` (the default) `Coordinator.connection_id` is a synthetic id
    (`coordinator_connection_id`) that the reactor must register; otherwise it is the broker id.
    """

    def __init__(
        self,
        group_id: str,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 1000,
        *,
        separate_connection: bool = True,
        backoff_jitter: float = 0.2,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.group_id = group_id
        self._backoff = ExponentialBackoff(
            retry_backoff_ms, retry_backoff_max_ms, jitter=backoff_jitter, rng=rng
        )
        self._separate = separate_connection
        self._coordinator: Coordinator | None = None
        self._in_flight = False
        self._failures = 0
        self._next_lookup_ms = -math.inf
        self._errors: list[KafkaError] = []
        self._last_error: BaseException | None = None
        # bumped whenever the coordinator changes, so others can tell one lookup from the next
        self.epoch = 0

    # -- state ---------------------------------------------------------------------------

    @property
    def coordinator(self) -> Coordinator | None:
        """The known coordinator, or None while it is being (re)discovered."""
        return self._coordinator

    @property
    def last_error(self) -> BaseException | None:
        """Why the last lookup failed; None after a successful one."""
        return self._last_error

    def addresses(self) -> dict[int, tuple[str, int]]:
        """``{connection_id: (host, port)}`` for the reactor to add to the connection manager."""
        c = self._coordinator
        return {} if c is None else {c.connection_id: (c.host, c.port)}

    def drain_errors(self) -> list[KafkaError]:
        """Errors for the application (e.g. GroupAuthorizationFailedError), oldest first."""
        errors, self._errors = self._errors, []
        return errors

    def mark_unknown(self, now: float, reason: str) -> None:
        """Forget the coordinator (it moved, is unavailable, or its connection failed)."""
        if self._coordinator is not None:
            log.info(
                "group %r: coordinator %s marked unknown (%s); looking it up again",
                self.group_id,
                self._coordinator,
                reason,
            )
            self._coordinator = None
            self.epoch += 1

    # -- request manager -----------------------------------------------------------------

    def poll(self, now: float) -> PollResult:
        if self._coordinator is not None or self._in_flight:
            return PollResult()
        if now < self._next_lookup_ms:
            return PollResult(next_poll_ms=self._next_lookup_ms - now)
        self._in_flight = True
        request = lookup_request(CoordinatorType.GROUP, [self.group_id])
        return PollResult([UnsentRequest(None, request, self._on_response)])

    def _on_response(self, now: float, response: FindCoordinatorResponse | None, error: BaseException | None) -> None:
        self._in_flight = False
        if response is not None:  # answered (error is None)
            error = self._apply(now, response)
        if error is None:
            self._failures = 0
            self._last_error = None
            self._next_lookup_ms = now + self._backoff.delay_ms(0)
            return
        self._last_error = error
        self._failures += 1
        self._next_lookup_ms = now + self._backoff.delay_ms(self._failures)
        if isinstance(error, BrokerResponseError) and not error.retriable:
            self._errors.append(error)  # e.g. GROUP_AUTHORIZATION_FAILED: tell the app
        log.debug("group %r: coordinator lookup failed: %r", self.group_id, error)

    def _apply(self, now: float, response: FindCoordinatorResponse) -> KafkaError | None:
        found = parse_lookup(response, CoordinatorType.GROUP, [self.group_id])[self.group_id]
        if not isinstance(found, CoordinatorAddress):
            return found
        node_id, host, port = found.node_id, found.host, found.port
        self._coordinator = Coordinator.of(node_id, host, port, separate_connection=self._separate)
        self.epoch += 1
        log.info("group %r: coordinator is node %d (%s:%d)", self.group_id, node_id, host, port)
        return None
