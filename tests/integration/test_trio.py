"""The clients on trio (anyio's trio backend) against Apache Kafka: Admin creates a topic, Producer
sends and flushes, Consumer assigns and reads back, close() leaves no task behind."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from kafkaio import Admin, Consumer, NewTopic, Producer, TopicPartition
from kafkaio.testing import BrokerInfo

trio = pytest.importorskip("trio", reason="trio is not installed (it is in the dev extras)")

pytestmark = pytest.mark.integration

PARTITIONS = 3
COUNT = 300


def _run_on_trio(fn: Callable[[], Awaitable[Any]]) -> Any:
    """Run `fn` in a fresh trio event loop (a real one: trio.run under anyio)."""
    return anyio.run(fn, backend="trio")


def _task_count() -> int:
    """Tasks alive in this trio run (the whole tree under the root task)."""
    count = 0
    nurseries = list(trio.lowlevel.current_root_task().child_nurseries)
    while nurseries:
        nursery = nurseries.pop()
        for task in nursery.child_tasks:
            count += 1
            nurseries.extend(task.child_nurseries)
    return count


async def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    async with Admin(bootstrap) as admin:
        results = await admin.create_topics([NewTopic(topic, partitions, 1)])
        assert results[topic].error is None, results[topic].error
        with anyio.fail_after(15):
            while True:
                info = (await admin.describe_topics([topic]))[topic]
                if len(info.partitions) == partitions:
                    break
                await anyio.sleep(0.05)


def test_runs_on_a_real_trio_loop() -> None:
    async def main() -> str:
        import sniffio

        return sniffio.current_async_library()

    assert _run_on_trio(main) == "trio"


def test_admin_producer_consumer_round_trip_on_trio(broker: BrokerInfo, unique_topic: str) -> None:
    bootstrap = broker.bootstrap

    async def main() -> None:
        tasks_before = _task_count()
        with anyio.fail_after(60):
            await _create_topic(bootstrap, unique_topic, PARTITIONS)
            sent: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
            async with Producer(bootstrap, linger_ms=5) as producer:
                futures = []
                for i in range(COUNT):
                    value = f"trio-{i:05d}".encode()
                    fut = await producer.enqueue(
                        unique_topic, value, key=str(i).encode(), partition=i % PARTITIONS
                    )
                    futures.append((value, fut))
                await producer.flush(timeout_ms=30_000)
                for value, fut in futures:
                    assert fut.done()
                    md = fut.result()
                    sent[md.partition].append((md.offset, value))
            tps = [TopicPartition(unique_topic, p) for p in range(PARTITIONS)]
            got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
            async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
                c.assign(tps)
                for tp in tps:
                    c.seek(tp, 0)
                while sum(map(len, got.values())) < COUNT:
                    batch = await c.getmany(timeout_ms=500)
                    for tp, records in batch.items():
                        got[tp.partition].extend((r.offset, r.value) for r in records)
                extra = await c.getmany(timeout_ms=300)
                assert extra == {}
                positions = {tp.partition: await c.position(tp) for tp in tps}
        for p in range(PARTITIONS):
            assert got[p] == sorted(sent[p])
            assert [offset for offset, _ in got[p]] == list(range(len(sent[p])))
            assert positions[p] == len(sent[p])
        assert sum(map(len, sent.values())) == COUNT
        # every client task (network drivers, connection readers) has ended
        assert _task_count() == tasks_before

    _run_on_trio(main)


def test_consumer_iteration_and_close_on_trio(broker: BrokerInfo, unique_topic: str) -> None:
    """`async for` on trio ends cleanly when another task closes the consumer."""
    bootstrap = broker.bootstrap

    async def main() -> None:
        tasks_before = _task_count()
        with anyio.fail_after(60):
            await _create_topic(bootstrap, unique_topic, 1)
            async with Producer(bootstrap) as producer:
                for i in range(5):
                    await producer.send(unique_topic, f"v{i}".encode(), partition=0)
            tp = TopicPartition(unique_topic, 0)
            seen: list[bytes] = []
            consumer = Consumer(bootstrap_servers=bootstrap)
            await consumer.start()
            try:
                consumer.assign([tp])
                consumer.seek(tp, 0)
                async for record in consumer:
                    seen.append(record.value)
                    if len(seen) == 5:
                        break
            finally:
                await consumer.close()
        assert seen == [f"v{i}".encode() for i in range(5)]
        assert _task_count() == tasks_before

    _run_on_trio(main)


def test_group_consumer_runner_on_trio(broker: BrokerInfo, unique_topic: str) -> None:
    """A group member on trio (join, fetch, commit on stop, leave) through ConsumerRunner."""
    from kafkaio.integrations import ConsumerRunner

    bootstrap = broker.bootstrap
    group = f"{unique_topic}-group"

    async def main() -> None:
        tasks_before = _task_count()
        seen: list[bytes] = []
        with anyio.fail_after(60):
            await _create_topic(bootstrap, unique_topic, 2)
            async with Producer(bootstrap) as producer:
                for i in range(6):
                    await producer.send(unique_topic, f"g{i}".encode(), partition=i % 2)
            consumer = Consumer(
                unique_topic,
                bootstrap_servers=bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
            )
            async with ConsumerRunner(consumer, lambda r: seen.append(r.value)) as runner:
                while len(seen) < 6:
                    await anyio.sleep(0.02)
                assert runner.status().healthy
            async with Admin(bootstrap) as admin:
                tps = [TopicPartition(unique_topic, p) for p in range(2)]
                committed = await admin.list_group_offsets(group, tps)
                members = (await admin.describe_groups([group]))[group].members
        assert sorted(seen) == [f"g{i}".encode() for i in range(6)]
        assert {tp.partition: c.offset for tp, c in committed.items()} == {0: 3, 1: 3}
        assert members == ()
        assert _task_count() == tasks_before

    _run_on_trio(main)
