"""RecordAccumulator with a fake clock: readiness, draining per broker, expiry, retries."""

from __future__ import annotations

import math
from typing import Any

import pytest

from kafkaio.metadata.cluster import TopicPartition
from kafkaio.producer.accumulator import RecordAccumulator
from kafkaio.producer.appender import RecordAppender, TopicRoute
from kafkaio.producer.batch import ProducerBatch
from kafkaio.producer.future import DeliveryFuture
from kafkaio.producer.memory import MemoryBudget
from kafkaio.producer.partitioner import DefaultPartitioner
from kafkaio.records import Compression

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
T2 = TopicPartition("t", 2)
LEADERS = {T0: 1, T1: 1, T2: 2}


def make(
    batch_size: int = 1000,
    linger_ms: float = 10,
    memory: int = 1 << 20,
    growth: int = 1,
    **options: Any,
) -> RecordAccumulator:
    """An accumulator whose batches hold exactly ``batch_size`` bytes (``growth`` 1; the
    growth of full batches has its own tests below)."""
    return RecordAccumulator(
        batch_size=batch_size,
        compression=Compression.NONE,
        linger_ms=linger_ms,
        delivery_timeout_ms=5000,
        memory=MemoryBudget(memory),
        growth=growth,
        **options,
    )


def add(acc: RecordAccumulator, tp: TopicPartition, now: float, value: bytes = b"x" * 50) -> None:
    acc.memory.used += 10
    acc.append(tp, 1, None, value, None, now, 10)


def test_not_ready_before_linger_then_ready() -> None:
    acc = make(linger_ms=10)
    add(acc, T0, now=100)
    ready, wait, unknown = acc.ready(105, LEADERS.get)
    assert ready == {} and wait == 5 and not unknown
    ready, wait, _ = acc.ready(110, LEADERS.get)
    assert ready == {1: [T0]}


def test_full_batch_is_ready_at_once() -> None:
    acc = make(batch_size=200, linger_ms=1000)
    add(acc, T0, now=0)
    assert acc.ready(0, LEADERS.get)[0] == {}
    add(acc, T0, now=0)
    add(acc, T0, now=0)  # 61-byte header + 3 records of ~55 bytes > 200
    assert acc.ready(0, LEADERS.get)[0] == {1: [T0]}


def test_flush_closing_and_memory_waiters_make_batches_ready() -> None:
    acc = make(linger_ms=1000)
    add(acc, T0, now=0)
    assert acc.ready(1, LEADERS.get)[0] == {}
    acc.begin_flush()
    assert acc.ready(1, LEADERS.get)[0] == {1: [T0]}
    acc.end_flush()
    acc.memory.waiters = 1
    assert acc.ready(1, LEADERS.get)[0] == {1: [T0]}
    acc.memory.waiters = 0
    acc.closing = True
    assert acc.ready(1, LEADERS.get)[0] == {1: [T0]}


def test_unknown_leader_is_reported() -> None:
    acc = make(linger_ms=0)
    add(acc, TopicPartition("other", 0), now=0)
    ready, wait, unknown = acc.ready(0, LEADERS.get)
    assert ready == {} and unknown and wait == math.inf


def test_drain_groups_by_leader_and_takes_one_batch_per_partition() -> None:
    acc = make(batch_size=200, linger_ms=0)  # two records per batch
    for tp in (T0, T0, T1, T2):
        for _ in range(2):
            add(acc, tp, now=0)
    ready, _, _ = acc.ready(0, LEADERS.get)
    assert ready == {1: [T0, T1], 2: [T2]}
    drained = acc.drain(1, ready[1], 1 << 20, 0, lambda b: True)
    assert sorted(b.tp for b in drained) == [T0, T1]
    assert all(b.closed for b in drained)
    assert [b.tp for b in acc.drain(2, ready[2], 1 << 20, 0, lambda b: True)] == [T2]
    # T0 had two batches: the second is still queued.
    assert [(b.tp, b.record_count) for b in acc.queued_batches()] == [(T0, 2)]


def test_drain_respects_max_request_size_and_rotates() -> None:
    acc = make(linger_ms=0)
    for tp in (T0, T1):
        add(acc, tp, now=0)
    one = acc.queued_batches()[0].size_in_bytes()
    limit = 128 + one + 16 + 10  # room for one batch only
    first = acc.drain(1, [T0, T1], limit, 0, lambda b: True)
    second = acc.drain(1, [T0, T1], limit, 0, lambda b: True)
    assert len(first) == 1 and len(second) == 1
    assert {first[0].tp, second[0].tp} == {T0, T1}


def test_a_batch_larger_than_the_limit_still_goes_alone() -> None:
    acc = make(linger_ms=0)
    add(acc, T0, now=0, value=b"x" * 5000)
    drained = acc.drain(1, [T0], 1000, 0, lambda b: True)
    assert len(drained) == 1


def test_drain_skips_held_and_backing_off_partitions() -> None:
    acc = make(linger_ms=0)
    add(acc, T0, now=0)
    add(acc, T1, now=0)
    held = acc.drain(1, [T0, T1], 1 << 20, 0, lambda b: b.tp != T0)
    assert [b.tp for b in held] == [T1]
    retry = held[0]
    acc.reenqueue(retry, retry_at_ms=50)
    assert acc.drain(1, [T1], 1 << 20, 49, lambda b: True) == []
    assert acc.ready(49, LEADERS.get)[1] == 1  # T1 becomes ready at 50
    assert acc.drain(1, [T1], 1 << 20, 50, lambda b: True) == [retry]


def test_reenqueue_keeps_sequence_order_ahead_of_new_batches() -> None:
    acc = make(batch_size=100, linger_ms=0)
    for _ in range(4):
        add(acc, T0, now=0)
    batches: list[ProducerBatch] = []
    for seq in range(3):
        (batch,) = acc.drain(1, [T0], 1 << 20, 0, lambda b: True)
        batch.set_producer_state(1, 0, seq * 10)
        batches.append(batch)
    acc.reenqueue(batches[2], 0)
    acc.reenqueue(batches[0], 0)
    acc.reenqueue(batches[1], 0)
    queued = acc.queued_batches()
    assert [b.base_sequence for b in queued] == [0, 10, 20, -1]


def test_expire_fails_old_batches_only() -> None:
    acc = make(linger_ms=10_000)
    add(acc, T0, now=0)
    add(acc, T1, now=3000)
    assert acc.next_deadline_ms() == 5000
    assert acc.expire(4999) == []
    expired = acc.expire(5000)
    assert [b.tp for b in expired] == [T0]
    assert acc.next_deadline_ms() == 8000


def test_memory_is_released_when_a_batch_completes() -> None:
    acc = make(linger_ms=0)
    for _ in range(3):
        add(acc, T0, now=0)
    assert acc.memory.used == 30
    (batch,) = acc.drain(1, [T0], 1 << 20, 0, lambda b: True)
    assert acc.has_incomplete
    batch.complete(0, -1)
    acc.deallocate(batch)
    acc.deallocate(batch)  # twice is harmless
    assert acc.memory.used == 0 and not acc.has_incomplete


def test_fast_appends_fill_the_open_batch_and_completion_frees_it() -> None:
    import gc

    gc.collect()
    gc.disable()
    try:
        _fill_complete_and_drop()
        assert gc.collect() == 0  # nothing was left in a reference cycle
    finally:
        gc.enable()


def _fill_complete_and_drop() -> None:
    acc = make(batch_size=400, clock=lambda: 0.0)  # growth 1: a batch closes when full
    added: list[tuple[TopicPartition, bool, bool]] = []
    appender = RecordAppender(
        acc,
        DefaultPartitioner(400),
        1 << 20,
        True,
        lambda tp, new, full: added.append((tp, new, full)),
        _no_general,
    )
    assert appender.append("t", b"v", b"k", None, None, 1) is None  # no route: general path
    appender.routes["t"] = TopicRoute("t", 1, [0], [0])
    first = appender.append("t", b"a" * 50, b"k", None, None, 1)
    assert first is not None and not first.batch_closed
    assert added == [(T0, True, False)]  # a new batch: the network task learns its linger
    second = appender.append("t", b"b" * 50, b"k", None, None, 2)
    assert second is not None and not second.batch_closed and len(added) == 1
    while not first.batch_closed:
        last = appender.append("t", b"c" * 50, b"k", None, None, 3)
        assert last is not None
    # the batch filled up: the record that did not fit went to a new batch, and the full
    # one is ready (the network task is told)
    assert added[1:] == [(T0, True, True)] and not last.batch_closed
    batch, _ = acc.queued_batches()
    assert acc.drain(1, [T0], 1 << 20, 0.0, lambda b: True) == [batch]
    count = batch.record_count
    used = acc.memory.used
    assert batch.complete(100, -1)
    acc.deallocate(batch)
    assert (second.result().offset, second.result().serialized_key_size) == (101, 1)
    assert batch.record_count == count and acc.memory.used == used - batch.reserved_bytes
    # without acknowledgement interceptors a batch does not list its futures: once the
    # application drops them, the batch (and its buffer) goes without the cyclic GC
    assert batch.futures == []


def _no_general(*args: object) -> DeliveryFuture:
    raise AssertionError("the general path is not used here")


def test_a_full_batch_grows_until_drained_up_to_growth_times_its_size() -> None:
    acc = make(batch_size=1000, growth=4)
    add(acc, T0, now=0)
    (batch,) = acc.queued_batches()
    while batch.size_in_bytes() < 1000:
        assert not batch.full and acc.ready(0, LEADERS.get)[0] == {}  # lingers
        add(acc, T0, now=0)
    assert batch.full and not batch.closed
    assert acc.ready(0, LEADERS.get)[0] == {1: [T0]}  # ready at once, and still taking records
    while len(acc.queued_batches()) == 1:
        add(acc, T0, now=0)
    first, second = acc.queued_batches()
    assert first is batch and first.closed and second.record_count == 1
    assert 4000 - 60 < first.size_in_bytes() <= 4000  # grown to 4x batch_size
    # drained, a batch takes no more records: the next go to the batch behind it
    assert acc.drain(1, [T0], 1 << 20, 0, lambda b: True) == [first]
    add(acc, T0, now=0)
    assert second.record_count == 2 and first.closed


def test_a_batch_grows_no_further_than_a_request_carries() -> None:
    acc = make(batch_size=1000, growth=4, max_request_size=2000)
    assert acc.capacity("t", 1000) == 2000 - 128 - 16
    assert acc.capacity("t", 5000) == 5000  # a limit above it is kept


def test_a_topic_whose_grown_batch_was_refused_as_too_large_grows_no_more() -> None:
    acc = make(batch_size=1000, growth=4)
    other = TopicPartition("u", 0)
    while len(acc.queued_batches()) < 2:
        add(acc, T0, now=0)
    grown = acc.queued_batches()[0]
    (drained,) = acc.drain(1, [T0], 1 << 20, 0, lambda b: True)
    assert drained is grown and grown.size_in_bytes() > 1000
    parts = acc.split(grown, 0)  # MESSAGE_TOO_LARGE
    assert all(p.size_in_bytes() <= 1000 for p in parts)
    assert acc.capacity("t", 1000) == 1000 and acc.capacity("u", 1000) == 4000
    acc2_batches_before = len(acc.queued_batches())
    for _ in range(40):
        add(acc, other, now=0)
    assert len([b for b in acc.queued_batches() if b.tp == other]) == 1  # u still grows
    assert len(acc.queued_batches()) == acc2_batches_before + 1


def test_growth_must_be_at_least_one() -> None:
    with pytest.raises(ValueError, match="growth must be at least 1"):
        make(growth=0)
