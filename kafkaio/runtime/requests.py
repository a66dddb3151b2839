"""What a request manager hands the I/O driver: requests to send and when to poll it next.

Mirrors the Java AsyncKafkaConsumer's RequestManager / UnsentRequest split, without threads.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from kafkaio.protocol.api import Request

R = TypeVar("R")

# The driver calls it once, with the time (ms) and either the response or the error: the
# request's response class (``Request[R]``) and None, or None and the error (None and None
# for a request the broker does not answer, once it is written).
CompletionHandler = Callable[[float, "R | None", "BaseException | None"], None]


@dataclass(slots=True)
class UnsentRequest(Generic[R]):
    """One request a manager wants sent.

    ``node_id`` None means any broker (the driver picks the least loaded one). ``handler``
    receives ``(now_ms, response, None)`` or ``(now_ms, None, error)``: the response is the
    request's response class (an ``XRequest`` is a ``Request[XResponse]``), so strict mypy
    checks what handlers read of it; a timeout or a lost connection is an error. ``timeout_ms`` None means the connection's request timeout.
    ``max_version`` caps the negotiated API version (e.g. Fetch v12 when a topic has no id,
    OffsetFetch v7 for the single-group layout); None means the highest both sides speak.
    ``handle_on_read`` asks for the handler to run as soon as its response is read, ahead of
    the callbacks already queued in the event loop (asyncio's fast path; elsewhere it changes
    nothing): for short handlers that an application is waiting on, such as Produce acks,
    which would otherwise wait behind a Fetch cycle read in the same loop pass.
    ``any_connection`` lets the driver send it on another open connection to the node's
    broker that has nothing in flight (the group coordinator's own connection, a bootstrap
    server's at the same address) when the node's own connection has requests in flight:
    for a request the broker should not answer only after those (a broker answers one
    connection's requests in order), such as the Fetch that ends a fetch session on close
    while a fetch is held there. No connection is opened for it; if it fails on the other
    connection, it is sent on the node's own.
    ``manager`` is set by the driver: the position of the manager that made the request
    in its list (after the response, see `RequestManager`).
    """

    node_id: int | None
    request: Request[R]
    handler: CompletionHandler[R]
    timeout_ms: float | None = None
    expect_response: bool = True
    max_version: int | None = None
    handle_on_read: bool = False
    any_connection: bool = False
    manager: int = -1


@dataclass(slots=True)
class PollResult:
    """The requests to send now, and milliseconds from ``now`` until the next poll is due
    (math.inf: not before a response, a failure or an application event arrives)."""

    requests: list[UnsentRequest[Any]] = field(default_factory=list)
    next_poll_ms: float = math.inf


class RequestManager(Protocol):
    """A sans-I/O state machine run by the I/O driver. It never reads a clock or a socket.

    After a response's handler ran, the driver polls every manager again, unless the
    request's manager has a true class attribute ``self_contained``: its handlers change
    no other manager's state (asking the metadata manager for an update aside). Then the
    driver polls that manager, the metadata manager if it wants to update now, and the
    managers whose last poll asked to be polled by now; the others are polled at their
    next turn as they asked (an application event wakes the driver and polls them all).
    """

    def poll(self, now: float) -> PollResult:
        """Requests to send at ``now`` (milliseconds) and when to be polled again."""
        ...


@runtime_checkable
class ClosingRequestManager(Protocol):
    """A request manager with last requests to send when its client closes (Java's
    ``RequestManager.pollOnClose``): the driver's close phase polls it, instead of `poll`,
    until ``close_done``. ``connected(node)`` tells whether a connection to ``node`` is open
    (a close should not open new ones)."""

    def poll_on_close(self, now: float, connected: Callable[[int], bool]) -> PollResult: ...

    @property
    def close_done(self) -> bool:
        """Nothing more to send or wait for."""
        ...
