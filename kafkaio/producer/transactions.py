"""TransactionManager: the transactional producer's sans-I/O state machine (Java's, in small).

It looks up coordinators, sends InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit and EndTxn one at a time, and classifies their errors; the Sender polls it.
"""

from __future__ import annotations

import enum
import logging
import math
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkaio.backoff import ExponentialBackoff
from kafkaio.errors import (
    BrokerResponseError,
    ClusterAuthorizationFailedError,
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    IllegalGenerationError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    KafkaConfigError,
    KafkaError,
    NotCoordinatorError,
    OperationNotAttemptedError,
    ProducerFencedError,
    RebalanceInProgressError,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
    UnknownMemberIdError,
    UnknownProducerIdError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    error_for_code,
)
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.metadata.coordinators import (
    CoordinatorAddress,
    CoordinatorType,
    lookup_request,
    parse_lookup,
)
from kafkaio.producer.errors import TransactionAbortedError, TransactionStateError
from kafkaio.producer.idempotence import IdempotenceManager
from kafkaio.producer.transaction_state import TxnResult, TxnState, check_transition
from kafkaio.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    FindCoordinatorResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kafkaio.runtime.requests import PollResult, UnsentRequest
from kafkaio.structs import ConsumerGroupMetadata, OffsetAndMetadata

log = logging.getLogger("kafkaio.producer")

GROUP_KEY = CoordinatorType.GROUP
TRANSACTION_KEY = CoordinatorType.TRANSACTION
# AddPartitionsToTxn v4+ is for brokers (verify-only batches); clients send v3 at most.
ADD_PARTITIONS_MAX_VERSION = 3
# EndTxn v5 is KIP-890 part 2 (a new epoch after every transaction), not implemented here.
END_TXN_MAX_VERSION = 4

S = TxnState
CoordinatorKey = tuple[CoordinatorType, str]


class Outcome(enum.Enum):
    """What an error code means for a transactional request (Java's TransactionManager)."""

    RETRY = "retry"  # send the same request again after a backoff
    LOOKUP = "lookup"  # the coordinator moved: find it again, then retry
    ABORTABLE = "abortable"  # the transaction fails; abort_transaction() recovers
    ABORTABLE_BUMP = "abortable-bump"  # the same, and the epoch must be bumped after the abort
    FENCED = "fenced"  # another producer took the transactional id: fatal
    FATAL = "fatal"  # the producer cannot go on


_COMMON: dict[type[BrokerResponseError], Outcome] = {
    NotCoordinatorError: Outcome.LOOKUP,
    CoordinatorNotAvailableError: Outcome.LOOKUP,
    CoordinatorLoadInProgressError: Outcome.RETRY,
    ConcurrentTransactionsError: Outcome.RETRY,
    InvalidProducerEpochError: Outcome.FENCED,
    ProducerFencedError: Outcome.FENCED,
    UnknownProducerIdError: Outcome.ABORTABLE_BUMP,
    InvalidProducerIdMappingError: Outcome.ABORTABLE_BUMP,
    TransactionAbortableError: Outcome.ABORTABLE,
    TransactionalIdAuthorizationFailedError: Outcome.FATAL,
    ClusterAuthorizationFailedError: Outcome.FATAL,
    InvalidTxnStateError: Outcome.FATAL,
    UnsupportedVersionError: Outcome.FATAL,
}
# AddPartitionsToTxn, per partition
_ADD_PARTITIONS = {
    **_COMMON,
    TopicAuthorizationFailedError: Outcome.ABORTABLE,
    UnknownTopicOrPartitionError: Outcome.RETRY,
    OperationNotAttemptedError: Outcome.RETRY,  # another partition of the request failed
}
_ADD_OFFSETS = {**_COMMON, GroupAuthorizationFailedError: Outcome.ABORTABLE}
# TxnOffsetCommit goes to the group coordinator; member errors fail the transaction (KIP-447)
_TXN_OFFSET_COMMIT = {
    **_COMMON,
    RequestTimedOutError: Outcome.LOOKUP,
    UnknownTopicOrPartitionError: Outcome.RETRY,
    GroupAuthorizationFailedError: Outcome.ABORTABLE,
    UnknownMemberIdError: Outcome.ABORTABLE,
    IllegalGenerationError: Outcome.ABORTABLE,
    FencedInstanceIdError: Outcome.ABORTABLE,
    RebalanceInProgressError: Outcome.ABORTABLE,
}
_FIND_COORDINATOR: dict[type[BrokerResponseError], Outcome] = {
    CoordinatorNotAvailableError: Outcome.RETRY,
    CoordinatorLoadInProgressError: Outcome.RETRY,
    NotCoordinatorError: Outcome.RETRY,
    GroupAuthorizationFailedError: Outcome.ABORTABLE,
    TransactionalIdAuthorizationFailedError: Outcome.FATAL,
}
# Errors of a produce request that end the producer rather than the transaction.
_FATAL_PRODUCE_ERRORS = (
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
    ClusterAuthorizationFailedError,
    UnsupportedVersionError,
)


def classify(error: BaseException, table: Mapping[type[BrokerResponseError], Outcome]) -> Outcome:
    """The outcome of a failed transactional request: by error class, then retriable flag.

    Unknown broker errors are fatal, as in the Java client ("unexpected error").
    """
    for cls in type(error).__mro__:
        outcome = table.get(cls)
        if outcome is not None:
            return outcome
    if (
        isinstance(error, KafkaError)
        and error.retriable
        and not isinstance(error, BrokerResponseError)
    ):
        return Outcome.LOOKUP  # the connection broke or timed out: the coordinator may be gone
    return Outcome.FATAL


# Most severe first: when partitions of one response fail differently, the worst decides.
_SEVERITY = (
    Outcome.FATAL,
    Outcome.FENCED,
    Outcome.ABORTABLE_BUMP,
    Outcome.ABORTABLE,
    Outcome.LOOKUP,
    Outcome.RETRY,
)


def worst(
    errors: list[BaseException], table: Mapping[type[BrokerResponseError], Outcome]
) -> tuple[Outcome, BaseException]:
    """The most severe outcome among ``errors`` and the first error with it."""
    classified = [(classify(e, table), e) for e in errors]
    return min(classified, key=lambda oe: _SEVERITY.index(oe[0]))


@dataclass(slots=True)
class _OffsetsJob:
    """One send_offsets_to_transaction call: AddOffsetsToTxn, then TxnOffsetCommit."""

    offsets: dict[TopicPartition, OffsetAndMetadata]
    group: ConsumerGroupMetadata
    result: TxnResult
    added: bool = False  # AddOffsetsToTxn succeeded


@dataclass(slots=True)
class _Transaction:
    """What the current transaction holds."""

    partitions: set[TopicPartition] = field(default_factory=set)  # added (acked)
    new: dict[TopicPartition, None] = field(default_factory=dict)  # to add (ordered set)
    adding: set[TopicPartition] = field(default_factory=set)  # AddPartitionsToTxn in flight
    offsets: deque[_OffsetsJob] = field(default_factory=deque)
    started: bool = False  # the coordinator knows of it (EndTxn needed)


class TransactionManager:
    """State machine and request queue of a transactional producer (sans-I/O).

    Application side (the Producer): `initialize`, `begin`, `maybe_add_partition`,
    `add_offsets`, `begin_commit`, `begin_abort`; each either raises at once (wrong state)
    or returns a TxnResult completed later. Network side (the Sender): `poll(now,
    incomplete=...)` returns at most one request at a time, in the Java client's priority
    (coordinator lookup, InitProducerId, AddPartitionsToTxn, offsets, EndTxn); EndTxn waits
    until no batch of the transaction is incomplete. `on_batch_failed` turns a failed batch
    into an abortable (or fatal) error; `partition_ready` tells the Sender which partitions
    may be drained (those AddPartitionsToTxn acknowledged).

    Error handling follows Java's TransactionManager: coordinator moves and
    CONCURRENT_TRANSACTIONS / COORDINATOR_LOAD_IN_PROGRESS are retried with backoff (after a
    new FindCoordinator where needed); fencing (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH),
    authorization of the transactional id and unexpected errors are fatal; a failed record
    batch, TOPIC/GROUP_AUTHORIZATION_FAILED and stale group members are abortable, and
    UNKNOWN_PRODUCER_ID or a sequence gap also bump the epoch (KIP-360) after the abort.
    """

    def __init__(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        idempotence: IdempotenceManager,
        *,
        backoff: ExponentialBackoff,
        request_timeout_ms: float | None = None,
    ) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.state = TxnState.UNINITIALIZED
        self.last_error: BaseException | None = None  # the abortable or fatal cause
        self._idem = idempotence
        self._backoff = backoff
        self._request_timeout_ms = request_timeout_ms
        self._coordinators: dict[CoordinatorKey, CoordinatorAddress] = {}
        self._txn = _Transaction()
        self._in_flight = False
        self._attempts = 0
        self._retry_at = -math.inf
        self._bump_required = False
        self._init_result: TxnResult | None = None
        self._end_result: TxnResult | None = None  # commit or abort under way
        self._end_commit = False

    # -- state ---------------------------------------------------------------------------

    def _transition(self, target: TxnState, error: BaseException | None = None) -> None:
        """The one way the state changes (checked against the transition table)."""
        check_transition(self.state, target)
        if target in (S.ABORTABLE_ERROR, S.FATAL_ERROR):
            self.last_error = error
        elif target is S.READY:
            self.last_error = None
        if self.state is not target:
            log.debug(
                "transactional id %r: %s -> %s",
                self.transactional_id,
                self.state.value,
                target.value,
            )
        self.state = target

    @property
    def fatal_error(self) -> BaseException | None:
        return self.last_error if self.state is S.FATAL_ERROR else None

    @property
    def drops_unsent_batches(self) -> bool:
        """Whether the Sender must fail queued batches (the transaction is being aborted)."""
        return self.state in (S.ABORTING_TRANSACTION, S.ABORTABLE_ERROR)

    @property
    def bump_required(self) -> bool:
        return self._bump_required

    def partition_ready(self, tp: TopicPartition) -> bool:
        """Whether batches for ``tp`` may be sent (it was added to the transaction)."""
        return tp in self._txn.partitions and self.state in (
            S.IN_TRANSACTION,
            S.COMMITTING_TRANSACTION,
        )

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        """Partitions added to the current transaction."""
        return frozenset(self._txn.partitions)

    def addresses(self) -> dict[int, tuple[str, int]]:
        """Known coordinators as ``{node_id: (host, port)}`` (for the connection manager)."""
        return {c.node_id: (c.host, c.port) for c in self._coordinators.values()}

    # -- application side -----------------------------------------------------------------

    def initialize(self) -> TxnResult:
        """Start InitProducerId (or return the one under way / done)."""
        if self.state is S.UNINITIALIZED:
            self._transition(S.INITIALIZING)
            self._init_result = TxnResult("init_transactions")
            self._bump_required = False
            return self._init_result
        if self._init_result is not None and self.state in (S.INITIALIZING, S.READY):
            return self._init_result
        self._raise_for_state("init_transactions()")
        raise AssertionError("unreachable")

    def begin(self) -> None:
        if self.state is not S.READY:
            self._raise_for_state("begin_transaction()")
        self._transition(S.IN_TRANSACTION)
        self._txn = _Transaction()

    def check_can_send(self) -> None:
        """Raise unless records may be sent now (a transaction is open)."""
        if self.state is not S.IN_TRANSACTION:
            self._raise_for_state("send()")

    def maybe_add_partition(self, tp: TopicPartition) -> bool:
        """Register ``tp`` for the transaction; True if AddPartitionsToTxn must be sent."""
        self.check_can_send()
        txn = self._txn
        if tp in txn.partitions or tp in txn.new or tp in txn.adding:
            return False
        txn.new[tp] = None
        return True

    def add_offsets(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        group: ConsumerGroupMetadata,
    ) -> TxnResult:
        if self.state is not S.IN_TRANSACTION:
            self._raise_for_state("send_offsets_to_transaction()")
        wanted = to_offsets(offsets)
        result = TxnResult("send_offsets_to_transaction")
        if not wanted:
            result.succeed()
            return result
        self._txn.offsets.append(_OffsetsJob(wanted, group, result))
        return result

    def begin_commit(self) -> TxnResult:
        if self.state is S.COMMITTING_TRANSACTION and self._end_result is not None:
            return self._end_result  # a retry after the caller timed out
        if self.state is not S.IN_TRANSACTION:
            self._raise_for_state("commit_transaction()")
        self._transition(S.COMMITTING_TRANSACTION)
        self._end_commit = True
        self._end_result = TxnResult("commit_transaction")
        return self._end_result

    def begin_abort(self) -> TxnResult:
        if (
            self._end_result is not None
            and not self._end_commit
            and (
                self.state is S.ABORTING_TRANSACTION
                or (self.state is S.INITIALIZING and self._bump_required)
            )
        ):
            if not self._end_result.done:
                return self._end_result  # a retry after the caller timed out
            self._end_result = TxnResult("abort_transaction")  # the last attempt failed
            return self._end_result
        if self.state not in (S.IN_TRANSACTION, S.ABORTABLE_ERROR):
            self._raise_for_state("abort_transaction()")
        cause = self.last_error
        self._transition(S.ABORTING_TRANSACTION)
        self._end_commit = False
        self._end_result = TxnResult("abort_transaction")
        txn = self._txn
        txn.new.clear()
        aborted = TransactionAbortedError(
            "send_offsets_to_transaction did not complete: the transaction was aborted"
            + (f" after {cause}" if cause is not None else "")
        )
        while txn.offsets:
            txn.offsets.popleft().result.fail(aborted)
        return self._end_result

    def _raise_for_state(self, what: str) -> None:
        state = self.state
        if state is S.FATAL_ERROR:
            assert self.last_error is not None
            raise self.last_error
        if state is S.ABORTABLE_ERROR:
            raise TransactionStateError(
                f"{what} is not allowed: the transaction failed ({self.last_error}); call "
                "abort_transaction(), then begin a new transaction"
            ) from self.last_error
        hint = {
            S.UNINITIALIZED: "call init_transactions() (or start()) first",
            S.INITIALIZING: "wait for init_transactions() to complete",
            S.READY: "call begin_transaction() first",
            S.IN_TRANSACTION: "a transaction is already open: commit or abort it first",
            S.COMMITTING_TRANSACTION: "the transaction is being committed",
            S.ABORTING_TRANSACTION: "the transaction is being aborted",
        }[state]
        raise TransactionStateError(
            f"{what} is not allowed in transaction state {state.value}: {hint}"
        )

    # -- errors from the Sender -----------------------------------------------------------

    def on_batch_failed(self, error: BaseException, had_sequence: bool) -> None:
        """A batch of the transaction failed for good: the transaction must be aborted."""
        if isinstance(error, TransactionAbortedError):
            if had_sequence:
                self._bump_required = True
            return
        if isinstance(error, _FATAL_PRODUCE_ERRORS):
            self._fatal(error)
            return
        if had_sequence:
            # the broker may or may not have written it: only a new epoch resets sequences
            self._bump_required = True
        self._abortable(error)

    def note_sequence_gap(self) -> None:
        """A batch with a sequence number was dropped: bump the epoch after the abort."""
        self._bump_required = True

    def fail_all(self, error: BaseException) -> None:
        """The producer is closing or its network task died: fail every pending call."""
        for result in self._pending_results():
            result.fail(error)

    def _pending_results(self) -> list[TxnResult]:
        out = [job.result for job in self._txn.offsets]
        for r in (self._init_result, self._end_result):
            if r is not None and not r.done:
                out.append(r)
        return out

    def _fatal(self, error: BaseException) -> None:
        if self.state is S.FATAL_ERROR:
            return
        if isinstance(error, InvalidProducerEpochError):
            error = ProducerFencedError(
                f"{error} Another producer with transactional id "
                f"{self.transactional_id!r} took over (or this one's epoch is stale)"
            )
        log.error(
            "transactional id %r: fatal error, the producer cannot go on: %s",
            self.transactional_id,
            error,
        )
        self._transition(S.FATAL_ERROR, error)
        self.fail_all(error)
        self._txn.offsets.clear()

    def _abortable(self, error: BaseException, *, bump: bool = False) -> None:
        if bump:
            self._bump_required = True
        state = self.state
        if state is S.FATAL_ERROR:
            return
        if state is S.ABORTING_TRANSACTION:
            return  # already being aborted; the abort decides what happens next
        if state is S.READY or state is S.UNINITIALIZED:
            log.warning(
                "transactional id %r: error outside a transaction: %s", self.transactional_id, error
            )
            return
        if state is not S.ABORTABLE_ERROR:
            log.warning(
                "transactional id %r: the transaction must be aborted: %s",
                self.transactional_id,
                error,
            )
        self._transition(S.ABORTABLE_ERROR, error)
        for job in self._txn.offsets:
            job.result.fail(error)
        self._txn.offsets.clear()
        self._txn.new.clear()
        if self._end_result is not None and self._end_commit:
            self._end_result.fail(error)
        if self._init_result is not None and not self._init_result.done:
            self._init_result.fail(error)

    # -- network side --------------------------------------------------------------------

    def poll(self, now: float, *, incomplete: bool) -> PollResult:
        """The next transactional request, if one is due. ``incomplete``: some batch of the
        producer is not acknowledged or failed yet (EndTxn waits for them)."""
        if self._in_flight or self.state in (S.FATAL_ERROR, S.UNINITIALIZED):
            return PollResult()
        if now < self._retry_at:
            return PollResult(next_poll_ms=self._retry_at - now)
        request = self._next_request(incomplete)
        if request is None:
            return PollResult()
        self._in_flight = True
        return PollResult([request])

    def _next_request(self, incomplete: bool) -> UnsentRequest[Any] | None:
        state, txn = self.state, self._txn
        tid_key = (TRANSACTION_KEY, self.transactional_id)
        if state is S.INITIALIZING:
            return self._to(tid_key, self._init_request, self._on_init)
        if state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION):
            if txn.new:
                return self._to(tid_key, self._add_partitions_request, self._on_add_partitions)
            if txn.offsets:
                job = txn.offsets[0]
                if not job.added:
                    return self._to(
                        tid_key,
                        lambda: self._add_offsets_request(job),
                        lambda n, r, e: self._on_add_offsets(job, n, r, e),
                    )
                return self._to(
                    (GROUP_KEY, job.group.group_id),
                    lambda: self._txn_offset_commit_request(job),
                    lambda n, r, e: self._on_txn_offset_commit(job, n, r, e),
                )
        if state is S.COMMITTING_TRANSACTION or state is S.ABORTING_TRANSACTION:
            if incomplete or txn.adding:
                return None  # EndTxn only after every batch of the transaction completed
            if not txn.started:
                self._complete_transaction()
                return None
            return self._to(tid_key, self._end_txn_request, self._on_end_txn)
        return None

    def _to(
        self,
        key: CoordinatorKey,
        build: Callable[[], Any],
        handler: Callable[[float, Any, BaseException | None], None],
    ) -> UnsentRequest[Any]:
        """``build()`` sent to the coordinator for ``key``, or a lookup if it is unknown."""
        coordinator = self._coordinators.get(key)
        if coordinator is None:
            request = lookup_request(key[0], [key[1]])
            return UnsentRequest(
                None,
                request,
                lambda now, response, error: self._on_find_coordinator(key, now, response, error),
                timeout_ms=self._request_timeout_ms,
            )
        request = build()
        max_version = None
        if isinstance(request, AddPartitionsToTxnRequest):
            max_version = ADD_PARTITIONS_MAX_VERSION
        elif isinstance(request, EndTxnRequest):
            max_version = END_TXN_MAX_VERSION

        def on_done(now: float, response: Any | None, error: BaseException | None) -> None:
            self._in_flight = False
            if error is not None:
                self._on_request_error(key, now, error, handler)
            else:
                handler(now, response, None)

        return UnsentRequest(
            coordinator.node_id,
            request,
            on_done,
            timeout_ms=self._request_timeout_ms,
            max_version=max_version,
        )

    def _on_request_error(
        self,
        key: CoordinatorKey,
        now: float,
        error: BaseException,
        handler: Callable[[float, Any, BaseException | None], None],
    ) -> None:
        """The request got no response (connection lost, timeout, version not spoken)."""
        if isinstance(error, KafkaError) and error.retriable:
            self._forget_coordinator(key, str(error))
            self._retry_later(now)
            self._undo_adding()
            return
        handler(now, None, error)

    def _retry_later(self, now: float) -> None:
        self._retry_at = now + self._backoff.delay_ms(self._attempts)
        self._attempts += 1

    def _succeeded(self) -> None:
        self._attempts = 0
        self._retry_at = -math.inf

    def _forget_coordinator(self, key: CoordinatorKey, why: str) -> None:
        if self._coordinators.pop(key, None) is not None:
            log.info(
                "%s coordinator for %r unknown (%s); looking it up again", key[0].noun, key[1], why
            )

    def _handle(
        self, outcome: Outcome, error: BaseException, now: float, key: CoordinatorKey
    ) -> None:
        """Apply a classified error of a transactional request."""
        if outcome is Outcome.RETRY:
            log.debug("transactional request failed (%s); retrying", error)
            self._retry_later(now)
        elif outcome is Outcome.LOOKUP:
            self._forget_coordinator(key, str(error))
            self._retry_later(now)
        elif outcome in (Outcome.ABORTABLE, Outcome.ABORTABLE_BUMP):
            self._abortable(error, bump=outcome is Outcome.ABORTABLE_BUMP)
        else:
            self._fatal(error)

    # -- FindCoordinator -------------------------------------------------------------------

    def _on_find_coordinator(
        self, key: CoordinatorKey, now: float, response: FindCoordinatorResponse | None, error: BaseException | None
    ) -> None:
        self._in_flight = False
        if error is None:
            assert isinstance(response, FindCoordinatorResponse)
            error = self._apply_coordinator(key, response)
        if error is None:
            self._succeeded()
            return
        outcome = classify(error, _FIND_COORDINATOR)
        if isinstance(error, KafkaError) and error.retriable:
            outcome = Outcome.RETRY
        if outcome is Outcome.ABORTABLE and key[0] == GROUP_KEY:
            self._abortable(error)
            return
        if outcome is Outcome.ABORTABLE:
            outcome = Outcome.FATAL
        self._handle(outcome, error, now, key)

    def _apply_coordinator(
        self, key: CoordinatorKey, response: FindCoordinatorResponse
    ) -> BaseException | None:
        found = parse_lookup(response, key[0], [key[1]])[key[1]]
        if not isinstance(found, CoordinatorAddress):
            return found
        self._coordinators[key] = found
        log.info(
            "%s coordinator for %r is node %d (%s:%d)",
            key[0].noun,
            key[1],
            found.node_id,
            found.host,
            found.port,
        )
        return None

    # -- InitProducerId --------------------------------------------------------------------

    def _init_request(self) -> InitProducerIdRequest:
        bump = self._bump_required and self._idem.producer_id >= 0
        return InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.transaction_timeout_ms,
            producer_id=self._idem.producer_id if bump else -1,
            producer_epoch=self._idem.epoch if bump else -1,
        )

    def _on_init(self, now: float, response: InitProducerIdResponse | None, error: BaseException | None) -> None:
        key = (TRANSACTION_KEY, self.transactional_id)
        if error is None:
            assert isinstance(response, InitProducerIdResponse)
            if response.error_code:
                error = error_for_code(response.error_code)(
                    None, transactional_id=self.transactional_id
                )
        if error is not None:
            self._handle(classify(error, _COMMON), error, now, key)
            return
        assert response is not None  # no error: the response
        self._succeeded()
        bumped = self._bump_required
        self._idem.set_producer(response.producer_id, response.producer_epoch)
        self._bump_required = False
        self._transition(S.READY)
        log.info(
            "transactional id %r: producer id %d, epoch %d%s",
            self.transactional_id,
            response.producer_id,
            response.producer_epoch,
            " (epoch bumped after the abort)" if bumped else "",
        )
        for result in (self._init_result, self._end_result):
            if result is not None and not result.done:
                result.succeed()

    # -- AddPartitionsToTxn ----------------------------------------------------------------

    def _add_partitions_request(self) -> AddPartitionsToTxnRequest:
        txn = self._txn
        txn.adding = set(txn.new)
        txn.new.clear()
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(txn.adding):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topics = [
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=name, partitions=parts)
            for name, parts in by_topic.items()
        ]
        idem = self._idem
        return AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=idem.producer_id,
            v3_and_below_producer_epoch=idem.epoch,
            v3_and_below_topics=topics,
        )

    def _undo_adding(self) -> None:
        """Partitions whose AddPartitionsToTxn failed go back to be added again."""
        txn = self._txn
        for tp in sorted(txn.adding):
            txn.new[tp] = None
        txn.adding.clear()

    def _on_add_partitions(self, now: float, response: AddPartitionsToTxnResponse | None, error: BaseException | None) -> None:
        key = (TRANSACTION_KEY, self.transactional_id)
        txn = self._txn
        if error is not None:
            self._undo_adding()
            self._handle(classify(error, _ADD_PARTITIONS), error, now, key)
            return
        assert isinstance(response, AddPartitionsToTxnResponse)
        errors: list[tuple[TopicPartition, BaseException]] = []
        results = response.results_by_topic_v3_and_below or [
            t for r in response.results_by_transaction for t in r.topic_results
        ]
        answered: set[TopicPartition] = set()
        for topic in results:
            for p in topic.results_by_partition:
                tp = TopicPartition(topic.name, p.partition_index)
                if tp not in txn.adding:
                    continue
                answered.add(tp)
                if p.partition_error_code:
                    errors.append(
                        (
                            tp,
                            error_for_code(p.partition_error_code)(
                                None, topic=tp.topic, partition=tp.partition
                            ),
                        )
                    )
                else:
                    txn.partitions.add(tp)
                    txn.started = True
        if response.error_code and not errors:  # v4+ top-level error
            errors.extend(
                (tp, error_for_code(response.error_code)(None)) for tp in txn.adding - answered
            )
        elif txn.adding - answered and not errors:
            errors.extend(
                (tp, KafkaError(f"AddPartitionsToTxn response did not mention {tp}"))
                for tp in txn.adding - answered
            )
        if not errors:
            txn.adding.clear()
            self._succeeded()
            return
        self._undo_adding()
        for tp in txn.partitions:
            txn.new.pop(tp, None)
        outcome, first = worst([e for _, e in errors], _ADD_PARTITIONS)
        if outcome is Outcome.ABORTABLE and isinstance(first, TopicAuthorizationFailedError):
            topics = sorted({tp.topic for tp, e in errors if isinstance(e, type(first))})
            first = TopicAuthorizationFailedError(
                f"not authorized to write to topics {topics}", topics=topics
            )
        self._handle(outcome, first, now, key)

    # -- AddOffsetsToTxn and TxnOffsetCommit -----------------------------------------------

    def _add_offsets_request(self, job: _OffsetsJob) -> AddOffsetsToTxnRequest:
        return AddOffsetsToTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=self._idem.producer_id,
            producer_epoch=self._idem.epoch,
            group_id=job.group.group_id,
        )

    def _on_add_offsets(
        self, job: _OffsetsJob, now: float, response: AddOffsetsToTxnResponse, error: BaseException | None
    ) -> None:
        key = (TRANSACTION_KEY, self.transactional_id)
        if error is None:
            assert isinstance(response, AddOffsetsToTxnResponse)
            if response.error_code:
                error = error_for_code(response.error_code)(None, group_id=job.group.group_id)
        if error is not None:
            self._handle(classify(error, _ADD_OFFSETS), error, now, key)
            return
        self._succeeded()
        job.added = True
        self._txn.started = True

    def _txn_offset_commit_request(self, job: _OffsetsJob) -> TxnOffsetCommitRequest:
        by_topic: dict[str, list[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition]] = {}
        for tp, om in sorted(job.offsets.items()):
            by_topic.setdefault(tp.topic, []).append(
                TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=om.offset,
                    committed_leader_epoch=-1 if om.leader_epoch is None else om.leader_epoch,
                    committed_metadata=om.metadata,
                )
            )
        group = job.group
        return TxnOffsetCommitRequest(
            transactional_id=self.transactional_id,
            group_id=group.group_id,
            producer_id=self._idem.producer_id,
            producer_epoch=self._idem.epoch,
            generation_id=group.generation_id,
            member_id=group.member_id,
            group_instance_id=group.group_instance_id,
            topics=[
                TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=name, partitions=parts)
                for name, parts in by_topic.items()
            ],
        )

    def _on_txn_offset_commit(
        self, job: _OffsetsJob, now: float, response: TxnOffsetCommitResponse, error: BaseException | None
    ) -> None:
        key = (GROUP_KEY, job.group.group_id)
        if error is not None:
            self._handle(classify(error, _TXN_OFFSET_COMMIT), error, now, key)
            return
        assert isinstance(response, TxnOffsetCommitResponse)
        errors: list[BaseException] = []
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if p.error_code == 0:
                    job.offsets.pop(tp, None)
                else:
                    errors.append(
                        error_for_code(p.error_code)(
                            None,
                            group_id=job.group.group_id,
                            topic=tp.topic,
                            partition=tp.partition,
                        )
                    )
        if not errors and job.offsets:
            errors.append(
                KafkaError(f"TxnOffsetCommit response did not mention {sorted(job.offsets)}")
            )
        if errors:
            outcome, first = worst(errors, _TXN_OFFSET_COMMIT)
            self._handle(outcome, first, now, key)
            return
        self._succeeded()
        if self._txn.offsets and self._txn.offsets[0] is job:
            self._txn.offsets.popleft()
        job.result.succeed()

    # -- EndTxn ----------------------------------------------------------------------------

    def _end_txn_request(self) -> EndTxnRequest:
        return EndTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=self._idem.producer_id,
            producer_epoch=self._idem.epoch,
            committed=self.state is S.COMMITTING_TRANSACTION,
        )

    def _on_end_txn(self, now: float, response: EndTxnResponse | None, error: BaseException | None) -> None:
        key = (TRANSACTION_KEY, self.transactional_id)
        if error is None:
            assert isinstance(response, EndTxnResponse)
            if response.error_code:
                error = error_for_code(response.error_code)(
                    None, transactional_id=self.transactional_id
                )
        if error is None:
            self._succeeded()
            self._complete_transaction()
            return
        outcome = classify(error, _COMMON)
        if self.state is S.ABORTING_TRANSACTION and outcome is Outcome.ABORTABLE_BUMP:
            # the coordinator does not know this producer: there is nothing left to abort
            self._bump_required = True
            self._succeeded()
            self._complete_transaction()
            return
        if self.state is S.ABORTING_TRANSACTION and outcome is Outcome.ABORTABLE:
            assert self._end_result is not None
            self._end_result.fail(error)  # stays ABORTING: abort_transaction() tries again
            return
        self._handle(outcome, error, now, key)

    def _complete_transaction(self) -> None:
        committed = self.state is S.COMMITTING_TRANSACTION
        log.debug(
            "transactional id %r: transaction %s",
            self.transactional_id,
            "committed" if committed else "aborted",
        )
        self._txn = _Transaction()
        if not committed and (self._bump_required or self._idem.producer_id < 0):
            self._transition(S.INITIALIZING)  # the abort result completes after the bump
            return
        self._transition(S.READY)
        if self._end_result is not None:
            self._end_result.succeed()


def to_offsets(
    offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
) -> dict[TopicPartition, OffsetAndMetadata]:
    """Offsets as OffsetAndMetadata (plain ints are offsets with empty metadata)."""
    out: dict[TopicPartition, OffsetAndMetadata] = {}
    for tp, value in offsets.items():
        if isinstance(value, OffsetAndMetadata):
            out[TopicPartition(*tp)] = value
        elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            out[TopicPartition(*tp)] = OffsetAndMetadata(value)
        else:
            raise KafkaConfigError(
                f"the offset for {tp} is {value!r}: pass an OffsetAndMetadata or an int >= 0 "
                "(the next offset to consume)"
            )
    return out


def group_metadata_of(group: Any) -> ConsumerGroupMetadata:
    """Accept a ConsumerGroupMetadata-like object (group_id, generation_id, member_id,
    group_instance_id) or a plain group id (a consumer outside group management)."""
    if isinstance(group, ConsumerGroupMetadata):
        return group
    if isinstance(group, str):
        return ConsumerGroupMetadata(group)
    try:
        return ConsumerGroupMetadata(
            str(group.group_id),
            int(getattr(group, "generation_id", -1)),
            str(getattr(group, "member_id", "")),
            getattr(group, "group_instance_id", None),
        )
    except AttributeError as exc:
        raise TransactionStateError(
            f"group_metadata must be consumer.group_metadata() (or a group id), got {group!r}"
        ) from exc


__all__ = ["Outcome", "TransactionManager", "classify", "group_metadata_of", "to_offsets"]
