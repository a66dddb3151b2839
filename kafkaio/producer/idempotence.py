"""Idempotent producer state: producer id and epoch, per-partition sequence numbers, KIP-360.

Sans-I/O: builds InitProducerId requests and applies their outcomes; the Sender sends them.
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Callable

from kafkaio.backoff import ExponentialBackoff
from kafkaio.errors import (
    InvalidProducerEpochError,
    KafkaError,
    ProducerFencedError,
    UnknownProducerIdError,
    UnsupportedVersionError,
    error_for_code,
)
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.producer.batch import NO_SEQUENCE, ProducerBatch
from kafkaio.protocol.messages import InitProducerIdRequest, InitProducerIdResponse

log = logging.getLogger("kafkaio.producer")

MAX_SEQUENCE = 2**31 - 1
MAX_EPOCH = 2**15 - 1
# What the Java client sends for a non-transactional producer.
_NO_TXN_TIMEOUT_MS = 2**31 - 1


class IdState(enum.Enum):
    DISABLED = "disabled"  # not idempotent: no producer id, no sequence numbers
    NEEDS_ID = "needs-id"  # an InitProducerId request must be sent
    REQUESTING = "requesting"  # one is in flight
    READY = "ready"  # producing with a producer id and epoch
    BUMP_PENDING = "bump-pending"  # a sequence gap: wait for in-flight batches, then bump
    FATAL = "fatal"  # cannot produce (fatal_error says why)


class IdempotenceManager:
    """The producer id, epoch and sequence numbers of an idempotent producer.

    Sequence numbers are given out per partition when a batch is first drained and kept by
    its retries, so the broker can drop duplicates and reject gaps. When a gap is certain
    (a sequenced batch failed for good, OUT_OF_ORDER_SEQUENCE_NUMBER on the next expected
    batch, UNKNOWN_PRODUCER_ID) the epoch is bumped as in KIP-360: once no batch is in
    flight, InitProducerId with the current id and epoch (a new id where the broker cannot
    bump), then every partition's sequence starts again at 0.

    Before the bump, the retries of other partitions' batches (`gap_partitions` says which
    partitions caused it) go out under the old id, epoch and sequence, so that the broker
    drops those it already wrote, as Java's producer keeps a sequenced batch's producer
    state; new batches wait for the new epoch (the Sender decides, see `sends_before_bump`).
    """

    def __init__(
        self,
        *,
        enabled: bool,
        required: bool,
        backoff: ExponentialBackoff,
        transactional: bool = False,
    ) -> None:
        self.state = IdState.NEEDS_ID if enabled or transactional else IdState.DISABLED
        self.required = required or transactional
        # a transactional producer's InitProducerId (and epoch bumps) belong to the
        # TransactionManager, which hands the result over with `set_producer`
        self.transactional = transactional
        self.producer_id = -1
        self.epoch = -1
        self.fatal_error: BaseException | None = None
        # called once the state turns FATAL (the producer drops its fast path then)
        self.on_fatal: Callable[[], None] | None = None
        self._backoff = backoff
        self._attempts = 0
        self._next_attempt_ms = -math.inf
        self._next_seq: dict[TopicPartition, int] = {}
        self._last_acked: dict[TopicPartition, int] = {}
        self._bumping = False
        # partitions whose sequence the bump restarts (their queued batches are renumbered)
        self.gap_partitions: set[TopicPartition] = set()

    @property
    def enabled(self) -> bool:
        return self.state is not IdState.DISABLED

    @property
    def can_send(self) -> bool:
        """Whether batches may be drained now."""
        return self.state is IdState.READY or self.state is IdState.DISABLED

    # -- InitProducerId -----------------------------------------------------------------

    def sends_before_bump(self, batch: ProducerBatch) -> bool:
        """While a bump waits: whether `batch` goes out first, under the old epoch (a retry
        of a partition that did not cause the bump; it may have been written already)."""
        return batch.base_sequence != NO_SEQUENCE and batch.tp not in self.gap_partitions

    def time_to_request(self, now: float, produce_in_flight: bool) -> float | None:
        """ms until an InitProducerId request is due (0: now), or None if none is needed.
        `produce_in_flight`: a produce request is unanswered, or a batch that
        `sends_before_bump` is queued (the bump waits for it)."""
        if self.transactional:
            return None
        if self.state is IdState.BUMP_PENDING and not produce_in_flight:
            self.state = IdState.NEEDS_ID
        if self.state is not IdState.NEEDS_ID:
            return None
        return max(self._next_attempt_ms - now, 0.0)

    def make_request(self) -> InitProducerIdRequest:
        """The InitProducerId request to send now (a bump when an id is held)."""
        self.state = IdState.REQUESTING
        bump = self._bumping and self.producer_id >= 0 and self.epoch < MAX_EPOCH
        return InitProducerIdRequest(
            transactional_id=None,
            transaction_timeout_ms=_NO_TXN_TIMEOUT_MS,
            producer_id=self.producer_id if bump else -1,
            producer_epoch=self.epoch if bump else -1,
        )

    def on_response(self, now: float, response: InitProducerIdResponse) -> None:
        if response.error_code:
            self.on_failure(now, error_for_code(response.error_code)(None))
            return
        old = (self.producer_id, self.epoch)
        self.producer_id, self.epoch = response.producer_id, response.producer_epoch
        self.state = IdState.READY
        self._attempts = 0
        self._next_seq.clear()
        self._last_acked.clear()
        self.gap_partitions.clear()
        if self._bumping:
            log.info(
                "producer epoch bumped: producer id %d epoch %d (was id %d epoch %d); "
                "sequence numbers restart at 0",
                self.producer_id,
                self.epoch,
                *old,
            )
        else:
            log.info("idempotent producer id %d, epoch %d", self.producer_id, self.epoch)
        self._bumping = False

    def set_producer(self, producer_id: int, epoch: int) -> None:
        """Use the producer id and epoch the TransactionManager got; sequences restart at 0."""
        self.producer_id, self.epoch = producer_id, epoch
        self.state = IdState.READY
        self._next_seq.clear()
        self._last_acked.clear()
        self.gap_partitions.clear()
        self._bumping = False

    def on_failure(self, now: float, error: BaseException) -> None:
        if isinstance(error, UnsupportedVersionError):
            if self.required:
                self._fatal(
                    KafkaError(
                        "enable_idempotence=True but the broker does not support "
                        f"InitProducerId ({error}); use a broker that does (Kafka 0.11+), or "
                        "leave enable_idempotence unset"
                    )
                )
            else:
                log.info(
                    "the broker does not support InitProducerId: producing without "
                    "idempotence (set enable_idempotence=True to require it)"
                )
                self.state = IdState.DISABLED
            return
        retriable = isinstance(error, KafkaError) and error.retriable
        if isinstance(
            error, InvalidProducerEpochError | ProducerFencedError | UnknownProducerIdError
        ):
            self.producer_id, self.epoch = -1, -1  # ask for a fresh id
            retriable = True
        if not retriable:
            self._fatal(error)
            return
        self.state = IdState.NEEDS_ID
        self._next_attempt_ms = now + self._backoff.delay_ms(self._attempts)
        self._attempts += 1
        log.info("InitProducerId failed (%s); retrying", error)

    def _fatal(self, error: BaseException) -> None:
        self.state = IdState.FATAL
        self.fatal_error = error
        if self.on_fatal is not None:
            self.on_fatal()
        log.error("the producer cannot produce idempotently: %s", error)

    def request_bump(self, tp: TopicPartition, reason: str) -> None:
        """Bump the epoch (KIP-360) because of `tp`'s sequence, as soon as no produce request
        is in flight and no other partition's retry is queued.

        Not for a transactional producer: its TransactionManager bumps after the abort."""
        if self.state in (IdState.DISABLED, IdState.FATAL) or self.transactional:
            return
        self.gap_partitions.add(tp)
        if self._bumping:
            return
        self._bumping = True
        self.state = IdState.BUMP_PENDING
        log.warning("bumping the producer epoch: %s: %s", tp, reason)

    # -- sequence numbers -----------------------------------------------------------------

    def assign(self, batch: ProducerBatch) -> None:
        """Give a first-time batch the partition's next sequence number."""
        tp = batch.tp
        seq = self._next_seq.get(tp, 0)
        batch.set_producer_state(self.producer_id, self.epoch, seq)
        self._next_seq[tp] = (seq + batch.record_count) % (MAX_SEQUENCE + 1)

    def is_next(self, batch: ProducerBatch) -> bool:
        """Whether ``batch`` is the first one the broker has not acknowledged yet."""
        last = self._last_acked.get(batch.tp, -1)
        return batch.base_sequence == (last + 1) % (MAX_SEQUENCE + 1)

    def has_acked(self, tp: TopicPartition) -> bool:
        """Whether a batch of `tp` was acknowledged under the current producer id and epoch
        (the broker then knows the producer there, and checks its sequence numbers)."""
        return tp in self._last_acked

    def on_acked(self, batch: ProducerBatch) -> None:
        if batch.base_sequence == NO_SEQUENCE or batch.producer_epoch != self.epoch:
            return
        end = (batch.base_sequence + batch.record_count - 1) % (MAX_SEQUENCE + 1)
        self._last_acked[batch.tp] = end

    def next_sequence(self, tp: TopicPartition) -> int:
        return self._next_seq.get(tp, 0)
