"""TransactionManager, sans-I/O: requests it asks for, and how it treats each answer.

Time is a number of milliseconds passed to ``poll``; backoff has no jitter.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from kafkaio.backoff import ExponentialBackoff
from kafkaio.errors import (
    KafkaConnectionError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    UnknownServerError,
    UnsupportedVersionError,
)
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.producer.errors import TransactionAbortedError, TransactionStateError
from kafkaio.producer.idempotence import IdempotenceManager, IdState
from kafkaio.producer.transaction_state import TxnState, check_transition
from kafkaio.producer.transactions import (
    Outcome,
    TransactionManager,
    classify,
    group_metadata_of,
    to_offsets,
)
from kafkaio.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kafkaio.runtime.requests import UnsentRequest
from kafkaio.structs import ConsumerGroupMetadata, OffsetAndMetadata

TID = "app-1"
TP0 = TopicPartition("out", 0)
TP1 = TopicPartition("out", 1)
TP2 = TopicPartition("other", 0)
IN0 = TopicPartition("in", 0)
GROUP = ConsumerGroupMetadata("g", 5, "member-1", "instance-1")

# error codes used below
NOT_COORDINATOR = 16
COORDINATOR_LOAD_IN_PROGRESS = 14
CONCURRENT_TRANSACTIONS = 51
PRODUCER_FENCED = 90
INVALID_PRODUCER_EPOCH = 47
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
UNKNOWN_PRODUCER_ID = 59
ILLEGAL_GENERATION = 22
UNKNOWN_TOPIC_OR_PARTITION = 3
OPERATION_NOT_ATTEMPTED = 55
INVALID_TXN_STATE = 48


def make(timeout_ms: int = 60_000) -> TransactionManager:
    idem = IdempotenceManager(
        enabled=True,
        required=True,
        backoff=ExponentialBackoff(100, 1000, jitter=0),
        transactional=True,
    )
    return TransactionManager(
        TID, timeout_ms, idem, backoff=ExponentialBackoff(100, 1000, jitter=0)
    )


def poll_one(tm: TransactionManager, now: float, *, incomplete: bool = False) -> UnsentRequest:
    result = tm.poll(now, incomplete=incomplete)
    assert len(result.requests) == 1, result
    return result.requests[0]


def poll_none(tm: TransactionManager, now: float, *, incomplete: bool = False) -> float:
    result = tm.poll(now, incomplete=incomplete)
    assert result.requests == [], result.requests
    return result.next_poll_ms


def coordinator(key: str, node: int, error: int = 0) -> FindCoordinatorResponse:
    return FindCoordinatorResponse(
        coordinators=[
            FindCoordinatorResponse.Coordinator(
                key=key, node_id=node, host=f"b{node}", port=9000 + node, error_code=error
            )
        ]
    )


def answer_lookup(tm: TransactionManager, now: float, key: str, node: int, key_type: int) -> None:
    req = poll_one(tm, now)
    assert isinstance(req.request, FindCoordinatorRequest)
    assert (req.request.key, req.request.key_type, req.request.coordinator_keys) == (
        key,
        key_type,
        [key],
    )
    assert req.node_id is None  # any broker
    req.handler(now, coordinator(key, node), None)


def ready(tm: TransactionManager, *, node: int = 1, pid: int = 42, epoch: int = 3) -> Any:
    result = tm.initialize()
    answer_lookup(tm, 0, TID, node, 1)
    req = poll_one(tm, 0)
    assert isinstance(req.request, InitProducerIdRequest)
    req.handler(0, InitProducerIdResponse(producer_id=pid, producer_epoch=epoch), None)
    assert tm.state is TxnState.READY
    return result


def add_partitions(tm: TransactionManager, now: float, *tps: TopicPartition) -> UnsentRequest:
    for tp in tps:
        tm.maybe_add_partition(tp)
    req = poll_one(tm, now)
    assert isinstance(req.request, AddPartitionsToTxnRequest)
    return req


def add_partitions_response(
    req: UnsentRequest, errors: dict[TopicPartition, int] | None = None
) -> AddPartitionsToTxnResponse:
    errors = errors or {}
    R = AddPartitionsToTxnResponse
    return R(
        results_by_topic_v3_and_below=[
            R.AddPartitionsToTxnTopicResult(
                name=t.name,
                results_by_partition=[
                    R.AddPartitionsToTxnPartitionResult(
                        partition_index=p,
                        partition_error_code=errors.get(TopicPartition(t.name, p), 0),
                    )
                    for p in t.partitions
                ],
            )
            for t in req.request.v3_and_below_topics
        ]
    )


def requested_partitions(req: UnsentRequest) -> set[TopicPartition]:
    return {
        TopicPartition(t.name, p) for t in req.request.v3_and_below_topics for p in t.partitions
    }


def in_transaction(tm: TransactionManager, *tps: TopicPartition) -> None:
    ready(tm)
    tm.begin()
    if tps:
        req = add_partitions(tm, 0, *tps)
        req.handler(0, add_partitions_response(req), None)


def txn_offset_commit_response(
    req: UnsentRequest, errors: dict[TopicPartition, int] | None = None
) -> TxnOffsetCommitResponse:
    errors = errors or {}
    R = TxnOffsetCommitResponse
    return R(
        topics=[
            R.TxnOffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    R.TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=errors.get(TopicPartition(t.name, p.partition_index), 0),
                    )
                    for p in t.partitions
                ],
            )
            for t in req.request.topics
        ]
    )


# -- initialization -----------------------------------------------------------------------


def test_init_finds_the_transaction_coordinator_then_sends_init_producer_id() -> None:
    tm = make(timeout_ms=12_345)
    assert poll_none(tm, 0) == math.inf  # nothing before init_transactions()
    result = tm.initialize()
    assert tm.state is TxnState.INITIALIZING
    answer_lookup(tm, 0, TID, 2, 1)
    req = poll_one(tm, 1)
    assert req.node_id == 2
    assert req.request == InitProducerIdRequest(
        transactional_id=TID, transaction_timeout_ms=12_345, producer_id=-1, producer_epoch=-1
    )
    assert not result.done
    req.handler(5, InitProducerIdResponse(producer_id=42, producer_epoch=3), None)
    assert result.done and result.error is None
    assert tm.state is TxnState.READY
    assert (tm._idem.producer_id, tm._idem.epoch, tm._idem.state) == (42, 3, IdState.READY)
    assert tm.addresses() == {2: ("b2", 9002)}
    assert tm.initialize() is result  # init_transactions() again: already done


def test_init_retries_coordinator_loading_on_the_same_node_with_backoff() -> None:
    tm = make()
    tm.initialize()
    answer_lookup(tm, 0, TID, 1, 1)
    req = poll_one(tm, 0)
    req.handler(10, InitProducerIdResponse(error_code=COORDINATOR_LOAD_IN_PROGRESS), None)
    assert poll_none(tm, 10) == 100  # retry_backoff_ms
    req = poll_one(tm, 110)
    assert isinstance(req.request, InitProducerIdRequest) and req.node_id == 1
    req.handler(120, InitProducerIdResponse(error_code=CONCURRENT_TRANSACTIONS), None)
    assert poll_none(tm, 120) == 200  # exponential
    req = poll_one(tm, 320)
    req.handler(330, InitProducerIdResponse(producer_id=1, producer_epoch=0), None)
    assert tm.state is TxnState.READY


def test_init_fatal_on_transactional_id_authorization_failure() -> None:
    tm = make()
    result = tm.initialize()
    answer_lookup(tm, 0, TID, 1, 1)
    poll_one(tm, 0).handler(
        0, InitProducerIdResponse(error_code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED), None
    )
    assert tm.state is TxnState.FATAL_ERROR
    assert isinstance(result.error, TransactionalIdAuthorizationFailedError)
    with pytest.raises(TransactionalIdAuthorizationFailedError):
        tm.begin()
    assert poll_none(tm, 1000) == math.inf  # nothing more is sent


def test_find_coordinator_old_layout_and_retry_when_not_available() -> None:
    tm = make()
    tm.initialize()
    req = poll_one(tm, 0)
    req.handler(0, FindCoordinatorResponse(error_code=15), None)  # COORDINATOR_NOT_AVAILABLE
    assert poll_none(tm, 0) == 100
    req = poll_one(tm, 100)
    assert isinstance(req.request, FindCoordinatorRequest)
    req.handler(100, FindCoordinatorResponse(node_id=3, host="b3", port=9003), None)  # v0-v3
    req = poll_one(tm, 100)
    assert isinstance(req.request, InitProducerIdRequest) and req.node_id == 3


def test_find_coordinator_authorization_failure_is_fatal() -> None:
    tm = make()
    result = tm.initialize()
    req = poll_one(tm, 0)
    req.handler(0, coordinator(TID, -1, TRANSACTIONAL_ID_AUTHORIZATION_FAILED), None)
    assert tm.state is TxnState.FATAL_ERROR
    assert isinstance(result.error, TransactionalIdAuthorizationFailedError)


def test_unsupported_version_is_fatal() -> None:
    tm = make()
    result = tm.initialize()
    answer_lookup(tm, 0, TID, 1, 1)
    poll_one(tm, 0).handler(0, None, UnsupportedVersionError("InitProducerId not spoken"))
    assert tm.state is TxnState.FATAL_ERROR
    assert isinstance(result.error, UnsupportedVersionError)


# -- the happy path -------------------------------------------------------------------------


def test_full_transaction_with_offsets() -> None:
    tm = make()
    ready(tm, node=1, pid=42, epoch=3)
    tm.begin()
    assert tm.state is TxnState.IN_TRANSACTION
    assert tm.maybe_add_partition(TP0) is True
    assert tm.maybe_add_partition(TP0) is False  # already registered
    assert tm.maybe_add_partition(TP1) is True
    assert not tm.partition_ready(TP0)
    req = poll_one(tm, 0)
    assert req.node_id == 1 and req.max_version == 3  # clients send v3 at most
    r = req.request
    assert isinstance(r, AddPartitionsToTxnRequest)
    assert (r.v3_and_below_transactional_id, r.v3_and_below_producer_id) == (TID, 42)
    assert r.v3_and_below_producer_epoch == 3
    assert requested_partitions(req) == {TP0, TP1}  # one request for both
    assert poll_none(tm, 0) == math.inf  # one transactional request at a time
    req.handler(1, add_partitions_response(req), None)
    assert tm.partition_ready(TP0) and tm.partition_ready(TP1)
    assert tm.partitions == {TP0, TP1}

    offsets = tm.add_offsets({IN0: OffsetAndMetadata(17, "m", 4)}, GROUP)
    req = poll_one(tm, 2)
    assert req.request == AddOffsetsToTxnRequest(
        transactional_id=TID, producer_id=42, producer_epoch=3, group_id="g"
    )
    assert req.node_id == 1
    req.handler(2, AddOffsetsToTxnResponse(), None)
    answer_lookup(tm, 3, "g", 2, 0)  # the group coordinator
    req = poll_one(tm, 3)
    assert req.node_id == 2
    r = req.request
    assert isinstance(r, TxnOffsetCommitRequest)
    assert (r.transactional_id, r.group_id, r.producer_id, r.producer_epoch) == (TID, "g", 42, 3)
    assert (r.generation_id, r.member_id, r.group_instance_id) == (5, "member-1", "instance-1")
    [topic] = r.topics
    assert topic.name == "in"
    [p] = topic.partitions
    assert (p.partition_index, p.committed_offset, p.committed_metadata) == (0, 17, "m")
    assert p.committed_leader_epoch == 4
    assert not offsets.done
    req.handler(4, txn_offset_commit_response(req), None)
    assert offsets.done and offsets.error is None

    commit = tm.begin_commit()
    assert tm.state is TxnState.COMMITTING_TRANSACTION
    assert tm.begin_commit() is commit  # calling commit again awaits the same result
    poll_none(tm, 5, incomplete=True)  # batches still in flight: EndTxn waits
    req = poll_one(tm, 6)
    assert req.request == EndTxnRequest(
        transactional_id=TID, producer_id=42, producer_epoch=3, committed=True
    )
    assert req.node_id == 1 and req.max_version == 4
    req.handler(7, EndTxnResponse(), None)
    assert commit.done and commit.error is None
    assert tm.state is TxnState.READY
    assert tm.partitions == frozenset()
    tm.begin()  # the next transaction starts empty
    assert tm.maybe_add_partition(TP0) is True


def test_partitions_registered_while_an_add_is_in_flight_go_in_the_next_request() -> None:
    tm = make()
    in_transaction(tm)
    first = add_partitions(tm, 0, TP0)
    assert tm.maybe_add_partition(TP1) is True
    assert tm.maybe_add_partition(TP0) is False  # in flight counts as registered
    first.handler(1, add_partitions_response(first), None)
    second = poll_one(tm, 1)
    assert requested_partitions(second) == {TP1}


def test_empty_transaction_commits_without_end_txn() -> None:
    tm = make()
    in_transaction(tm)
    commit = tm.begin_commit()
    poll_none(tm, 0)
    assert commit.done and commit.error is None and tm.state is TxnState.READY


def test_commit_sends_pending_partitions_and_offsets_before_end_txn() -> None:
    tm = make()
    in_transaction(tm)
    tm.maybe_add_partition(TP0)
    offsets = tm.add_offsets({IN0: 3}, ConsumerGroupMetadata("g"))
    commit = tm.begin_commit()
    req = poll_one(tm, 0)
    assert isinstance(req.request, AddPartitionsToTxnRequest)
    req.handler(0, add_partitions_response(req), None)
    req = poll_one(tm, 0)
    assert isinstance(req.request, AddOffsetsToTxnRequest)
    req.handler(0, AddOffsetsToTxnResponse(), None)
    answer_lookup(tm, 0, "g", 1, 0)
    req = poll_one(tm, 0)
    assert isinstance(req.request, TxnOffsetCommitRequest)
    assert (req.request.generation_id, req.request.member_id) == (-1, "")  # standalone
    req.handler(0, txn_offset_commit_response(req), None)
    assert offsets.done
    req = poll_one(tm, 0)
    assert isinstance(req.request, EndTxnRequest) and req.request.committed
    req.handler(0, EndTxnResponse(), None)
    assert commit.done and commit.error is None


# -- retriable errors and coordinator moves -------------------------------------------------


def test_concurrent_transactions_on_add_partitions_is_retried_after_backoff() -> None:
    tm = make()
    in_transaction(tm)
    req = add_partitions(tm, 0, TP0, TP1)
    req.handler(
        10,
        add_partitions_response(req, {TP0: CONCURRENT_TRANSACTIONS, TP1: OPERATION_NOT_ATTEMPTED}),
        None,
    )
    assert tm.state is TxnState.IN_TRANSACTION
    assert not tm.partition_ready(TP0) and not tm.partition_ready(TP1)
    assert poll_none(tm, 50) == 60
    req = poll_one(tm, 110)
    assert requested_partitions(req) == {TP0, TP1} and req.node_id == 1
    req.handler(120, add_partitions_response(req), None)
    assert tm.partition_ready(TP0) and tm.partition_ready(TP1)


def test_not_coordinator_on_end_txn_looks_the_coordinator_up_again() -> None:
    tm = make()
    in_transaction(tm, TP0)
    commit = tm.begin_commit()
    req = poll_one(tm, 0)
    assert isinstance(req.request, EndTxnRequest) and req.node_id == 1
    req.handler(0, EndTxnResponse(error_code=NOT_COORDINATOR), None)
    assert tm.addresses() == {}
    assert poll_none(tm, 0) == 100
    answer_lookup(tm, 100, TID, 3, 1)  # the coordinator moved to node 3
    req = poll_one(tm, 100)
    assert isinstance(req.request, EndTxnRequest) and req.node_id == 3
    req.handler(100, EndTxnResponse(), None)
    assert commit.done and commit.error is None


def test_lost_connection_retries_after_a_new_lookup() -> None:
    tm = make()
    in_transaction(tm)
    req = add_partitions(tm, 0, TP0)
    req.handler(0, None, KafkaConnectionError("connection lost"))
    assert tm.maybe_add_partition(TP0) is False  # still registered, to be added again
    answer_lookup(tm, 100, TID, 1, 1)
    req = poll_one(tm, 100)
    assert requested_partitions(req) == {TP0}


def test_txn_offset_commit_retries_only_failed_partitions_and_follows_the_group_coordinator() -> (
    None
):
    tm = make()
    in_transaction(tm)
    result = tm.add_offsets({IN0: 1, TopicPartition("in", 1): 2}, GROUP)
    poll_one(tm, 0).handler(0, AddOffsetsToTxnResponse(), None)
    answer_lookup(tm, 0, "g", 2, 0)
    req = poll_one(tm, 0)
    req.handler(0, txn_offset_commit_response(req, {TopicPartition("in", 1): 3}), None)
    assert not result.done
    req = poll_one(tm, 100)
    assert [p.partition_index for t in req.request.topics for p in t.partitions] == [1]
    req.handler(
        100, txn_offset_commit_response(req, {TopicPartition("in", 1): NOT_COORDINATOR}), None
    )
    answer_lookup(tm, 300, "g", 3, 0)
    req = poll_one(tm, 300)
    assert req.node_id == 3
    req.handler(300, txn_offset_commit_response(req), None)
    assert result.done and result.error is None


# -- abortable errors ------------------------------------------------------------------------


def test_topic_authorization_failure_is_abortable() -> None:
    tm = make()
    in_transaction(tm)
    req = add_partitions(tm, 0, TP0, TP2)
    req.handler(
        0,
        add_partitions_response(
            req, {TP2: TOPIC_AUTHORIZATION_FAILED, TP0: OPERATION_NOT_ATTEMPTED}
        ),
        None,
    )
    assert tm.state is TxnState.ABORTABLE_ERROR
    assert isinstance(tm.last_error, TopicAuthorizationFailedError)
    assert "other" in str(tm.last_error)
    assert tm.drops_unsent_batches
    with pytest.raises(TransactionStateError, match="abort_transaction"):
        tm.begin_commit()
    with pytest.raises(TransactionStateError, match="abort_transaction"):
        tm.maybe_add_partition(TP1)
    abort = tm.begin_abort()
    poll_none(tm, 0, incomplete=True)  # waits for in-flight batches
    assert not abort.done
    poll_none(tm, 1)  # no partition was added: nothing to end, the abort completes
    assert abort.done and abort.error is None and tm.state is TxnState.READY


def test_failed_batch_fails_the_transaction_and_bumps_the_epoch_after_abort() -> None:
    tm = make()
    in_transaction(tm, TP0)
    tm.on_batch_failed(UnknownServerError("boom"), had_sequence=True)
    assert tm.state is TxnState.ABORTABLE_ERROR and tm.bump_required
    abort = tm.begin_abort()
    assert tm.begin_abort() is abort
    req = poll_one(tm, 0)
    assert isinstance(req.request, EndTxnRequest) and req.request.committed is False
    req.handler(0, EndTxnResponse(), None)
    assert tm.state is TxnState.INITIALIZING and not abort.done  # done after the bump
    req = poll_one(tm, 0)
    assert req.request == InitProducerIdRequest(
        transactional_id=TID, transaction_timeout_ms=60_000, producer_id=42, producer_epoch=3
    )
    req.handler(0, InitProducerIdResponse(producer_id=42, producer_epoch=4), None)
    assert abort.done and abort.error is None
    assert tm.state is TxnState.READY and tm._idem.epoch == 4
    assert tm._idem.next_sequence(TP0) == 0


def test_batch_failure_during_commit_fails_the_commit() -> None:
    tm = make()
    in_transaction(tm, TP0)
    commit = tm.begin_commit()
    poll_none(tm, 0, incomplete=True)
    tm.on_batch_failed(TopicAuthorizationFailedError(None), had_sequence=False)
    assert commit.done and isinstance(commit.error, TopicAuthorizationFailedError)
    assert tm.state is TxnState.ABORTABLE_ERROR
    poll_none(tm, 0)  # no EndTxn(commit)
    tm.begin_abort()
    req = poll_one(tm, 0)
    assert isinstance(req.request, EndTxnRequest) and not req.request.committed


def test_abort_fails_pending_offsets_and_ignores_its_own_aborted_batches() -> None:
    tm = make()
    in_transaction(tm, TP0)
    offsets = tm.add_offsets({IN0: 9}, GROUP)
    abort = tm.begin_abort()
    assert isinstance(offsets.error, TransactionAbortedError)
    tm.on_batch_failed(TransactionAbortedError("dropped"), had_sequence=False)
    assert tm.state is TxnState.ABORTING_TRANSACTION and not tm.bump_required
    req = poll_one(tm, 0)
    assert isinstance(req.request, EndTxnRequest) and not req.request.committed
    req.handler(0, EndTxnResponse(), None)
    assert abort.done and tm.state is TxnState.READY


def test_unknown_producer_id_on_abort_completes_it_with_an_epoch_bump() -> None:
    tm = make()
    in_transaction(tm, TP0)
    abort = tm.begin_abort()
    poll_one(tm, 0).handler(0, EndTxnResponse(error_code=UNKNOWN_PRODUCER_ID), None)
    req = poll_one(tm, 0)
    assert isinstance(req.request, InitProducerIdRequest) and req.request.producer_id == 42
    req.handler(0, InitProducerIdResponse(producer_id=42, producer_epoch=4), None)
    assert abort.done and abort.error is None and tm.state is TxnState.READY


def test_stale_member_on_txn_offset_commit_is_abortable() -> None:
    tm = make()
    in_transaction(tm)
    result = tm.add_offsets({IN0: 1}, GROUP)
    poll_one(tm, 0).handler(0, AddOffsetsToTxnResponse(), None)
    answer_lookup(tm, 0, "g", 1, 0)
    req = poll_one(tm, 0)
    req.handler(0, txn_offset_commit_response(req, {IN0: ILLEGAL_GENERATION}), None)
    assert tm.state is TxnState.ABORTABLE_ERROR
    assert result.done and type(result.error).__name__ == "IllegalGenerationError"


def test_group_authorization_failure_on_add_offsets_is_abortable() -> None:
    tm = make()
    in_transaction(tm)
    result = tm.add_offsets({IN0: 1}, GROUP)
    poll_one(tm, 0).handler(0, AddOffsetsToTxnResponse(error_code=GROUP_AUTHORIZATION_FAILED), None)
    assert tm.state is TxnState.ABORTABLE_ERROR
    assert type(result.error).__name__ == "GroupAuthorizationFailedError"


# -- fatal errors and fencing ----------------------------------------------------------------


@pytest.mark.parametrize("code", [PRODUCER_FENCED, INVALID_PRODUCER_EPOCH])
def test_fencing_on_add_partitions_is_fatal(code: int) -> None:
    tm = make()
    in_transaction(tm)
    req = add_partitions(tm, 0, TP0)
    req.handler(0, add_partitions_response(req, {TP0: code}), None)
    assert tm.state is TxnState.FATAL_ERROR
    assert isinstance(tm.fatal_error, ProducerFencedError)
    for call in (tm.begin, lambda: tm.maybe_add_partition(TP1), tm.begin_commit, tm.begin_abort):
        with pytest.raises(ProducerFencedError):
            call()
    assert poll_none(tm, 10_000) == math.inf


def test_invalid_producer_epoch_on_end_txn_is_fenced_and_fails_the_commit() -> None:
    tm = make()
    in_transaction(tm, TP0)
    commit = tm.begin_commit()
    poll_one(tm, 0).handler(0, EndTxnResponse(error_code=INVALID_PRODUCER_EPOCH), None)
    assert isinstance(commit.error, ProducerFencedError)
    assert "app-1" in str(commit.error)
    assert tm.state is TxnState.FATAL_ERROR


def test_fenced_batch_is_fatal_and_fails_pending_calls() -> None:
    tm = make()
    in_transaction(tm, TP0)
    offsets = tm.add_offsets({IN0: 1}, GROUP)
    tm.on_batch_failed(ProducerFencedError(None), had_sequence=True)
    assert tm.state is TxnState.FATAL_ERROR
    assert isinstance(offsets.error, ProducerFencedError)


@pytest.mark.parametrize("code", [INVALID_TXN_STATE, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, 99])
def test_other_end_txn_errors_are_fatal(code: int) -> None:
    tm = make()
    in_transaction(tm, TP0)
    commit = tm.begin_commit()
    poll_one(tm, 0).handler(0, EndTxnResponse(error_code=code), None)
    assert tm.state is TxnState.FATAL_ERROR and commit.error is tm.fatal_error


def test_fail_all_fails_pending_results() -> None:
    tm = make()
    init = tm.initialize()
    tm.fail_all(KafkaConnectionError("closed"))
    assert isinstance(init.error, KafkaConnectionError)


# -- state machine and API misuse ------------------------------------------------------------


def test_transition_table_matches_java() -> None:
    S = TxnState
    allowed = {
        (S.UNINITIALIZED, S.INITIALIZING),
        (S.ABORTING_TRANSACTION, S.INITIALIZING),
        (S.INITIALIZING, S.READY),
        (S.COMMITTING_TRANSACTION, S.READY),
        (S.ABORTING_TRANSACTION, S.READY),
        (S.READY, S.IN_TRANSACTION),
        (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION),
        (S.IN_TRANSACTION, S.ABORTING_TRANSACTION),
        (S.ABORTABLE_ERROR, S.ABORTING_TRANSACTION),
        (S.IN_TRANSACTION, S.ABORTABLE_ERROR),
        (S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR),
        (S.ABORTABLE_ERROR, S.ABORTABLE_ERROR),
        (S.INITIALIZING, S.ABORTABLE_ERROR),
    } | {(s, S.FATAL_ERROR) for s in S}
    for source in S:
        for target in S:
            if (source, target) in allowed:
                check_transition(source, target)
            else:
                with pytest.raises(TransactionStateError):
                    check_transition(source, target)


def test_calls_in_the_wrong_state_explain_what_to_do() -> None:
    tm = make()
    with pytest.raises(TransactionStateError, match="init_transactions"):
        tm.begin()
    ready(tm)
    with pytest.raises(TransactionStateError, match="begin_transaction"):
        tm.maybe_add_partition(TP0)
    with pytest.raises(TransactionStateError, match="begin_transaction"):
        tm.begin_commit()
    with pytest.raises(TransactionStateError, match="begin_transaction"):
        tm.begin_abort()
    with pytest.raises(TransactionStateError, match="begin_transaction"):
        tm.add_offsets({IN0: OffsetAndMetadata(1)}, GROUP)
    tm.begin()
    with pytest.raises(TransactionStateError, match="already open"):
        tm.begin()
    with pytest.raises(TransactionStateError, match="already open"):
        tm.initialize()


def test_classify_unknown_and_transport_errors() -> None:
    from kafkaio.errors import error_for_code

    assert classify(UnknownServerError(None), {}) is Outcome.FATAL
    assert classify(error_for_code(12345)(None), {}) is Outcome.FATAL
    assert classify(KafkaConnectionError("x"), {}) is Outcome.LOOKUP


def test_offsets_and_group_metadata_arguments() -> None:
    assert to_offsets({IN0: 5}) == {IN0: OffsetAndMetadata(5)}
    om = OffsetAndMetadata(6, "x")
    assert to_offsets({("in", 0): om}) == {IN0: om}
    from kafkaio.errors import KafkaConfigError

    with pytest.raises(KafkaConfigError):
        to_offsets({IN0: -1})
    assert group_metadata_of("g") == ConsumerGroupMetadata("g", -1, "", None)

    class Theirs:  # e.g. the consumer's own type
        group_id = "g"
        generation_id = 7
        member_id = "m"
        group_instance_id = None

    assert group_metadata_of(Theirs()) == ConsumerGroupMetadata("g", 7, "m", None)
    with pytest.raises(TransactionStateError):
        group_metadata_of(object())
