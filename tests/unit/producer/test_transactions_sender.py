"""The Sender with a TransactionManager: what is drained when, and how batch errors end up.

Sans-I/O: requests are answered by hand; time is a number of milliseconds.
"""

from __future__ import annotations

from typing import Any

from kafkaio.backoff import ExponentialBackoff
from kafkaio.errors import ProducerFencedError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.net.config import ConnectionConfig
from kafkaio.producer.accumulator import RecordAccumulator
from kafkaio.producer.config import ProducerConfig
from kafkaio.producer.errors import TransactionAbortedError
from kafkaio.producer.idempotence import IdempotenceManager
from kafkaio.producer.memory import MemoryBudget
from kafkaio.producer.sender import Sender
from kafkaio.producer.transaction_state import TxnState
from kafkaio.producer.transactions import TransactionManager
from kafkaio.protocol.messages import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    EndTxnResponse,
    FindCoordinatorResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
)
from kafkaio.records import iter_batches
from kafkaio.runtime.requests import PollResult, UnsentRequest
from tests.unit.producer._helpers import answer, make_metadata, sent_partitions
from tests.unit.producer.test_transactions import add_partitions_response

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
TOPIC_AUTHORIZATION_FAILED = 29
PRODUCER_FENCED = 90
NOT_LEADER = 6
OUT_OF_ORDER = 45


class TxnHarness:
    """A transactional Sender (accumulator, idempotence, transactions) driven by hand."""

    def __init__(self, **options: Any) -> None:
        options.setdefault("linger_ms", 0)
        options.setdefault("transactional_id", "tx")
        self.config = ProducerConfig.from_options(options, ConnectionConfig())
        self.metadata = make_metadata({"t": [1, 2]})
        self.memory = MemoryBudget(self.config.buffer_memory)
        self.acc = RecordAccumulator(
            batch_size=self.config.batch_size,
            compression=self.config.compression_type,
            linger_ms=self.config.linger_ms,
            delivery_timeout_ms=self.config.delivery_timeout_ms,
            memory=self.memory,
            transactional=True,
            growth=1,  # batches of exactly batch_size: the tests count them
        )
        backoff = ExponentialBackoff(100, 1000, jitter=0)
        self.idem = IdempotenceManager(
            enabled=True, required=True, backoff=backoff, transactional=True
        )
        self.txn = TransactionManager("tx", 60_000, self.idem, backoff=backoff)
        self.sender = Sender(
            self.config, self.acc, self.metadata, self.idem, backoff=backoff, transactions=self.txn
        )

    def poll(self, now: float) -> PollResult:
        return self.sender.poll(now)

    def only(self, now: float, kind: type) -> UnsentRequest:
        reqs = [r for r in self.poll(now).requests if not _is_metadata(r)]
        assert len(reqs) == 1 and isinstance(reqs[0].request, kind), reqs
        return reqs[0]

    def ready(self) -> None:
        self.txn.initialize()
        req = self.only(0, object)
        req.handler(
            0,
            FindCoordinatorResponse(
                coordinators=[
                    FindCoordinatorResponse.Coordinator(key="tx", node_id=1, host="h", port=1)
                ]
            ),
            None,
        )
        self.only(0, InitProducerIdRequest).handler(
            0, InitProducerIdResponse(producer_id=9, producer_epoch=2), None
        )
        assert self.txn.state is TxnState.READY

    def append(self, tp: TopicPartition, value: bytes = b"v") -> Any:
        self.txn.maybe_add_partition(tp)
        assert self.memory.try_reserve(100)
        return self.acc.append(tp, 1000, None, value, None, 0.0, 100).future

    def add_partitions(self, now: float) -> None:
        req = self.only(now, AddPartitionsToTxnRequest)
        req.handler(now, add_partitions_response(req), None)


def _is_metadata(request: UnsentRequest) -> bool:
    return type(request.request).__name__ == "MetadataRequest"


def produces(result: PollResult) -> list[UnsentRequest]:
    return [r for r in result.requests if isinstance(r.request, ProduceRequest)]


def test_nothing_is_drained_before_add_partitions_to_txn_is_acknowledged() -> None:
    h = TxnHarness()
    h.ready()
    h.txn.begin()
    h.append(TP0)
    h.append(TP1)
    result = h.poll(1)
    assert produces(result) == []
    [add] = [r for r in result.requests if isinstance(r.request, AddPartitionsToTxnRequest)]
    add.handler(1, add_partitions_response(add), None)
    sent = produces(h.poll(2))
    assert sorted(tp for r in sent for tp in sent_partitions(r)) == [TP0, TP1]
    for req in sent:
        assert req.request.transactional_id == "tx"
        for t in req.request.topic_data:
            for p in t.partition_data:
                [batch] = list(iter_batches(p.records))
                assert batch.is_transactional
                assert (batch.producer_id, batch.producer_epoch) == (9, 2)


def test_commit_waits_for_in_flight_batches_then_sends_end_txn() -> None:
    h = TxnHarness()
    h.ready()
    h.txn.begin()
    fut = h.append(TP0)
    h.add_partitions(0)
    [produce] = produces(h.poll(1))
    commit = h.txn.begin_commit()
    assert [r for r in h.poll(2).requests if isinstance(r.request, EndTxnRequest)] == []
    answer(produce, 3)
    assert fut.done() and fut.exception() is None
    end = h.only(4, EndTxnRequest)
    assert end.request.committed
    end.handler(5, EndTxnResponse(), None)
    assert commit.done and commit.error is None


def test_abort_drops_unsent_batches_and_waits_for_sent_ones() -> None:
    h = TxnHarness()
    h.ready()
    h.txn.begin()
    sent_future = h.append(TP0)
    h.add_partitions(0)
    [produce] = produces(h.poll(1))
    queued = h.append(TP0, b"second")  # behind the in-flight batch of TP0
    h.txn.maybe_add_partition(TP1)
    abort = h.txn.begin_abort()
    result = h.poll(2)
    assert [r for r in result.requests if not _is_metadata(r)] == []  # waits for `produce`
    assert isinstance(queued.exception(), TransactionAbortedError)
    answer(produce, 3)
    assert sent_future.exception() is None
    end = h.only(4, EndTxnRequest)
    assert end.request.committed is False
    end.handler(5, EndTxnResponse(), None)
    assert abort.done and h.txn.state is TxnState.READY


def test_a_failed_batch_makes_the_transaction_abortable_and_drops_the_rest() -> None:
    h = TxnHarness()
    h.ready()
    h.txn.begin()
    first = h.append(TP0)
    h.add_partitions(0)
    [produce] = produces(h.poll(1))
    later = h.append(TP0, b"later")
    answer(produce, 2, errors={TP0: TOPIC_AUTHORIZATION_FAILED})
    assert type(first.exception()).__name__ == "TopicAuthorizationFailedError"
    assert h.txn.state is TxnState.ABORTABLE_ERROR
    assert h.txn.bump_required  # the failed batch had a sequence number
    h.poll(3)
    assert isinstance(later.exception(), TransactionAbortedError)
    abort = h.txn.begin_abort()
    end = h.only(4, EndTxnRequest)
    end.handler(4, EndTxnResponse(), None)
    bump = h.only(5, InitProducerIdRequest)
    assert (bump.request.producer_id, bump.request.producer_epoch) == (9, 2)
    bump.handler(5, InitProducerIdResponse(producer_id=9, producer_epoch=3), None)
    assert abort.done and h.txn.state is TxnState.READY
    h.txn.begin()
    h.append(TP0, b"next")
    h.add_partitions(6)
    [produce] = produces(h.poll(7))
    [batch] = list(iter_batches(produce.request.topic_data[0].partition_data[0].records))
    assert (batch.producer_epoch, batch.base_sequence) == (3, 0)  # sequences restart


def test_retriable_produce_errors_are_retried_inside_the_transaction() -> None:
    h = TxnHarness()
    h.ready()
    h.txn.begin()
    fut = h.append(TP0)
    h.add_partitions(0)
    [produce] = produces(h.poll(1))
    answer(produce, 2, errors={TP0: NOT_LEADER})
    assert h.txn.state is TxnState.IN_TRANSACTION and not fut.done()
    [again] = produces(h.poll(200))
    answer(again, 201)
    assert fut.exception() is None


def test_fenced_produce_is_fatal_for_the_producer() -> None:
    h = TxnHarness()
    h.ready()
    h.txn.begin()
    fut = h.append(TP0)
    h.add_partitions(0)
    [produce] = produces(h.poll(1))
    other = h.append(TP1)
    answer(produce, 2, errors={TP0: PRODUCER_FENCED})
    assert isinstance(fut.exception(), ProducerFencedError)
    assert h.txn.state is TxnState.FATAL_ERROR
    assert h.poll(3).requests == []
    assert isinstance(other.exception(), ProducerFencedError)


def test_a_sequence_gap_behind_a_retried_batch_is_retried_not_fatal() -> None:
    # Two full batches of TP0 in flight (after one acknowledged: a partition's first batch
    # goes alone): the first gets a retriable error, so the broker rejects the second as a
    # sequence gap. That gap is not the producer's: the second is retried after the first,
    # and the transaction goes on.
    h = TxnHarness(batch_size=100)
    h.ready()
    h.txn.begin()
    acked = h.append(TP0, b"x" * 30)
    h.add_partitions(0)
    (only,) = produces(h.poll(1)) + produces(h.poll(1))
    answer(only, 1, base_offset=0)
    assert acked.result().offset == 0
    futures = [h.append(TP0, b"x" * 30) for _ in range(3)]
    first, second = produces(h.poll(1)) + produces(h.poll(1))
    answer(first, 2, errors={TP0: NOT_LEADER})
    answer(second, 2, errors={TP0: OUT_OF_ORDER})
    assert h.txn.state is TxnState.IN_TRANSACTION
    assert not any(f.done() for f in futures)
    sequences = []
    now = 200.0
    while not all(f.done() for f in futures):
        for request in produces(h.poll(now)):
            [batch] = list(iter_batches(request.request.topic_data[0].partition_data[0].records))
            sequences.append(batch.base_sequence)
            answer(request, now, base_offset=len(sequences))
        now += 1
    assert sequences == [1, 2, 3]
    assert [f.result().offset for f in futures] == [1, 2, 3]
    assert h.txn.state is TxnState.IN_TRANSACTION
