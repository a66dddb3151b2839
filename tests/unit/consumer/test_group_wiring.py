"""The consumer's group wiring without a network: undelivered records (getone batches) do
not count as consumed, revocations rewind them, pattern subscriptions follow metadata, and
background callbacks keep running after one fails."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from kafkaio import Consumer
from kafkaio.consumer.record import ConsumerRecord
from kafkaio.consumer.record_queue import RecordQueue
from kafkaio.consumer.subscription import SubscriptionState
from kafkaio.consumer.topics import SubscribedTopicsManager
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.structs import OffsetAndMetadata

from .fakes import make_metadata, metadata_response

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


def record(tp: TopicPartition, offset: int) -> ConsumerRecord[Any, Any]:
    return ConsumerRecord(tp.topic, tp.partition, offset, 0, 0, None, b"v", (), 3, -1, 1)


def test_record_queue_keeps_partition_order_and_reports_first_pending() -> None:
    queue = RecordQueue()
    queue.extend({A: [record(A, 5), record(A, 6)], B: [record(B, 1)]})
    assert {tp: r.offset for tp, r in queue.first_pending().items()} == {A: 5, B: 1}
    first = queue.pop(frozenset({B}))
    assert first is not None and first.offset == 1
    assert queue.take(1) == {A: [record(A, 5)]}
    assert queue.discard({A}) == {A: record(A, 6)}
    assert len(queue) == 0 and queue.pop() is None


def test_the_iteration_fast_path_sees_what_take_and_discard_leave() -> None:
    # `async for` pops `records` directly: it must stay the one deque of the queue
    queue = RecordQueue()
    records = queue.records
    queue.extend({A: [record(A, 5), record(A, 6)], B: [record(B, 1), record(B, 2)]})
    assert queue.take(1, frozenset({B})) == {B: [record(B, 1)]}
    assert queue.discard({A}) == {A: record(A, 5)}
    assert queue.records is records and list(records) == [record(B, 2)]


def network_turn(consumer: Consumer) -> None:
    """What the network task does first each turn: apply the application's events."""
    consumer._processor.poll(0.0)


def group_consumer() -> Consumer:
    consumer = Consumer("t", bootstrap_servers="localhost:1", group_id="g")
    network_turn(consumer)  # the subscription
    subs = consumer._subscriptions
    subs.assign_from_subscribed([A, B])
    subs.seek(A, 10)  # as if records 0..9 were handed out or collected
    subs.seek(B, 4)
    return consumer


def test_commit_counts_only_records_handed_to_the_application() -> None:
    consumer = group_consumer()
    consumer._pending.extend({A: [record(A, 7), record(A, 8), record(A, 9)]})
    assert consumer._consumed_offsets() == {
        A: OffsetAndMetadata(7, "", 3),
        B: OffsetAndMetadata(4, "", None),
    }
    assert consumer._to_commit({A: 3, B: OffsetAndMetadata(2, "m")}) == {
        A: OffsetAndMetadata(3),
        B: OffsetAndMetadata(2, "m"),
    }


def test_revocation_rewinds_undelivered_records_before_committing() -> None:
    consumer = group_consumer()
    consumer._pending.extend({A: [record(A, 8), record(A, 9)], B: [record(B, 3)]})
    consumer._drop_pending(frozenset({A}))
    network_turn(consumer)  # the seek back to the first undelivered record
    position = consumer._subscriptions.position(A)
    assert position is not None and position.offset == 8  # fetched again if kept
    assert consumer._subscriptions.all_consumed()[A].offset == 8  # what a revoke commits
    assert {tp for tp in consumer._pending.first_pending()} == {B}


def test_pause_rewinds_so_records_come_back_after_resume() -> None:
    consumer = group_consumer()
    consumer._pending.extend({B: [record(B, 2), record(B, 3)]})
    consumer.pause(B)
    assert consumer.paused() == {B} and len(consumer._pending) == 0  # at once, as asked
    network_turn(consumer)
    position = consumer._subscriptions.position(B)
    assert position is not None and position.offset == 2
    assert consumer._subscriptions.paused_partitions() == {B}


async def test_background_callbacks_after_a_failing_one_still_run() -> None:
    consumer = Consumer(bootstrap_servers="localhost:1", group_id="g")
    ran: list[str] = []

    def bad() -> None:
        raise ValueError("first")

    async def good() -> None:
        ran.append("good")

    consumer._background.put_callback(bad)
    consumer._background.put_callback(good)
    consumer._background.put_error(KeyError("second"))
    with pytest.raises(ValueError, match="first"):
        await consumer._run_background()
    assert ran == ["good"]
    with pytest.raises(KeyError):  # later errors stay queued for the next call
        await consumer._run_background()


def test_pattern_subscription_requests_all_topics_and_matches_new_snapshots() -> None:
    subs = SubscriptionState()
    subs.subscribe_pattern("t|other")
    metadata = make_metadata()  # a snapshot of topic "t" only
    manager = SubscribedTopicsManager(subs, metadata, subs.subscription)
    manager.poll(0)
    assert metadata.all_topics
    assert subs.subscription() == frozenset()  # the old snapshot was not an all-topics one
    (request,) = metadata.poll(500).requests
    assert request.request.topics is None  # every topic
    metadata.on_response(501, metadata_response())
    manager.poll(2)
    assert subs.subscription() == {"t"}
    assert metadata.topics == {"t"}
    subs.unsubscribe()
    manager.poll(3)
    assert not metadata.all_topics


async def test_while_unsubscribing_async_for_steps_through_the_consumer() -> None:
    consumer = group_consumer()
    consumer._pending.extend({A: [record(A, 10)]})
    iterator = consumer.__aiter__()
    assert (await iterator.__anext__()).offset == 10  # a record at hand: the fast step
    assert consumer._iteration_gate.open
    consumer.unsubscribe()
    # until it is done each step goes to Consumer.__anext__, which runs the leave first
    assert not consumer._iteration_gate.open


async def test_async_for_takes_records_at_hand_again_once_the_unsubscribe_is_done() -> None:
    consumer = group_consumer()
    consumer._subscriptions.seek(A, 13)  # records 10..12 collected
    consumer._pending.extend({A: [record(A, 10), record(A, 11), record(A, 12)]})
    iterator = consumer.__aiter__()
    assert (await iterator.__anext__()).offset == 10
    unsubscribing = consumer.unsubscribe()
    assert not consumer._iteration_gate.open and len(consumer._pending) == 0
    await unsubscribing  # not started: nothing to leave
    assert consumer._iteration_gate.open
    consumer.subscribe(["t"])  # allowed again
    consumer._pending.extend({A: [record(A, 11), record(A, 12)]})  # collected again
    # the fast step, not Consumer.__anext__ (which would need the network task: not started)
    assert [(await iterator.__anext__()).offset for _ in range(2)] == [11, 12]


async def test_an_unsubscribe_done_after_close_keeps_async_for_off_the_records() -> None:
    consumer = group_consumer()
    unsubscribing = consumer.unsubscribe()
    await consumer.close()
    consumer._pending.extend({A: [record(A, 10)]})
    await unsubscribing
    assert not consumer._iteration_gate.open
    with pytest.raises(StopAsyncIteration):
        await consumer.__aiter__().__anext__()


async def test_a_failed_unsubscribe_still_lets_async_for_take_records_again() -> None:
    consumer = group_consumer()

    async def leave(*args: Any) -> None:
        raise RuntimeError("listener")

    consumer._finish_unsubscribe = leave  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        await consumer.unsubscribe()
    assert consumer._iteration_gate.open


def test_unsubscribe_moves_positions_back_to_the_first_record_not_handed_out() -> None:
    # leaving commits these positions: records collected but not handed out are consumed
    # again under the next subscription, not skipped
    consumer = group_consumer()
    consumer._subscriptions.seek(A, 13)
    consumer._pending.extend({A: [record(A, 11), record(A, 12)], B: [record(B, 4)]})
    consumer.unsubscribe()
    assert len(consumer._pending) == 0
    consumed = consumer._subscriptions.all_consumed()
    assert (consumed[A].offset, consumed[B].offset) == (11, 4)


class Deserializing:
    """A consumer whose async value deserializer waits until released, and a poll of
    A 10..12 and B 4 (collected: positions 13 and 5) stuck in it."""

    def __init__(self) -> None:
        self.inside, self.release = anyio.Event(), anyio.Event()

        async def value(data: bytes | None) -> bytes | None:
            self.inside.set()
            await self.release.wait()
            return data

        self.consumer = consumer = Consumer(
            "t", bootstrap_servers="localhost:1", group_id="g", value_deserializer=value
        )
        network_turn(consumer)
        consumer._subscriptions.assign_from_subscribed([A, B])
        consumer._subscriptions.seek(A, 13)
        consumer._subscriptions.seek(B, 5)
        self.returned: dict[TopicPartition, list[int]] = {}

    async def poll(self) -> None:
        codecs = self.consumer._codecs
        assert codecs is not None
        batches = {A: [record(A, 10), record(A, 11), record(A, 12)], B: [record(B, 4)]}
        for tp, batch in (await self.consumer._deserialize(batches, codecs)).items():
            self.returned[tp] = [r.offset for r in batch]


async def test_records_still_being_deserialized_count_as_not_handed_out() -> None:
    # the poll's records are neither queued nor handed out: a commit counts them as not
    # consumed, and pausing their partition leaves them out and moves its position back
    stuck = Deserializing()
    consumer = stuck.consumer
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(stuck.poll)
        await stuck.inside.wait()
        offsets = consumer._consumed_offsets()
        assert (offsets[A].offset, offsets[B].offset) == (10, 4)
        consumer.pause(A)
        position = consumer._subscriptions.position(A)
        assert position is not None and position.offset == 10  # fetched again on resume
        stuck.release.set()
    assert stuck.returned == {B: [4]}
    assert consumer._consumed_offsets()[B].offset == 5 and not consumer._deserializing


async def test_a_seek_while_records_are_deserialized_leaves_them_out() -> None:
    stuck = Deserializing()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(stuck.poll)
        await stuck.inside.wait()
        stuck.consumer.seek(B, 0)
        stuck.release.set()
    assert stuck.returned == {A: [10, 11, 12]}  # B's record 4 was from before the seek
