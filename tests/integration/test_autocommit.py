"""Auto-commit commits only what the application received, never records collected ahead,
and assign() and unsubscribe() commit what was consumed before they drop partitions.

`async for` / getone() collect up to max_poll_records at once and hand them out one by one;
a timed auto-commit in between must commit the offset after the last record handed out, or a
crash would skip the records still waiting in the consumer.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from kafkaio import Admin, Consumer, Producer, TopicPartition
from kafkaio.testing import BrokerInfo

pytestmark = pytest.mark.integration


async def _twenty_records_and_a_member(
    broker: BrokerInfo, topic: str, auto_commit_interval_ms: int
) -> Consumer:
    """A one-partition topic with records 0..19, and a consumer subscribed to it in group
    "<topic>-g" (not started)."""
    await broker.create_topic(topic, 1)
    async with Producer(broker.bootstrap) as producer:
        for i in range(20):
            await producer.enqueue(topic, value=b"v%d" % i, partition=0)
        await producer.flush()
    return Consumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=topic + "-g",
        auto_offset_reset="earliest",
        auto_commit_interval_ms=auto_commit_interval_ms,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )


async def _async_for(consumer: Consumer, received: list[int], until: int) -> list[int]:
    """`async for` over the consumer, appending offsets to `received` until it has `until`."""
    with anyio.fail_after(30):
        async for record in consumer:
            received.append(record.offset)
            if len(received) == until:
                break
    return received


async def test_auto_commit_counts_only_records_handed_out(
    broker: BrokerInfo, unique_topic: str
) -> None:
    consumer = await _twenty_records_and_a_member(broker, unique_topic, 100)
    group, tp = unique_topic + "-g", TopicPartition(unique_topic, 0)
    async with Admin(broker.bootstrap) as admin:
        async with consumer:
            received = await _async_for(consumer, [], 5)
            # the consumer has collected all 20 records; only 5 were handed out
            with anyio.fail_after(10):
                while True:
                    committed = (await admin.list_group_offsets(group, [tp]))[tp].offset
                    if committed is not None and committed >= 5:
                        break
                    await anyio.sleep(0.1)
            await anyio.sleep(0.5)  # several more auto-commit intervals
            committed = (await admin.list_group_offsets(group, [tp]))[tp].offset
            assert received == [0, 1, 2, 3, 4]
            assert committed == 5
        committed = (await admin.list_group_offsets(group, [tp]))[tp].offset
        assert committed == 5  # close() commits what was handed out, not what was collected


async def test_assign_commits_what_was_consumed_of_the_partitions_it_drops(
    broker: BrokerInfo, unique_topic: str
) -> None:
    await broker.create_topic(unique_topic, 2)
    async with Producer(broker.bootstrap) as producer:
        for i in range(10):
            await producer.enqueue(unique_topic, value=b"v%d" % i, partition=i % 2)
        await producer.flush()
    group = unique_topic + "-g"
    tp0, tp1 = TopicPartition(unique_topic, 0), TopicPartition(unique_topic, 1)
    consumer = Consumer(
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        auto_commit_interval_ms=60_000,  # no timed commit within the test
    )
    async with Admin(broker.bootstrap) as admin, consumer:
        consumer.assign([tp0, tp1])
        got = 0
        with anyio.fail_after(30):
            while got < 10:
                got += sum(len(v) for v in (await consumer.getmany(timeout_ms=200)).values())
        consumer.assign([tp1])  # tp0 is dropped: what was consumed of it is committed
        with anyio.fail_after(10):
            while (await admin.list_group_offsets(group, [tp0]))[tp0].offset != 5:
                await anyio.sleep(0.05)


async def test_unsubscribe_commits_what_was_handed_out_and_async_for_resumes_there(
    broker: BrokerInfo, unique_topic: str
) -> None:
    """unsubscribe() while `async for` has records collected but not handed out: leaving
    commits the offset after the last record handed out, and `async for` under the next
    subscription hands out the rest, each once, mostly from the records at hand again (the
    step that takes them is back once the unsubscribe is done)."""
    # no timed commit within the test
    consumer = await _twenty_records_and_a_member(broker, unique_topic, 60_000)
    group, tp = unique_topic + "-g", TopicPartition(unique_topic, 0)
    async with Admin(broker.bootstrap) as admin, consumer:
        received = await _async_for(consumer, [], 5)
        assert len(consumer._pending) > 0  # collected ahead, not handed out
        unsubscribing = consumer.unsubscribe()  # not awaited yet, as aiokafka's is called
        assert not consumer._iteration_gate.open  # no record of the subscription from here
        with anyio.fail_after(30):
            await unsubscribing
        assert (await admin.list_group_offsets(group, [tp]))[tp].offset == 5
        assert consumer._iteration_gate.open

        consumer.subscribe([unique_topic])
        through_the_consumer = 0
        step = consumer.__anext__

        async def counted() -> Any:
            nonlocal through_the_consumer
            through_the_consumer += 1
            return await step()

        consumer.__anext__ = counted  # type: ignore[method-assign]
        await _async_for(consumer, received, 20)
        assert received == list(range(20))  # no record lost, none twice
        # the first step collects the records fetched; the next ones take them at hand
        assert through_the_consumer < 15
