"""The Sender: the producer's sans-I/O request manager, run by the NetworkDriver.

Each poll expires old batches, drains ready ones into one ProduceRequest per leader broker,
and handles the responses (retries with backoff, metadata refreshes, idempotence).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kafkaio.backoff import ExponentialBackoff
from kafkaio.errors import (
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    KafkaError,
    KafkaTimeoutError,
    MessageTooLargeError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    UnknownProducerIdError,
    error_for_code,
)
from kafkaio.metadata.cluster import BrokerNode, TopicPartition
from kafkaio.metadata.manager import MetadataManager
from kafkaio.metrics.producer import ProducerRecorder
from kafkaio.producer.accumulator import RecordAccumulator
from kafkaio.producer.batch import NO_SEQUENCE, ProducerBatch
from kafkaio.producer.config import ProducerConfig
from kafkaio.producer.errors import TransactionAbortedError
from kafkaio.producer.idempotence import IdempotenceManager, IdState
from kafkaio.producer.transactions import TransactionManager
from kafkaio.protocol.messages import InitProducerIdResponse, ProduceRequest, ProduceResponse
from kafkaio.runtime.requests import PollResult, UnsentRequest

log = logging.getLogger("kafkaio.producer")

# NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH: the answers that name the new leader (KIP-951)
_LEADER_MOVED_CODES = frozenset((6, 74))


class Sender:
    """Turns accumulated batches into ProduceRequests and their responses into outcomes.

    At most ``max_in_flight`` requests per broker, each with at most one batch per
    partition. As in the Java client, ``max_in_flight`` > 1 lets a partition have several
    batches in flight, but here only full ones are sent ahead of an unanswered batch (a
    batch that is not full waits for the answer and fills up meanwhile, so small records
    still travel in large batches). Retries go one at a time: a batch to retry waits until
    nothing of its partition is in flight, and newer batches wait behind it. With
    idempotence the broker rejects a batch sent after one that failed (a sequence gap), so
    order holds through retries; without it, a retry can land after a newer batch (the
    Java client's documented rule), except where idempotence was wanted and the broker
    cannot do it: then one batch per partition. ``max_in_flight`` 1 keeps order on any
    broker, also one that does not check sequences (librdkafka's mock cluster).
    Retriable errors put a batch back at the front of its partition after an exponential
    backoff, until its delivery deadline; errors that mean stale metadata also ask the
    MetadataManager for a refresh. Idempotence adds sequence numbers, so a retry of a
    request whose answer was lost is not written twice.

    With a TransactionManager (a transactional producer) the Sender polls it first: its
    coordinator requests go out one at a time, batches are drained only for partitions
    already added to the transaction, unsent batches are dropped while a transaction is
    being aborted, and a batch that fails for good fails the transaction (abortable).

    A ``recorder`` (metrics) is told about each request sent and each batch completed:
    per batch and per request, never per record.
    """

    # Its handlers (produce, InitProducerId, the transaction's requests) change only the
    # Sender's own state (and ask the metadata manager for updates): after a response the
    # driver need not poll the other managers (RequestManager).
    self_contained = True

    def __init__(
        self,
        config: ProducerConfig,
        accumulator: RecordAccumulator,
        metadata: MetadataManager,
        idempotence: IdempotenceManager,
        *,
        backoff: ExponentialBackoff | None = None,
        on_batch_done: Callable[[ProducerBatch], None] | None = None,
        transactions: TransactionManager | None = None,
        recorder: ProducerRecorder | None = None,
    ) -> None:
        self._config = config
        self._recorder = recorder
        self.transactions = transactions
        self._acc = accumulator
        self._metadata = metadata
        self.idempotence = idempotence
        self._backoff = backoff or ExponentialBackoff(
            config.retry_backoff_ms, config.retry_backoff_max_ms
        )
        self._on_batch_done = on_batch_done
        self._node_in_flight: dict[int, int] = {}
        self._tp_in_flight: dict[TopicPartition, list[ProducerBatch]] = {}
        self._requests_in_flight = 0
        self._unknown_leader_logged = False
        self._last_poll_ms = 0.0
        # partitions whose new leader the response being handled named (KIP-951)
        self._moved: set[TopicPartition] = set()

    # -- state ---------------------------------------------------------------------------

    @property
    def requests_in_flight(self) -> int:
        return self._requests_in_flight

    def has_in_flight(self, tp: TopicPartition) -> bool:
        """True while a batch of `tp` is in flight (its response will poll the sender)."""
        return tp in self._tp_in_flight

    def may_send_full(self, tp: TopicPartition) -> bool:
        """Whether a full batch of `tp` may be sent now, as far as the batches of `tp` in
        flight go (a producer wakes the network task for it only then)."""
        in_flight = self._tp_in_flight.get(tp)
        if in_flight is None:
            return True
        if len(in_flight) >= self._partition_limit():
            return False
        # An idempotent producer's first batch of a partition (in a producer id and epoch)
        # goes alone: a broker that does not know the producer there yet takes any sequence
        # number as its first, so a batch sent ahead of a first batch that fails (e.g. a new
        # topic's NOT_LEADER_OR_FOLLOWER) would be written before it, and the first could
        # never be (OUT_OF_ORDER_SEQUENCE_NUMBER until its delivery timeout).
        idem = self.idempotence
        return not idem.enabled or idem.has_acked(tp)

    def _partition_limit(self) -> int:
        """The most batches of one partition in flight: ``max_in_flight``, but 1 when
        idempotence was wanted and the broker cannot do it (an old broker): the order the
        application counted on then holds without sequence numbers."""
        if self.idempotence.enabled or not self._config.idempotence_wanted:
            return self._config.max_in_flight
        return 1

    # -- polling -------------------------------------------------------------------------

    def poll(self, now: float) -> PollResult:
        self._last_poll_ms = now
        requests: list[UnsentRequest[Any]] = []
        idem = self.idempotence
        if idem.state is IdState.FATAL:
            assert idem.fatal_error is not None
            self.abort(idem.fatal_error, now)
            return PollResult()
        txn = self.transactions
        if txn is not None and txn.fatal_error is not None:
            self.abort(txn.fatal_error, now)
            return PollResult()
        for batch in self._acc.expire(now):
            self._fail(batch, self._expired_error(batch, now, batch.last_error), now)
        next_ms = self._acc.next_deadline_ms() - now
        if txn is not None:
            if txn.drops_unsent_batches:
                self._drop_unsent(txn, now)
            result = txn.poll(now, incomplete=self._acc.has_incomplete)
            requests.extend(result.requests)
            next_ms = min(next_ms, result.next_poll_ms)
        wait = idem.time_to_request(
            now, self._requests_in_flight > 0 or self._retries_before_bump()
        )
        if wait is not None:
            if wait <= 0:
                requests.append(UnsentRequest(None, idem.make_request(), self._on_init))
            else:
                next_ms = min(next_ms, wait)
        cluster = self._metadata.cluster
        ready, ready_wait, unknown = self._acc.ready(now, cluster.leader_for)
        next_ms = min(next_ms, ready_wait)
        if unknown:
            self._metadata.request_update(reset_backoff=False)
            if not self._unknown_leader_logged:
                self._unknown_leader_logged = True
                log.info("waiting for metadata: a partition with records has no known leader")
        elif self._unknown_leader_logged:
            self._unknown_leader_logged = False
        if idem.can_send or idem.state is IdState.BUMP_PENDING:
            may_send = self._may_send if idem.can_send else self._may_send_before_bump
            limit = self._config.max_in_flight
            for node, partitions in ready.items():
                if self._node_in_flight.get(node, 0) >= limit:
                    continue  # a response wakes the driver
                batches = self._acc.drain(
                    node, partitions, self._config.max_request_size, now, may_send
                )
                if batches:
                    requests.append(self._produce_request(node, batches, now))
        return PollResult(requests, max(next_ms, 0.0))

    def _drop_unsent(self, txn: TransactionManager, now: float) -> None:
        """Fail the batches not sent yet: their transaction is being aborted."""
        cause = txn.last_error
        error = TransactionAbortedError(
            "the record was not sent: its transaction was aborted"
            + (f" after an error ({cause})" if cause is not None else "")
        )
        for batch in self._acc.abort_queued():
            if batch.base_sequence != NO_SEQUENCE:
                txn.note_sequence_gap()  # a retry that may have been written
            if batch.fail(error):
                self._done(batch, now)

    def _may_send(self, batch: ProducerBatch) -> bool:
        if batch.tp in self._tp_in_flight and not (
            (batch.full or batch.closed) and not batch.attempts and self.may_send_full(batch.tp)
        ):
            return False  # see the class docstring: only full, new batches are sent ahead
        txn = self.transactions
        if txn is not None and not txn.partition_ready(batch.tp):
            return False  # AddPartitionsToTxn first
        idem = self.idempotence
        if idem.enabled and batch.base_sequence == NO_SEQUENCE:
            idem.assign(batch)
        return True

    def _may_send_before_bump(self, batch: ProducerBatch) -> bool:
        return self.idempotence.sends_before_bump(batch) and self._may_send(batch)

    def _retries_before_bump(self) -> bool:
        """A bump waits for: a queued retry under the old epoch (see IdempotenceManager)."""
        idem = self.idempotence
        if idem.state is not IdState.BUMP_PENDING:
            return False
        return any(idem.sends_before_bump(batch) for batch in self._acc.queued_batches())

    def _produce_request(
        self, node: int, batches: list[ProducerBatch], now: float
    ) -> UnsentRequest[Any]:
        topics: dict[str, list[ProduceRequest.PartitionProduceData]] = {}
        acc = self._acc
        for batch in batches:
            batch.in_flight = True
            self._tp_in_flight.setdefault(batch.tp, []).append(batch)
            acc.observe(batch)  # if not yet (e.g. its linger ended before it filled up)
            records = batch.payload()
            topics.setdefault(batch.tp.topic, []).append(
                ProduceRequest.PartitionProduceData(index=batch.tp.partition, records=records)
            )
        if self._recorder is not None:
            self._recorder.request_sent(
                ((b, len(b.payload()), b.size_in_bytes()) for b in batches), now
            )
        self._node_in_flight[node] = self._node_in_flight.get(node, 0) + 1
        self._requests_in_flight += 1
        timeout = self._config.request_timeout_ms
        txn = self.transactions
        request = ProduceRequest(
            transactional_id=None if txn is None else txn.transactional_id,
            acks=self._config.acks,
            timeout_ms=int(timeout),
            topic_data=[
                ProduceRequest.TopicProduceData(name=name, partition_data=parts)
                for name, parts in topics.items()
            ],
        )

        def handler(now: float, response: ProduceResponse | None, error: BaseException | None) -> None:
            self._on_produce(node, batches, now, response, error)

        return UnsentRequest(
            node,
            request,
            handler,
            timeout_ms=timeout,
            expect_response=self._config.acks != 0,
            handle_on_read=True,  # acks complete the application's futures: no queueing
        )

    # -- outcomes ------------------------------------------------------------------------

    def _on_init(self, now: float, response: InitProducerIdResponse | None, error: BaseException | None) -> None:
        if error is not None:
            self.idempotence.on_failure(now, error)
        else:
            assert isinstance(response, InitProducerIdResponse)
            self.idempotence.on_response(now, response)
        if self.idempotence.state is IdState.READY:
            self._resequence_queued()

    def _resequence_queued(self) -> None:
        """After a new producer id or epoch, queued batches get new sequence numbers (only
        those of the partitions that caused a bump are left: the others went out before)."""
        for batch in self._acc.queued_batches():
            if batch.base_sequence != NO_SEQUENCE:
                batch.set_producer_state(-1, -1, NO_SEQUENCE)

    def _on_produce(
        self,
        node: int,
        batches: list[ProducerBatch],
        now: float,
        response: ProduceResponse | None,
        error: BaseException | None,
    ) -> None:
        self._node_in_flight[node] -= 1
        self._requests_in_flight -= 1
        for batch in batches:
            queue = self._tp_in_flight.get(batch.tp)
            if queue is not None:
                queue.remove(batch)
                if not queue:
                    del self._tp_in_flight[batch.tp]
            batch.in_flight = False
        if error is not None:
            if isinstance(error, KafkaError) and error.retriable:
                # the leader may have moved or died
                self._metadata.request_update(reset_backoff=False)
            for batch in batches:
                self._on_error(batch, error, now)
            return
        if response is None:  # acks=0: written is all we will know
            for batch in batches:
                self._complete(batch, -1, -1, now)
            return
        assert isinstance(response, ProduceResponse)
        results = {(t.name, p.index): p for t in response.responses for p in t.partition_responses}
        moved = self._moved = self._take_new_leaders(response, results, now)
        for batch in batches:
            p = results.get(batch.tp)
            if p is None:
                self._on_error(
                    batch,
                    KafkaError(
                        f"the ProduceResponse from broker {node} does not mention {batch.tp}; "
                        "the broker is misbehaving"
                    ),
                    now,
                )
            elif p.error_code == 0:
                self._complete(batch, p.base_offset, p.log_append_time_ms, now)
            else:
                cls = error_for_code(p.error_code)
                if cls is DuplicateSequenceNumberError:  # already written: a success
                    self._complete(batch, p.base_offset, p.log_append_time_ms, now)
                    continue
                self._on_error(
                    batch,
                    cls(p.error_message, topic=batch.tp.topic, partition=batch.tp.partition),
                    now,
                )
        if moved:
            moved.clear()

    def _take_new_leaders(
        self,
        response: ProduceResponse,
        results: dict[tuple[str, int], ProduceResponse.PartitionProduceResponse],
        now: float,
    ) -> set[TopicPartition]:
        """KIP-951: a partition answering NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
        names its current leader (Produce v10+): take it into the metadata at once if its
        epoch is newer than the cached one. Returns the partitions that moved."""
        leaders: dict[TopicPartition, tuple[int, int]] = {}
        for (topic, index), p in results.items():
            if p.error_code in _LEADER_MOVED_CODES:
                leader = p.current_leader
                if leader.leader_id >= 0 and leader.leader_epoch >= 0:
                    leaders[TopicPartition(topic, index)] = (leader.leader_id, leader.leader_epoch)
        if not leaders:
            return set()
        nodes = [
            BrokerNode(n.node_id, n.host, n.port, n.rack) for n in response.node_endpoints
        ]
        moved = self._metadata.update_leaders(now, leaders, nodes)
        if moved:
            log.debug("new leaders from the produce answer: %s", sorted(moved))
        return moved

    def _on_error(self, batch: ProducerBatch, error: BaseException, now: float) -> None:
        if batch.done:
            return
        if isinstance(error, MessageTooLargeError) and batch.record_count > 1:
            # the compression estimate let the batch grow too large: send it in parts
            parts = self._acc.split(batch, now)
            log.warning(
                "the broker rejected %d records for %s as too large (%d bytes encoded); "
                "sending them as %d smaller batches (at most batch_size, %d bytes, or half the "
                "batch when it was within batch_size: check the topic's max.message.bytes)",
                batch.record_count,
                batch.tp,
                len(batch.payload()),
                len(parts),
                self._acc.batch_size,
            )
            return
        idem = self.idempotence
        if self.transactions is not None:
            if isinstance(error, OutOfOrderSequenceNumberError) and not idem.is_next(batch):
                # an earlier batch of the partition failed and is retried: not a gap of ours
                self._retry(batch, error, now)
            elif isinstance(
                error,
                OutOfOrderSequenceNumberError
                | UnknownProducerIdError
                | InvalidProducerEpochError
                | ProducerFencedError,
            ):
                self._fail(batch, error, now)  # the transaction fails (or producer is fenced)
            else:
                self._retry(batch, error, now)
            return
        if idem.enabled and batch.base_sequence != NO_SEQUENCE:
            if isinstance(error, OutOfOrderSequenceNumberError) and not idem.is_next(batch):
                # An earlier batch of the partition failed or is unresolved: not our gap.
                self._retry(batch, error, now)
                return
            if isinstance(error, OutOfOrderSequenceNumberError):
                idem.request_bump(batch.tp, "the broker reports a sequence gap")
                self._fail(
                    batch,
                    KafkaError(
                        f"{error} {batch.record_count} records for {batch.tp} were not written: "
                        "the broker lost track of this producer's sequence (earlier records "
                        "of the partition may be lost, e.g. by an unclean leader election). "
                        "The producer bumped its epoch and goes on with the next records"
                    ),
                    now,
                )
                return
            if isinstance(error, UnknownProducerIdError | InvalidProducerEpochError):
                idem.request_bump(batch.tp, type(error).__name__)
                self._retry(batch, error, now)
                return
        self._retry(batch, error, now)

    def _retry(self, batch: ProducerBatch, error: BaseException, now: float) -> None:
        retriable = (isinstance(error, KafkaError) and error.retriable) or isinstance(
            error,
            OutOfOrderSequenceNumberError | UnknownProducerIdError | InvalidProducerEpochError,
        )
        if not retriable:
            self._fail(batch, error, now)
            return
        if now >= batch.deadline_ms:
            self._fail(batch, self._expired_error(batch, now, error), now)
            return
        if isinstance(error, KafkaError) and error.invalid_metadata:
            self._metadata.request_update(reset_backoff=False)
        if batch.attempts == 0:
            log.info("retrying records for %s after %s", batch.tp, error)
        batch.last_error = error
        if batch.tp in self._moved:
            # KIP-951: the answer named a newer leader: retry there at once, as Java does
            self._acc.reenqueue(batch, now)
        else:
            self._acc.reenqueue(batch, now + self._backoff.delay_ms(batch.attempts))

    def _complete(
        self, batch: ProducerBatch, base_offset: int, log_append_time: int, now: float
    ) -> None:
        self.idempotence.on_acked(batch)
        if batch.complete(base_offset, log_append_time):
            self._done(batch, now)

    def _done(self, batch: ProducerBatch, now: float) -> None:
        """A batch just completed (delivered or failed for good)."""
        self._acc.deallocate(batch)
        if self._recorder is not None and batch.parts is None:  # parts were counted
            self._recorder.batch_done(batch, now)
        if self._on_batch_done is not None:
            self._on_batch_done(batch)
        parent = batch.parent
        if parent is not None and parent.part_done():
            self._done(parent, now)

    def _fail(self, batch: ProducerBatch, error: BaseException, now: float) -> None:
        idem = self.idempotence
        txn = self.transactions
        if txn is not None:
            if not batch.done:
                txn.on_batch_failed(error, batch.base_sequence != NO_SEQUENCE)
        elif idem.enabled and batch.base_sequence != NO_SEQUENCE and not batch.done:
            idem.request_bump(batch.tp, f"a batch with sequence numbers failed ({error})")
        if batch.fail(error):
            self._done(batch, now)

    def _expired_error(
        self, batch: ProducerBatch, now: float, cause: BaseException | None = None
    ) -> KafkaTimeoutError:
        why = f"; last error: {cause}" if cause is not None else ""
        error = KafkaTimeoutError(
            f"{batch.record_count} records for {batch.tp} expired: not delivered within "
            f"delivery_timeout_ms ({self._config.delivery_timeout_ms:g} ms, "
            f"{now - batch.created_ms:.0f} ms since the batch was created){why}. Check that "
            "the topic exists and its leaders are reachable, or raise delivery_timeout_ms"
        )
        error.__cause__ = cause  # the last error the broker answered, for programs to test
        return error

    # -- shutdown ------------------------------------------------------------------------

    def abort(self, error: BaseException, now: float | None = None) -> int:
        """Fail every queued and in-flight batch (and pending transactional call) with
        ``error``; returns how many records. ``now``: the time (ms) for metrics (by
        default the last poll's)."""
        if self.transactions is not None:
            self.transactions.fail_all(error)
        count = 0
        pending = self._acc.abort_queued()
        for queue in self._tp_in_flight.values():
            pending.extend(queue)
        for batch in pending:
            if not batch.done:
                count += batch.record_count
                if batch.fail(error):
                    self._done(batch, self._last_poll_ms if now is None else now)
        return count
