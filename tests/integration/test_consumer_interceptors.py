"""Consumer interceptors through a real broker: on_consume sees every record a poll returns
(getmany and ``async for``) before the application and may drop some; on_commit hears of
commit(), commit_async() and auto-commits, in the application's task; close() at the end."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from kafkaio import Consumer, Producer, TopicPartition
from kafkaio.consumer.interceptors import ConsumerInterceptor
from kafkaio.testing import BrokerInfo

pytestmark = pytest.mark.integration


class Recorder(ConsumerInterceptor):
    def __init__(self) -> None:
        self.consumed: list[int] = []
        self.commits: list[dict[TopicPartition, int]] = []
        self.tasks: set[int] = set()  # where on_consume and on_commit ran
        self.closed = 0

    def on_consume(self, records: dict[TopicPartition, list[Any]]) -> dict[Any, Any]:
        self.tasks.add(anyio.get_current_task().id)
        self.consumed += [r.offset for batch in records.values() for r in batch]
        # drop the "skip" records before the application sees them
        return {tp: [r for r in batch if r.value != b"skip"] for tp, batch in records.items()}

    def on_commit(self, offsets: Any) -> None:
        self.tasks.add(anyio.get_current_task().id)
        self.commits.append({tp: om.offset for tp, om in offsets.items()})

    def close(self) -> None:
        self.closed += 1


@pytest.mark.parametrize("iterate", [False, True], ids=["getmany", "async-for"])
async def test_interceptors_see_polls_and_commits(
    broker: BrokerInfo, unique_topic: str, iterate: bool
) -> None:
    await broker.create_topic(unique_topic, 1)
    tp = TopicPartition(unique_topic, 0)
    values = [b"skip" if i % 3 == 0 else b"v%d" % i for i in range(12)]
    async with Producer(broker.bootstrap) as producer:
        for value in values:
            await producer.send(unique_topic, value, partition=0)
    recorder = Recorder()
    got: list[bytes] = []
    with anyio.fail_after(60):
        async with Consumer(
            bootstrap_servers=broker.bootstrap,
            group_id=f"g-{unique_topic}",
            auto_offset_reset="earliest",
            auto_commit_interval_ms=100,
            interceptors=[recorder],
        ) as consumer:
            consumer.assign([tp])
            if iterate:
                async for record in consumer:
                    got.append(record.value)
                    if len(got) == 8:
                        break
            else:
                while len(got) < 8:
                    for records in (await consumer.getmany(timeout_ms=500)).values():
                        got += [r.value for r in records]
            await consumer.commit({tp: 5})
            await consumer.commit_async({tp: 6})
            while {tp: 12} not in recorder.commits:  # the auto-commit of every position
                await consumer.getmany(timeout_ms=100)
        assert recorder.closed == 1
    assert got == [v for v in values if v != b"skip"]
    assert recorder.consumed == list(range(12))
    assert {tp: 5} in recorder.commits and {tp: 6} in recorder.commits
    assert recorder.tasks == {anyio.get_current_task().id}  # the application's task
