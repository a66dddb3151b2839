"""Chaos on a 3-broker librdkafka mock cluster: no record lost, none written twice.

An idempotent Producer sends 20,000 records over 6 partitions while brokers go down and
up, connections drop, leaders move, responses slow down and requests fail with retriable
errors; 3 Consumers (manual assignment of 2 partitions each, offsets committed through a
group_id) read them and are closed and restarted mid-run. The mock's classic groups never
settle with several members (librdkafka bug, see tests/integration/test_consumer_group.py),
so group membership under chaos is exercised on Tansu (test_chaos_tansu.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from kafkaio import Consumer, OffsetAndMetadata, Producer, TopicPartition
from kafkaio.errors import KafkaError
from kafkaio.producer.future import DeliveryFuture
from kafkaio.testing.broker_info import BrokerInfo
from kafkaio.testing.mockcluster import MockCluster
from tests.chaos._ledger import Ledger, value_of

pytestmark = pytest.mark.integration

RECORDS = 20_000
PARTITIONS = 6
BROKERS = (1, 2, 3)
GUARD_S = 90
NOT_LEADER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS = 6, 7, 19
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 15, 16
PRODUCE, FETCH, OFFSET_COMMIT = 0, 1, 8
CONSUMER_OPTIONS: dict[str, Any] = dict(
    enable_auto_commit=False,
    auto_offset_reset="earliest",
    fetch_max_wait_ms=100,
    request_timeout_ms=2000,
    default_api_timeout_ms=3000,
    retry_backoff_ms=20,
    retry_backoff_max_ms=200,
    max_poll_records=500,
)


class Chaos:
    """Injects the fault schedule; knows each partition's leader to name what a fault hurts."""

    def __init__(self, cluster: MockCluster, topic: str, ledger: Ledger) -> None:
        self.cluster = cluster
        self.topic = topic
        self.ledger = ledger
        self.leader = {p: BROKERS[p % 3] for p in range(PARTITIONS)}

    async def call(self, fn: Callable[..., None], *args: Any) -> None:
        await anyio.to_thread.run_sync(fn, *args)

    def led_by(self, broker: int) -> set[int]:
        return {p for p, b in self.leader.items() if b == broker}

    async def inject(self, step: int) -> None:
        c, kinds = self.cluster, 8
        broker = BROKERS[step % 3]
        kind = step % kinds
        if kind == 0:
            await self.call(c.push_request_errors, PRODUCE, [NOT_LEADER] * 3)
            self.ledger.fault("produce_not_leader", range(PARTITIONS))
        elif kind == 1:
            p = step % PARTITIONS
            new = BROKERS[(self.leader[p]) % 3]
            await self.call(c.set_partition_leader, self.topic, p, new)
            self.leader[p] = new
            self.ledger.fault("leader_move", {p})
        elif kind == 2:
            hurt = self.led_by(broker)
            await self.call(c.broker_down, broker)
            await anyio.sleep(0.7)
            await self.call(c.broker_up, broker)
            self.ledger.fault("broker_down_up", hurt)
        elif kind == 3:
            await self.call(c.push_request_errors, FETCH, [NOT_LEADER] * 3)
            self.ledger.fault("fetch_not_leader", range(PARTITIONS))
        elif kind == 4:
            hurt = self.led_by(broker)
            await self.call(c.broker_down, broker)  # drops every connection to it
            await self.call(c.broker_up, broker)
            self.ledger.fault("connection_drop", hurt)
        elif kind == 5:
            await self.call(c.set_rtt, broker, 400)
            await anyio.sleep(1.0)
            await self.call(c.set_rtt, broker, 0)
            self.ledger.fault("slow_broker_400ms", self.led_by(broker))
        elif kind == 6:
            errors = [(NOT_ENOUGH_REPLICAS, 200), (REQUEST_TIMED_OUT, 300)]
            await self.call(c.broker_push_request_error_rtts, broker, PRODUCE, errors)
            self.ledger.fault("produce_error_with_delay", self.led_by(broker))
        else:
            await self.call(
                c.push_request_errors, OFFSET_COMMIT, [COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR]
            )
            self.ledger.fault("commit_coordinator_error", range(PARTITIONS))

    async def run(self, until: anyio.Event, spacing_s: float = 0.3) -> None:
        step = 0
        while not until.is_set():
            await anyio.sleep(spacing_s)
            await self.inject(step)
            step += 1


async def produce(bootstrap: str, topic: str, ledger: Ledger) -> None:
    async with Producer(
        bootstrap,
        linger_ms=5,
        retry_backoff_ms=20,
        retry_backoff_max_ms=200,
        request_timeout_ms=2000,
        delivery_timeout_ms=60_000,
        enable_idempotence=True,
    ) as producer:
        streams = [
            anyio.create_memory_object_stream[DeliveryFuture](RECORDS) for _ in range(PARTITIONS)
        ]

        async def acker(receive: Any) -> None:
            async with receive:
                async for future in receive:
                    try:
                        metadata = await future
                        ledger.ack(metadata.partition)
                    except KafkaError as exc:
                        ledger.produce_errors.append(repr(exc))

        async with anyio.create_task_group() as tg:
            for _send, receive in streams:
                tg.start_soon(acker, receive)
            for i in range(RECORDS):
                p = i % PARTITIONS
                await streams[p][0].send(await producer.enqueue(topic, value_of(i), partition=p))
                if i % 100 == 99:
                    await anyio.sleep(0.05)  # spread the records over the faults
            for send, _receive in streams:
                await send.aclose()


async def member(
    index: int, bootstrap: str, topic: str, group: str, ledger: Ledger, done: anyio.Event
) -> None:
    """Reads its 2 partitions, commits after every batch, and restarts every few seconds
    (every other time without committing its last batch, like a crash)."""
    tps = [TopicPartition(topic, p) for p in range(index * 2, index * 2 + 2)]
    committed = dict.fromkeys(tps, 0)
    lifetime = 2.5 + index * 0.9
    generation = 0
    while not done.is_set():
        generation += 1
        crash = generation % 2 == 0  # every other life ends without committing its last batch
        consumer = Consumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=f"chaos-{index}",
            **CONSUMER_OPTIONS,
        )
        position = dict(committed)
        try:
            await consumer.start()
            consumer.assign(tps)
            restart_at = time.monotonic() + lifetime
            while not done.is_set():
                last = time.monotonic() >= restart_at
                if last and not crash:
                    break
                batch = await consumer.getmany(timeout_ms=200)
                for tp, records in batch.items():
                    for r in records:
                        ledger.consume(r.partition, r.offset, r.value)
                        position[tp] = r.offset + 1
                if len(ledger.consumed) == RECORDS:
                    done.set()
                if last:
                    break  # a "crash": this batch is read but never committed
                if batch:
                    offsets = {tp: OffsetAndMetadata(position[tp]) for tp in batch}
                    try:
                        await consumer.commit(offsets, timeout_ms=1500)
                        committed.update({tp: position[tp] for tp in batch})
                    except KafkaError:
                        pass  # a fault: these records stay in the uncommitted window
        except KafkaError:
            pass  # start() during a broker outage: try again
        finally:
            await consumer.close()
        ledger.uncommitted_window += sum(position[tp] - committed[tp] for tp in tps)
        if not done.is_set():
            ledger.restarts += 1


async def test_idempotent_producer_and_restarting_consumers_under_faults(
    isolated_mock_cluster: BrokerInfo, unique_topic: str
) -> None:
    cluster = isolated_mock_cluster.cluster
    assert cluster is not None
    bootstrap = isolated_mock_cluster.bootstrap
    cluster.create_topic(unique_topic, PARTITIONS, 3)
    ledger = Ledger(PARTITIONS)
    chaos = Chaos(cluster, unique_topic, ledger)
    for p, b in chaos.leader.items():
        cluster.set_partition_leader(unique_topic, p, b)
    produced = anyio.Event()
    consumed = anyio.Event()

    async def producer_task() -> None:
        try:
            await produce(bootstrap, unique_topic, ledger)
        finally:
            produced.set()

    with anyio.fail_after(GUARD_S):
        async with anyio.create_task_group() as tg:
            tg.start_soon(producer_task)
            tg.start_soon(chaos.run, produced)
            for i in range(3):
                tg.start_soon(member, i, bootstrap, unique_topic, "chaos-g", ledger, consumed)
    summary = ledger.summary(RECORDS)
    print("\nchaos-mock", json.dumps(summary))
    assert ledger.produce_errors == []
    assert summary["acked"] == RECORDS
    assert summary["lost"] == 0
    assert summary["producer_duplicates"] == 0
    assert summary["consumer_duplicates"] <= ledger.uncommitted_window
    assert len(ledger.faults) >= 8 and ledger.restarts >= 3
