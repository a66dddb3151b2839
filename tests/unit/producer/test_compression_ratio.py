"""Compressed batches sized by their estimated compressed size (as the Java producer's), and
batches the broker rejects as too large split and sent again: sans-I/O, with a fake clock."""

from __future__ import annotations

import os
from typing import Any

import pytest

from kafkaio.errors import MessageTooLargeError, TopicAuthorizationFailedError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.producer.client import Producer
from kafkaio.producer.compression_ratio import (
    DETERIORATING_STEP,
    ESTIMATION_MARGIN,
    IMPROVING_STEP,
    CompressionRatios,
)
from kafkaio.records import Compression, iter_batches
from kafkaio.records.batch import HEADER_SIZE

from ._helpers import Harness, answer, produce_requests, sent_batches

T0 = TopicPartition("t", 0)


def test_uncompressed_batches_are_batch_size() -> None:
    ratios = CompressionRatios(Compression.NONE, 16384, 1 << 20)
    ratios.observe("t", 16000, 100)  # ignored: nothing is compressed
    assert ratios.batch_limit("t") == 16384
    assert ratios.encoded_size("t", 16000) == 16000


def test_the_estimate_improves_slowly_and_deteriorates_at_once() -> None:
    ratios = CompressionRatios(Compression.LZ4, 16384, 1 << 20)
    first = ratios.batch_limit("t")
    assert first == HEADER_SIZE + int((16384 - HEADER_SIZE) / ESTIMATION_MARGIN)
    ratios.observe("t", 10_000, 1_000)  # compressed 10x better than estimated
    assert ratios.estimate("t") == pytest.approx(1.0 - IMPROVING_STEP)
    assert ratios.estimate("other") == 1.0  # per topic
    for _ in range(300):
        ratios.observe("t", 10_000, 1_000)
    assert ratios.estimate("t") == pytest.approx(0.1)  # never below what was seen
    limit = ratios.batch_limit("t")
    assert limit == HEADER_SIZE + int((16384 - HEADER_SIZE) / (0.1 * ESTIMATION_MARGIN))
    # a request counts such a batch at about batch_size, its estimated compressed size
    assert 16384 * 0.99 <= ratios.encoded_size("t", limit) <= 16384
    assert ratios.encoded_size("other", 5000) == 5000  # no gain estimated: never more
    ratios.observe("t", 10_000, 1_200)  # worse than estimated: up by at least the step
    assert ratios.estimate("t") == pytest.approx(0.1 + DETERIORATING_STEP)
    ratios.observe("t", 10_000, 9_000)  # much worse: straight to what was seen
    assert ratios.estimate("t") == pytest.approx(0.9)
    ratios.reset("t", 0.5)
    assert ratios.estimate("t") == 1.0


def test_the_limit_never_exceeds_the_largest_batch_a_request_carries() -> None:
    ratios = CompressionRatios(Compression.ZSTD, 16384, 100_000)
    for _ in range(400):
        ratios.observe("t", 100_000, 10)
    assert ratios.batch_limit("t") == 100_000


def fill_one_batch(h: Harness, value: bytes) -> int:
    """Append records to T0 until its first queued batch is full; send and ack that batch;
    return its record count."""
    while not h.acc.queued_batches() or not h.acc.queued_batches()[0].closed:
        h.append("t", 0, value)
    count = h.acc.queued_batches()[0].record_count
    (request,) = produce_requests(h.poll(0))
    answer(request, 0)
    return count


def test_compressed_batches_grow_as_the_records_compress_well() -> None:
    h = Harness({"t": [1]}, compression_type="lz4", batch_size=4096, buffer_memory=1 << 24)
    value = b"abc" * 100  # compresses very well
    counts = [fill_one_batch(h, value) for _ in range(60)]
    assert counts[0] == counts[1] < counts[-1]  # the first batches hold about batch_size
    assert counts == sorted(counts)
    assert h.acc.ratios.estimate("t") == pytest.approx(
        1.0 - 60 * IMPROVING_STEP
    )  # one step per batch sent


def test_incompressible_records_keep_batches_at_batch_size() -> None:
    h = Harness({"t": [1]}, compression_type="lz4", batch_size=4096, buffer_memory=1 << 24)
    values = [os.urandom(300) for _ in range(5)]
    counts = [fill_one_batch(h, values[i % 5]) for i in range(20)]
    assert max(counts) <= 14  # 4096 bytes / about 310 per record
    for _, raw in sent_batches_of(h):
        assert len(raw) <= 4096 * 1.1


def sent_batches_of(h: Harness) -> list[tuple[TopicPartition, bytes]]:
    """Send whatever is queued, with every batch closed, and return the batches sent."""
    h.acc.begin_flush()
    out = []
    for request in produce_requests(h.poll(0)):
        out.extend(sent_batches(request))
        answer(request, 0)
    h.acc.end_flush()
    return out


def grown_batch(h: Harness, records: int) -> list:  # type: ignore[type-arg]
    """Teach the estimator that records compress 50x, then queue `records` of them."""
    for _ in range(250):
        h.acc.ratios.observe("t", 50_000, 1_000)
    return [h.append("t", 0, b"%06d" % i + b"x" * 200) for i in range(records)]


@pytest.mark.parametrize("idempotent", [False, True])
def test_a_batch_rejected_as_too_large_is_split_and_sent_again(idempotent: bool) -> None:
    h = Harness(
        {"t": [1]},
        compression_type="zstd",
        batch_size=2048,
        idempotent=idempotent,
        buffer_memory=1 << 24,
    )
    if idempotent:
        h.init_producer_id(0)
    futures = grown_batch(h, 100)
    (request,) = produce_requests(h.poll(1))
    ((_, raw),) = sent_batches(request)
    (big,) = list(iter_batches(raw))
    assert big.record_count == 100  # one batch of ~20 KiB uncompressed, batch_size 2048
    answer(request, 2, errors={T0: MessageTooLargeError.code})
    assert not any(f.done() for f in futures)
    assert h.acc.ratios.estimate("t") == 1.0  # the estimate starts over

    parts = []
    offset = 500
    now = 3.0
    while not all(f.done() for f in futures):
        for request in produce_requests(h.poll(now)):
            ((_, raw),) = sent_batches(request)
            (batch,) = list(iter_batches(raw))
            parts.append(batch)
            answer(request, now, base_offset=offset)
            offset += batch.record_count + 7  # another producer's records in between
        now += 1
    assert len(parts) > 1
    assert all(p.record_count < 100 for p in parts)
    assert [r.value for p in parts for r in p] == [b"%06d" % i + b"x" * 200 for i in range(100)]
    if idempotent:  # the parts carry the big batch's sequence numbers, in order
        starts = [p.base_sequence for p in parts]
        assert starts[0] == 0
        assert starts == [sum(q.record_count for q in parts[:i]) for i in range(len(parts))]
        assert {p.producer_id for p in parts} == {big.producer_id}
    expected = []
    offset = 500
    for p in parts:
        expected.extend(range(offset, offset + p.record_count))
        offset += p.record_count + 7
    assert [f.result().offset for f in futures] == expected
    assert h.memory.used == 0  # reserved memory given back once, at the end
    assert not h.acc.has_incomplete


def test_a_failing_part_fails_only_its_own_records() -> None:
    h = Harness(
        {"t": [1]},
        compression_type="zstd",
        batch_size=2048,
        buffer_memory=1 << 24,
    )
    futures = grown_batch(h, 40)
    (request,) = produce_requests(h.poll(1))
    answer(request, 2, errors={T0: MessageTooLargeError.code})
    requests = produce_requests(h.poll(3))
    (first,) = requests
    answer(first, 4, errors={T0: TopicAuthorizationFailedError.code})  # not retriable
    now = 5.0
    while not all(f.done() for f in futures):
        for request in produce_requests(h.poll(now)):
            answer(request, now, base_offset=100)
        now += 1
    failed = [f for f in futures if f.exception() is not None]
    assert 0 < len(failed) < len(futures)
    assert futures[0] in failed  # the first part carried the first records
    with pytest.raises(TopicAuthorizationFailedError):
        failed[-1].result()
    assert futures[-1].result().offset >= 100
    assert h.memory.used == 0


class _Acks:
    def __init__(self) -> None:
        self.outcomes: list[tuple[int | None, type[BaseException] | None]] = []

    def on_acknowledgement(self, metadata: Any, error: BaseException | None) -> None:
        self.outcomes.append(
            (None if metadata is None else metadata.offset, None if error is None else type(error))
        )


def test_interceptors_hear_each_records_own_outcome_after_a_split() -> None:
    h = Harness({"t": [1]}, compression_type="zstd", batch_size=2048, buffer_memory=1 << 24)
    acks = _Acks()
    producer = Producer("localhost:9092", metrics_enabled=False, interceptors=[acks])
    h.acc.keep_futures = True
    h.sender._on_batch_done = producer._acknowledge  # as the producer wires its Sender
    futures = grown_batch(h, 40)
    (request,) = produce_requests(h.poll(1))
    answer(request, 2, errors={T0: MessageTooLargeError.code})
    (first,) = produce_requests(h.poll(3))
    answer(first, 4, errors={T0: TopicAuthorizationFailedError.code})  # this part fails
    now = 5.0
    while not all(f.done() for f in futures):
        for request in produce_requests(h.poll(now)):
            answer(request, now, base_offset=100)
        now += 1
    expected = [
        (None, type(f.exception())) if f.exception() else (f.result().offset, None) for f in futures
    ]
    assert {e for _, e in expected} == {None, TopicAuthorizationFailedError}
    assert acks.outcomes == expected  # once per record, in order, each with its own outcome


def test_a_batch_within_batch_size_refused_as_too_large_is_halved_until_it_fits() -> None:
    """A topic whose max.message.bytes is below batch_size refuses a batch that is within
    batch_size: splitting by batch_size gave the same batch back, refused again and split
    again until the delivery timeout (and the chain of parents ended in a RecursionError in
    the sender). Halves make progress: every record is delivered, in order, and a record
    too large by itself fails alone."""
    h = Harness({"t": [1]}, batch_size=16384, buffer_memory=1 << 24)
    values = [b"%03d" % i + b"v" * 300 for i in range(10)]
    futures = [h.append("t", 0, v) for v in values]
    futures.append(h.append("t", 0, b"big" + b"x" * 1500))  # too large even alone
    limit = 1000  # the topic's max.message.bytes: 2 of the small records fit
    now, offset, rounds, sent = 1.0, 0, 0, []
    while not all(f.done() for f in futures):
        rounds += 1
        assert rounds < 50, "the split made no progress"
        for request in produce_requests(h.poll(now)):
            ((_, raw),) = sent_batches(request)
            (batch,) = list(iter_batches(raw))
            if len(raw) > limit:
                answer(request, now, errors={T0: MessageTooLargeError.code})
            else:
                sent.extend(r.value for r in batch)
                answer(request, now, base_offset=offset)
                offset += batch.record_count
        now += 1
    assert sent == values
    assert [f.result().offset for f in futures[:10]] == list(range(10))
    with pytest.raises(MessageTooLargeError):
        futures[-1].result()
    assert h.memory.used == 0
