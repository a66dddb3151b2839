"""Incremental fetch sessions (KIP-227): one per node, as a sans-I/O state machine.

A consumer fetching many partitions from a broker sends every partition in every Fetch
request, and gets every partition back in every response, unless the two share a *fetch
session*. A full request (epoch 0) asks the broker to create one; its response names the
session id. Later requests are incremental (epoch 1, 2, ...): they list only the partitions
that are new or whose fetch state changed (offset, epochs, limit) and those to forget, and
their responses list only the partitions with something to say (records, an error, new
watermarks). Any doubt (an error, a session error from the broker, a switch between topic
names and topic ids, a topic re-created under a new id) falls back to a full request, which
also closes the old session. A consumer that closes sends each open session a final
request (epoch -1), so the broker frees it at once instead of when its cache evicts it.

A broker that does not keep sessions answers a full request with session id 0 (so do Tansu
0.6 and librdkafka's mock cluster): every request then stays full, which is what a
sessionless client sends anyway.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kafkaio.metadata.cluster import TopicPartition

NO_SESSION = 0  # session id: none
INITIAL_EPOCH = 0  # a full request, asking for a new session (closing session_id if not 0)
FINAL_EPOCH = -1  # a request that closes session_id and opens none
_MAX_EPOCH = 2**31 - 1
# top-level errors that concern the session itself (not the partitions)
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
FETCH_SESSION_TOPIC_ID_ERROR = 106
SESSION_ERRORS = frozenset(
    {FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR}
)


@dataclass(frozen=True, slots=True)
class SessionPartition:
    """What a fetch asks of one partition; the broker remembers it within a session."""

    topic_id: uuid.UUID
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class SessionPlan:
    """One request's share of the session: its id and epoch, the partitions to list
    (`send`), those to remove (`forget`, with the topic id they were added under), and
    every partition the session holds once the broker accepts it (`wanted`)."""

    session_id: int
    epoch: int
    send: list[TopicPartition]
    forget: list[tuple[TopicPartition, uuid.UUID]]
    wanted: dict[TopicPartition, SessionPartition]
    uses_ids: bool

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FetchSession:
    """The client's side of one node's fetch session.

    ``plan(wanted, uses_ids)`` says how to send the next request; exactly one of
    ``on_response(plan, error_code, session_id)`` and ``on_failure()`` follows for it (one
    Fetch per node is in flight at a time).
    """

    __slots__ = ("session_id", "epoch", "partitions", "uses_ids")

    def __init__(self) -> None:
        self.session_id = NO_SESSION
        self.epoch = INITIAL_EPOCH
        self.partitions: dict[TopicPartition, SessionPartition] = {}  # as the broker has them
        self.uses_ids = True

    def plan(self, wanted: dict[TopicPartition, SessionPartition], uses_ids: bool) -> SessionPlan:
        session = self.partitions
        if uses_ids != self.uses_ids or any(
            tp in session and session[tp].topic_id != part.topic_id for tp, part in wanted.items()
        ):
            # a session keys its topics by name or by id, for good; and a topic re-created
            # under a new id cannot be swapped within one below Fetch v13 (forgetting goes
            # by name there, and would drop the new one too): start a new session
            self._restart()
        if self.epoch == INITIAL_EPOCH:
            return SessionPlan(self.session_id, self.epoch, list(wanted), [], wanted, uses_ids)
        session = self.partitions
        send = [tp for tp, part in wanted.items() if session.get(tp) != part]
        forget = [(tp, part.topic_id) for tp, part in session.items() if tp not in wanted]
        return SessionPlan(self.session_id, self.epoch, send, forget, wanted, uses_ids)

    def on_response(self, plan: SessionPlan, error_code: int, session_id: int) -> bool:
        """The broker answered `plan`'s request; False if it answered with an error (the
        response holds no partitions then, and the next request is full)."""
        if error_code:
            if error_code == FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = NO_SESSION  # nothing left to close
            self._restart()  # else: close this session and ask for a new one
            return False
        self.uses_ids = plan.uses_ids
        if session_id == NO_SESSION:
            # no session kept (a broker without sessions, or it closed this one): full again
            self.session_id = NO_SESSION
            self._restart()
            return True
        if plan.full:
            self.session_id = session_id
            self.epoch = 1
        else:
            self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1
        self.partitions = plan.wanted
        return True

    def close(self) -> SessionPlan | None:
        """The plan of the request that closes this session (no partitions, epoch -1), or
        None if none is open. Either way the session is over: a later plan is full."""
        session_id, uses_ids = self.session_id, self.uses_ids
        self.session_id = NO_SESSION
        self._restart()
        if session_id == NO_SESSION:
            return None
        return SessionPlan(session_id, FINAL_EPOCH, [], [], {}, uses_ids)

    def on_failure(self) -> None:
        """The request got no answer (connection lost, timeout): the broker may or may not
        have applied it, so the next request is full (and closes this session)."""
        self._restart()

    def _restart(self) -> None:
        self.epoch = INITIAL_EPOCH
        self.partitions = {}
