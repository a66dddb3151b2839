"""The Sender request manager with a fake clock: requests per broker, retries, idempotence."""

from __future__ import annotations

import math

import pytest

from kafkaio.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
    UnsupportedVersionError,
)
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.producer.errors import ProducerClosedError
from kafkaio.producer.idempotence import IdState
from kafkaio.protocol.messages import InitProducerIdRequest, InitProducerIdResponse
from kafkaio.records import iter_batches

from ._helpers import (
    Harness,
    answer,
    metadata_response,
    produce_requests,
    sent_batches,
    sent_partitions,
)

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
T2 = TopicPartition("t", 2)
NOT_LEADER = 6
OUT_OF_ORDER = 45
UNKNOWN_PRODUCER_ID = 59


def headers(request) -> dict[TopicPartition, tuple[int, int, int, int]]:  # type: ignore[no-untyped-def]
    """(producer id, epoch, base sequence, record count) of each batch in a request."""
    out = {}
    for tp, raw in sent_batches(request):
        (batch,) = list(iter_batches(raw))
        out[tp] = (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.record_count)
    return out


def test_one_request_per_leader_and_offsets_per_record() -> None:
    h = Harness({"t": [1, 1, 2]})
    futures = [h.append("t", p) for p in (0, 0, 1, 2)]
    requests = produce_requests(h.poll(0))
    assert sorted(r.node_id for r in requests) == [1, 2]
    by_node = {r.node_id: r for r in requests}
    assert sorted(sent_partitions(by_node[1])) == [T0, T1]
    assert sent_partitions(by_node[2]) == [T2]
    assert by_node[1].request.acks == -1 and by_node[1].expect_response
    for request in requests:
        answer(request, 1, base_offset=40)
    assert [f.result().offset for f in futures] == [40, 41, 40, 40]
    assert futures[0].result().topic == "t" and futures[2].result().partition == 1
    assert h.memory.used == 0


def test_produce_acks_are_handled_as_soon_as_they_are_read() -> None:
    # the driver hands a Produce response to its handler from the read itself, so an ack
    # does not wait behind a Fetch cycle read in the same loop pass (docs/benchmarks.md)
    h = Harness()
    h.append("t", 0)
    (request,) = produce_requests(h.poll(0))
    assert request.handle_on_read


def test_acks_zero_expects_no_response() -> None:
    h = Harness(acks=0)
    future = h.append("t", 0)
    (request,) = produce_requests(h.poll(0))
    assert request.request.acks == 0 and not request.expect_response
    request.handler(1, None, None)
    assert future.result().offset == -1


def test_linger_delays_the_request() -> None:
    h = Harness(linger_ms=20)
    h.append("t", 0, now=0)
    result = h.poll(5)
    assert produce_requests(result) == [] and result.next_poll_ms == 15
    assert len(produce_requests(h.poll(20))) == 1


def test_max_in_flight_per_broker() -> None:
    h = Harness({"t": [1, 1, 1, 1]}, conn={"max_in_flight_requests_per_connection": 2})
    sent = []
    for now in range(4):
        h.append("t", now, now=now)
        sent += produce_requests(h.poll(now))
    assert len(sent) == 2  # the other two partitions wait for a response
    answer(sent[0], 5)
    (more,) = produce_requests(h.poll(5))
    assert sorted(sent_partitions(more)) == [T2, TopicPartition("t", 3)]


def test_max_in_flight_one_keeps_one_batch_per_partition_in_flight() -> None:
    h = Harness({"t": [1, 1]}, batch_size=100, conn={"max_in_flight_requests_per_connection": 1})
    for _ in range(3):
        h.append("t", 0)
    h.append("t", 1)
    (first,) = produce_requests(h.poll(0))
    assert sorted(sent_partitions(first)) == [T0, T1]
    assert produce_requests(h.poll(1)) == []  # T0's next batch waits for the answer
    answer(first, 2)
    (second,) = produce_requests(h.poll(3))
    assert sent_partitions(second) == [T0]


def test_full_batches_are_sent_ahead_up_to_max_in_flight() -> None:
    # batch_size 100 holds one record: each append closes the batch before it (full).
    h = Harness({"t": [1]}, batch_size=100, conn={"max_in_flight_requests_per_connection": 3})
    futures = [h.append("t", 0) for _ in range(5)]
    sent = [r for now in range(4) for r in produce_requests(h.poll(now))]
    assert len(sent) == 3  # one batch of T0 per request, three requests in flight
    assert all(sent_partitions(r) == [T0] for r in sent)
    answer(sent[0], 4, base_offset=0)
    (fourth,) = produce_requests(h.poll(5))  # a slot came free: the next full batch goes
    assert produce_requests(h.poll(6)) == []  # the last batch is not full: it waits
    for offset, request in enumerate([*sent[1:], fourth], start=1):
        answer(request, 7, base_offset=offset)
    (last,) = produce_requests(h.poll(8))
    answer(last, 9, base_offset=4)
    assert [f.result().offset for f in futures] == [0, 1, 2, 3, 4]


def test_a_partition_has_at_most_max_in_flight_batches_in_flight_across_leaders() -> None:
    h = Harness({"t": [1]}, batch_size=100, conn={"max_in_flight_requests_per_connection": 2})
    for _ in range(4):
        h.append("t", 0)
    sent = produce_requests(h.poll(0)) + produce_requests(h.poll(0))
    assert [r.node_id for r in sent] == [1, 1]
    h.metadata.on_response(1, metadata_response({"t": [2]}))  # the leader moved
    assert produce_requests(h.poll(2)) == []  # broker 2 is free, but T0 has 2 in flight
    answer(sent[0], 3, errors={T0: NOT_LEADER})
    assert produce_requests(h.poll(200)) == []  # a retry waits until none is in flight


def test_a_batch_that_is_not_full_waits_for_the_batch_in_flight() -> None:
    h = Harness({"t": [1]})
    first = h.append("t", 0, now=0)
    (r1,) = produce_requests(h.poll(0))
    second = h.append("t", 0, now=1)  # linger 0: ready, but it can fill up meanwhile
    assert produce_requests(h.poll(1)) == []
    third = h.append("t", 0, now=2)
    answer(r1, 3, base_offset=0)
    (r2,) = produce_requests(h.poll(3))
    (hdr,) = headers(r2).values()
    assert hdr[3] == 2  # the two records went in one batch
    answer(r2, 4, base_offset=1)
    assert [f.result().offset for f in (first, second, third)] == [0, 1, 2]


def test_an_idempotent_partitions_first_batch_goes_alone() -> None:
    # A broker that does not know the producer on a partition takes any sequence number as
    # its first: a batch sent ahead of the first (which a new topic's leader may refuse with
    # NOT_LEADER_OR_FOLLOWER) would be written before it, and the first never could be
    # (seen on Apache Kafka: OUT_OF_ORDER_SEQUENCE_NUMBER until the delivery timeout).
    h = Harness({"t": [1]}, idempotent=True, batch_size=100)
    h.init_producer_id(0)
    futures = [h.append("t", 0, now=0) for _ in range(4)]
    (first,) = produce_requests(h.poll(1)) + produce_requests(h.poll(1))
    assert headers(first)[T0][2] == 0
    answer(first, 2, errors={T0: NOT_LEADER})
    assert produce_requests(h.poll(3)) == []  # backing off; nothing goes ahead of it
    (retry,) = produce_requests(h.poll(102)) + produce_requests(h.poll(102))
    assert headers(retry)[T0][2] == 0
    answer(retry, 103, base_offset=0)
    ahead = produce_requests(h.poll(104)) + produce_requests(h.poll(104))
    assert [headers(r)[T0][2] for r in ahead] == [1, 2]  # acknowledged: batches go ahead
    for offset, request in enumerate(ahead, start=1):
        answer(request, 105, base_offset=offset)
    (last,) = produce_requests(h.poll(106))
    answer(last, 107, base_offset=3)
    assert [f.result().offset for f in futures] == [0, 1, 2, 3]


def test_batches_sent_ahead_of_a_failed_one_are_retried_after_it_in_order() -> None:
    # An idempotent producer with two batches of T0 in flight (after one acknowledged): the
    # first gets a retriable error, the broker rejects the second as a sequence gap. Both are
    # retried one at a time, with their sequence numbers, and the third batch goes after them.
    h = Harness({"t": [1]}, idempotent=True, batch_size=100)
    h.init_producer_id(0)
    acked = h.append("t", 0, now=0)
    (r0,) = produce_requests(h.poll(0))
    answer(r0, 0, base_offset=10)
    assert acked.result().offset == 10
    futures = [h.append("t", 0, now=0) for _ in range(3)]
    r1, r2 = produce_requests(h.poll(1)) + produce_requests(h.poll(1))
    assert [headers(r)[T0][2] for r in (r1, r2)] == [1, 2]
    assert produce_requests(h.poll(1)) == []  # the third batch is not full
    answer(r1, 2, errors={T0: NOT_LEADER})
    answer(r2, 2, errors={T0: OUT_OF_ORDER})
    assert h.idem.state is IdState.READY  # not a gap of ours: no epoch bump
    assert not any(f.done() for f in futures)
    sequences = []
    now = 102.0
    while not all(f.done() for f in futures):
        requests = produce_requests(h.poll(now))
        assert len(requests) <= 1
        assert produce_requests(h.poll(now)) == []  # retries go alone, the third after them
        for request in requests:
            sequences.append(headers(request)[T0][2])
            answer(request, now, base_offset=10 + len(sequences))
        now += 1
    assert sequences == [1, 2, 3]
    assert [f.result().offset for f in futures] == [11, 12, 13]


def test_retriable_error_backs_off_and_refreshes_metadata() -> None:
    h = Harness()
    future = h.append("t", 0)
    (request,) = produce_requests(h.poll(0))
    version = h.metadata.version
    answer(request, 10, errors={T0: NOT_LEADER})
    assert not future.done()
    assert h.metadata.time_to_next_update(10) == 0  # a refresh was requested
    assert h.metadata.request_update() >= version
    result = h.poll(50)
    assert produce_requests(result) == [] and result.next_poll_ms == 60  # 10 + 100 backoff
    (retry,) = produce_requests(h.poll(110))
    answer(retry, 120, errors={T0: NOT_LEADER})
    assert produce_requests(h.poll(300)) == []  # second backoff: 200 ms
    (third,) = produce_requests(h.poll(320))
    answer(third, 330, base_offset=7)
    assert future.result().offset == 7


def test_a_newer_leader_in_the_produce_answer_takes_the_retry_there_at_once() -> None:
    # KIP-951: NOT_LEADER_OR_FOLLOWER names the new leader (node 2, epoch 1 > 0): the retry
    # goes to node 2 at once, without a Metadata round trip or the retry backoff.
    h = Harness()
    future = h.append("t", 0)
    (request,) = produce_requests(h.poll(0))
    assert request.node_id == 1
    version = h.metadata.version
    answer(request, 10, errors={T0: NOT_LEADER}, leaders={T0: (2, 1)})
    assert h.metadata.cluster.leader_for(T0) == 2
    assert h.metadata.cluster.leader_epoch(T0) == 1
    assert h.metadata.version > version  # a snapshot the producer's routes are told about
    assert h.metadata.time_to_next_update(10) < math.inf  # a refresh is still requested
    assert h.metadata._update_requested
    (retry,) = produce_requests(h.poll(10))
    assert retry.node_id == 2 and sent_partitions(retry) == [T0]
    answer(retry, 20, base_offset=5)
    assert future.result().offset == 5


def test_a_leader_with_an_epoch_not_newer_than_the_cached_one_is_ignored() -> None:
    h = Harness()
    h.append("t", 0)
    (request,) = produce_requests(h.poll(0))
    version = h.metadata.version
    answer(request, 10, errors={T0: NOT_LEADER}, leaders={T0: (2, 0)})  # cached epoch: 0
    assert h.metadata.cluster.leader_for(T0) == 1
    assert h.metadata.version == version
    assert produce_requests(h.poll(10)) == []  # the usual backoff
    (retry,) = produce_requests(h.poll(110))
    assert retry.node_id == 1


def test_a_new_leader_on_a_broker_the_answer_lists_is_taken() -> None:
    h = Harness({"t": [1, 1]})
    h.append("t", 0)
    h.append("t", 1)
    (request,) = produce_requests(h.poll(0))
    # node 4 is not in the metadata: taken only with its NodeEndpoint
    answer(
        request,
        10,
        errors={T0: NOT_LEADER, T1: NOT_LEADER},
        leaders={T0: (4, 1), T1: (5, 1)},
        nodes=(4,),
    )
    cluster = h.metadata.cluster
    assert cluster.leader_for(T0) == 4 and cluster.broker(4) is not None
    assert cluster.leader_for(T1) == 1 and cluster.broker(5) is None  # no endpoint for 5
    (retry,) = produce_requests(h.poll(10))
    assert retry.node_id == 4 and sent_partitions(retry) == [T0]


def test_connection_errors_are_retried() -> None:
    h = Harness()
    future = h.append("t", 0)
    (request,) = produce_requests(h.poll(0))
    request.handler(5, None, KafkaConnectionError("lost"))
    (retry,) = produce_requests(h.poll(105))
    answer(retry, 106)
    assert future.result().offset == 0


def test_non_retriable_error_fails_at_once() -> None:
    # MESSAGE_TOO_LARGE for a batch of one record: nothing to split (test_compression_ratio)
    h = Harness()
    future = h.append("t", 0)
    (request,) = produce_requests(h.poll(0))
    answer(request, 1, errors={T0: MessageTooLargeError.code})
    with pytest.raises(MessageTooLargeError):
        future.result()
    assert h.memory.used == 0


def test_retries_stop_at_the_delivery_timeout() -> None:
    h = Harness(delivery_timeout_ms=31_000, retry_backoff_ms=1000, retry_backoff_max_ms=1000)
    future = h.append("t", 0)
    now = 0.0
    while not future.done():
        requests = produce_requests(h.poll(now))
        for request in requests:
            answer(request, now, errors={T0: NOT_LEADER})
        now += 500
    with pytest.raises(KafkaTimeoutError, match="NOT_LEADER_OR_FOLLOWER") as expired:
        future.result()
    assert 31_000 <= now <= 32_500
    # the broker's last answer is chained, for programs that tell causes apart
    assert isinstance(expired.value.__cause__, NotLeaderOrFollowerError)


def test_queued_batches_expire_without_a_leader() -> None:
    h = Harness({"t": [-1]}, delivery_timeout_ms=31_000)
    future = h.append("t", 0)
    result = h.poll(0)
    assert produce_requests(result) == []
    assert result.next_poll_ms == 31_000
    h.poll(31_000)
    with pytest.raises(KafkaTimeoutError, match="expired"):
        future.result()


def test_abort_fails_queued_and_in_flight_records() -> None:
    h = Harness({"t": [1]})
    in_flight = h.append("t", 0)
    produce_requests(h.poll(0))
    queued = h.append("t", 0, now=1)
    assert h.sender.abort(ProducerClosedError("closed")) == 2
    for future in (in_flight, queued):
        with pytest.raises(ProducerClosedError):
            future.result()
    assert h.memory.used == 0


# -- idempotence -------------------------------------------------------------------------


def test_idempotent_producer_gets_an_id_before_producing() -> None:
    h = Harness(idempotent=True)
    h.append("t", 0)
    result = h.poll(0)
    assert produce_requests(result) == []
    (init,) = result.requests
    assert isinstance(init.request, InitProducerIdRequest) and init.node_id is None
    assert init.request.producer_id == -1 and init.request.transactional_id is None
    assert produce_requests(h.poll(1)) == []  # still waiting for the answer
    init.handler(2, InitProducerIdResponse(producer_id=7, producer_epoch=3), None)
    (request,) = produce_requests(h.poll(3))
    assert headers(request)[T0] == (7, 3, 0, 1)


def test_sequence_numbers_per_partition() -> None:
    h = Harness({"t": [1, 1]}, idempotent=True, batch_size=100)
    h.init_producer_id(0)
    seen = []
    for now in range(1, 10):
        if now < 5:
            for _ in range(2):
                h.append("t", 0, now=now)
            h.append("t", 1, now=now)
        # At most one batch per partition per request: T0's backlog drains after now=4.
        for request in produce_requests(h.poll(now)):
            seen.append(headers(request))
            answer(request, now)
    seq0 = [hdr[T0][2] for hdr in seen if T0 in hdr]
    seq1 = [hdr[T1][2] for hdr in seen if T1 in hdr]
    assert seq0 == [0, 1, 2, 3, 4, 5, 6, 7]  # one record per batch at this batch_size
    assert seq1 == [0, 1, 2, 3]


def test_retry_keeps_its_sequence_and_goes_before_newer_batches() -> None:
    h = Harness({"t": [1]}, idempotent=True, batch_size=100)
    h.init_producer_id(0)
    futures = [h.append("t", 0, now=0) for _ in range(3)]
    (first,) = produce_requests(h.poll(1))
    assert headers(first)[T0][2] == 0
    answer(first, 2, errors={T0: NOT_LEADER})
    assert produce_requests(h.poll(50)) == []  # backing off; newer batches wait behind it
    sequences = []
    now = 102.0
    while not all(f.done() for f in futures):
        for request in produce_requests(h.poll(now)):
            sequences.append(headers(request)[T0][2])
            answer(request, now, base_offset=10 + len(sequences))
        now += 1
    assert sequences == [0, 1, 2]
    assert [f.result().offset for f in futures] == [11, 12, 13]


def test_out_of_order_on_a_later_batch_is_retried() -> None:
    # A lost answer can leave the broker ahead or behind us: OUT_OF_ORDER for a batch that
    # is not the next one to be acknowledged is not a gap of ours, so it is retried.
    h = Harness({"t": [1]}, idempotent=True, batch_size=100)
    h.init_producer_id(0)
    first = h.append("t", 0, now=0)
    second = h.append("t", 0, now=0)
    (r1,) = produce_requests(h.poll(1))
    r1.handler(2, None, KafkaConnectionError("lost"))  # outcome unknown: retried as seq 0
    (r1b,) = produce_requests(h.poll(102))
    answer(r1b, 103, base_offset=0)
    (r2,) = produce_requests(h.poll(104))
    assert headers(r2)[T0][2] == 1
    h.idem._last_acked[T0] = -1  # as if the first ack had been lost
    answer(r2, 105, errors={T0: OUT_OF_ORDER})
    assert not second.done() and h.idem.state is IdState.READY
    h.idem._last_acked[T0] = 0
    (r2b,) = produce_requests(h.poll(300))
    answer(r2b, 301, base_offset=1)
    assert (first.result().offset, second.result().offset) == (0, 1)


def test_out_of_order_on_the_next_batch_fails_it_and_bumps_the_epoch() -> None:
    h = Harness({"t": [1, 1]}, idempotent=True, batch_size=100)
    h.init_producer_id(0, producer_id=7, epoch=0)
    lost = h.append("t", 0, now=0)
    later = h.append("t", 0, now=0)
    other = h.append("t", 1, now=0)
    (r1,) = produce_requests(h.poll(1))  # T0 seq 0 and T1 seq 0
    answer(r1, 3, errors={T0: OUT_OF_ORDER}, base_offset=0)
    with pytest.raises(KafkaError, match="OUT_OF_ORDER_SEQUENCE_NUMBER.*bumped its epoch"):
        lost.result()
    assert other.result().offset == 0
    assert h.idem.state is IdState.BUMP_PENDING
    result = h.poll(4)
    (bump,) = result.requests  # nothing but the bump until the new epoch is known
    assert isinstance(bump.request, InitProducerIdRequest)
    assert (bump.request.producer_id, bump.request.producer_epoch) == (7, 0)
    bump.handler(7, InitProducerIdResponse(producer_id=7, producer_epoch=1), None)
    (resent,) = produce_requests(h.poll(200))
    assert headers(resent)[T0] == (7, 1, 0, 1)  # new epoch, sequences restart at 0
    answer(resent, 201, base_offset=3)
    assert later.result().offset == 3


def test_a_bump_lets_other_partitions_retries_go_first_under_their_old_epoch() -> None:
    h = Harness({"t": [1, 2]}, idempotent=True)
    h.init_producer_id(0, producer_id=7, epoch=0)
    retried = h.append("t", 0, now=0)
    lost = h.append("t", 1, now=0)
    first = {r.node_id: r for r in produce_requests(h.poll(1))}
    assert headers(first[1])[T0] == (7, 0, 0, 1)
    first[1].handler(2, None, KafkaTimeoutError("no answer: the broker may have written it"))
    answer(first[2], 3, errors={T1: OUT_OF_ORDER})  # T1's sequence is lost: bump
    assert lost.done() and h.idem.state is IdState.BUMP_PENDING
    newer = h.append("t", 0, now=4)
    (retry,) = produce_requests(h.poll(200))  # T0's retry first, the bump waits for it
    assert headers(retry) == {T0: (7, 0, 0, 1)}  # as first sent: the broker drops a duplicate
    assert not [r for r in h.poll(201).requests if isinstance(r.request, InitProducerIdRequest)]
    answer(retry, 202, base_offset=5)
    assert retried.result().offset == 5
    (bump,) = h.poll(203).requests
    assert isinstance(bump.request, InitProducerIdRequest)
    bump.handler(204, InitProducerIdResponse(producer_id=7, producer_epoch=1), None)
    (after,) = produce_requests(h.poll(205))
    assert headers(after) == {T0: (7, 1, 0, 1)}  # the newer record: new epoch, sequence 0
    answer(after, 206, base_offset=6)
    assert newer.result().offset == 6


def test_unknown_producer_id_bumps_and_retries_the_batch() -> None:
    h = Harness({"t": [1]}, idempotent=True)
    h.init_producer_id(0, producer_id=7, epoch=4)
    future = h.append("t", 0, now=0)
    (r1,) = produce_requests(h.poll(1))
    answer(r1, 2, errors={T0: UNKNOWN_PRODUCER_ID})
    assert not future.done()
    (bump,) = h.poll(3).requests
    bump.handler(4, InitProducerIdResponse(producer_id=7, producer_epoch=5), None)
    (resent,) = produce_requests(h.poll(200))
    assert headers(resent)[T0] == (7, 5, 0, 1)
    answer(resent, 201)
    assert future.result().offset == 0


def test_expired_sequenced_batch_bumps_the_epoch() -> None:
    h = Harness({"t": [1]}, idempotent=True, delivery_timeout_ms=31_000)
    h.init_producer_id(0)
    future = h.append("t", 0, now=0)
    (r1,) = produce_requests(h.poll(1))
    answer(r1, 31_000, errors={T0: NOT_LEADER})
    with pytest.raises(KafkaTimeoutError):
        future.result()
    assert h.idem.state is IdState.BUMP_PENDING


def test_broker_without_init_producer_id_falls_back() -> None:
    h = Harness(idempotent=True)
    future = h.append("t", 0)
    (init,) = h.poll(0).requests
    init.handler(1, None, UnsupportedVersionError("no InitProducerId"))
    assert h.idem.state is IdState.DISABLED
    (request,) = produce_requests(h.poll(2))
    assert headers(request)[T0][0] == -1  # no producer id
    answer(request, 3)
    assert future.result().offset == 0


def test_without_the_idempotence_it_wanted_a_producer_keeps_one_batch_per_partition() -> None:
    # Idempotence on by default (acks=all) but the broker has no InitProducerId: without
    # sequence numbers a retry could reorder pipelined batches, so none are sent ahead.
    h = Harness({"t": [1]}, idempotent=True, batch_size=100)
    (init,) = h.poll(0).requests
    init.handler(1, None, UnsupportedVersionError("no InitProducerId"))
    for _ in range(3):
        h.append("t", 0)  # full batches
    (first,) = produce_requests(h.poll(2))
    assert produce_requests(h.poll(3)) == []
    assert not h.sender.may_send_full(T0)
    answer(first, 4)
    assert len(produce_requests(h.poll(5))) == 1


def test_required_idempotence_fails_clearly_without_broker_support() -> None:
    h = Harness(idempotent=True, required=True, enable_idempotence=True)
    future = h.append("t", 0)
    (init,) = h.poll(0).requests
    init.handler(1, None, UnsupportedVersionError("no InitProducerId"))
    assert h.idem.state is IdState.FATAL
    h.poll(2)
    with pytest.raises(KafkaError, match="enable_idempotence=True"):
        future.result()


def test_init_producer_id_retries_retriable_errors() -> None:
    h = Harness(idempotent=True)
    (init,) = h.poll(0).requests
    init.handler(1, InitProducerIdResponse(error_code=15), None)  # COORDINATOR_NOT_AVAILABLE
    result = h.poll(2)
    assert result.requests == [] and result.next_poll_ms == 99
    h.init_producer_id(101)
    assert h.idem.state is IdState.READY
