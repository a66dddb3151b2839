"""Faults on three Apache Kafka brokers (replication factor 3, min.insync.replicas 2):
brokers killed with SIGKILL, paused with SIGSTOP, shut down cleanly and restarted, leaders
moved by Kafka's own tools, while kafkaio's producer, consumer and groups work. Acknowledged
records are never lost or duplicated, and reads stay in order.

The ``kafka_cluster`` fixture starts the brokers once per session and runs every broker
again after each test, so a test may kill or pause any of them. The idempotent producer under
a killed leader, a group under a killed coordinator and transactions under a killed
transaction coordinator are in test_apache_faults.py, judged by Java's consumer.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import anyio
import pytest

from kafkaio import Consumer, Producer, TopicPartition
from kafkaio.admin import Admin, ConfigResource, NewTopic
from kafkaio.errors import KafkaTimeoutError, NotEnoughReplicasError
from kafkaio.testing import ApacheKafka, BrokerInfo
from kafkaio.testing.errors import BrokerStartError

pytestmark = pytest.mark.integration

GUARD = 90  # seconds: a scenario taking longer has hung
ELECTION_TOOL = "org.apache.kafka.tools.LeaderElectionCommand"


def _apache(broker: BrokerInfo) -> ApacheKafka:
    assert broker.apache is not None
    return broker.apache


async def _produce(bootstrap: str, topic: str, values: list[bytes], **options: Any) -> list[Any]:
    async with Producer(bootstrap, linger_ms=2, **options) as producer:
        futures = [await producer.enqueue(topic, value, partition=0) for value in values]
        return [await future for future in futures]


async def _read(consumer: Consumer, count: int, seconds: float = 60) -> list[Any]:
    records: list[Any] = []
    with anyio.fail_after(seconds):
        while len(records) < count:
            batch = await consumer.getmany(timeout_ms=500)
            records.extend(r for recs in batch.values() for r in recs)
    return records


async def _read_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        records = await _read(consumer, count)
        extra = await consumer.getmany(timeout_ms=500)
    records.extend(r for recs in extra.values() for r in recs)
    assert [r.offset for r in records] == list(range(len(records)))
    return [r.value for r in records]


async def test_three_brokers_replicate_every_partition_three_times(
    kafka_cluster: BrokerInfo, unique_topic: str
) -> None:
    kafka_cluster.skip_unless("multi_broker")
    await kafka_cluster.create_topic(unique_topic, 3, replication_factor=3)
    states = _apache(kafka_cluster).metadata([unique_topic]).topics[unique_topic]
    assert sorted(states) == [0, 1, 2]
    for state in states.values():
        assert sorted(state.replicas) == [1, 2, 3] and sorted(state.isr) == [1, 2, 3]
    assert len({state.leader for state in states.values()}) == 3  # one leader per broker
    async with Admin(kafka_cluster.bootstrap) as admin:
        cluster = await admin.describe_cluster()
        resource = ConfigResource.topic(unique_topic)
        configs = await admin.describe_configs([resource], keys=["min.insync.replicas"])
    assert sorted(b.node_id for b in cluster.brokers) == [1, 2, 3]
    assert configs[resource].entries["min.insync.replicas"].value == "2"


async def test_consumer_follows_leader_moves_and_a_clean_shutdown(
    kafka_cluster: BrokerInfo, unique_topic: str
) -> None:
    apache = _apache(kafka_cluster)
    await kafka_cluster.create_topic(unique_topic, 1, replication_factor=3)
    tp = TopicPartition(unique_topic, 0)
    batches = [[b"b%d-%03d" % (b, i) for i in range(100)] for b in range(3)]
    with anyio.fail_after(GUARD):
        async with Consumer(
            bootstrap_servers=kafka_cluster.bootstrap, auto_offset_reset="earliest"
        ) as consumer:
            consumer.assign([tp])
            await _produce(kafka_cluster.bootstrap, unique_topic, batches[0])
            got = await _read(consumer, 100)
            first = apache.leader(unique_topic)
            second = next(b for b in apache.broker_ids if b != first)
            await anyio.to_thread.run_sync(apache.move_leader, unique_topic, 0, second)
            await _produce(kafka_cluster.bootstrap, unique_topic, batches[1])
            got += await _read(consumer, 100)
            # a clean shutdown hands the leadership to an in-sync follower first
            await anyio.to_thread.run_sync(apache.shutdown, second)
            third = apache.wait_for_leader(
                unique_topic, among=[b for b in apache.broker_ids if b != second]
            )
            await _produce(kafka_cluster.bootstrap, unique_topic, batches[2])
            got += await _read(consumer, 100)
    assert [r.value for r in got] == batches[0] + batches[1] + batches[2]
    assert [r.offset for r in got] == list(range(300))
    assert len({first, second, third}) >= 2


async def test_a_paused_leader_is_replaced_and_sends_go_on(
    kafka_cluster: BrokerInfo, unique_topic: str
) -> None:
    """SIGSTOP the leader: its connections stay open but nothing answers. The controller
    fences it (broker.session.timeout.ms 3 s) and elects a new leader; the producer's
    requests to the stopped broker time out and are retried on the new leader."""
    apache = _apache(kafka_cluster)
    await kafka_cluster.create_topic(unique_topic, 1, replication_factor=3)
    leader = apache.leader(unique_topic)
    values = [b"v%04d" % i for i in range(200)]
    with anyio.fail_after(GUARD):
        async with Producer(kafka_cluster.bootstrap, linger_ms=2, request_timeout_ms=4000) as p:
            for value in values[:100]:
                await p.send(unique_topic, value, partition=0)
            apache.pause(leader)
            try:
                new = await anyio.to_thread.run_sync(
                    lambda: apache.wait_for_leader(
                        unique_topic, among=[b for b in apache.broker_ids if b != leader]
                    )
                )
                for value in values[100:]:
                    await p.send(unique_topic, value, partition=0)
            finally:
                apache.resume(leader)
        assert new != leader
        assert await _read_all(kafka_cluster.bootstrap, unique_topic, 200) == values


async def test_acks_all_needs_min_insync_replicas_in_sync(
    kafka_cluster: BrokerInfo, unique_topic: str
) -> None:
    """A topic with two replicas (min.insync.replicas 2) whose follower is killed: once
    the leader alone is in sync, acks=all is refused (NOT_ENOUGH_REPLICAS, retried until
    delivery_timeout_ms, then reported), acks=1 still works, and once the follower is back
    in sync acks=all succeeds again. (One broker is killed: two of the three controller
    voters would take the quorum down with them.)"""
    apache = _apache(kafka_cluster)
    await kafka_cluster.create_topic(unique_topic, 1, replication_factor=2)
    state = apache.metadata([unique_topic]).topics[unique_topic][0]
    leader = state.leader
    (follower,) = [b for b in state.replicas if b != leader]
    with anyio.fail_after(GUARD):
        apache.kill(follower)
        await anyio.to_thread.run_sync(_wait_for_isr, apache, unique_topic, [leader])
        async with Producer(
            kafka_cluster.bootstrap,
            linger_ms=0,
            enable_idempotence=False,
            request_timeout_ms=2000,
            delivery_timeout_ms=4000,
        ) as producer:
            with pytest.raises(KafkaTimeoutError, match="NOT_ENOUGH_REPLICAS") as refused:
                await producer.send(unique_topic, b"needs-two", partition=0)
        assert isinstance(refused.value.__cause__, NotEnoughReplicasError)
        one = await _produce(kafka_cluster.bootstrap, unique_topic, [b"one-ack"], acks=1)
        await anyio.to_thread.run_sync(apache.start_broker, follower)
        await anyio.to_thread.run_sync(_wait_for_isr, apache, unique_topic, [leader, follower])
        two = await _produce(kafka_cluster.bootstrap, unique_topic, [b"all-acks"])
    assert one[0].offset + 1 == two[0].offset
    assert await _read_all(kafka_cluster.bootstrap, unique_topic, 2) == [b"one-ack", b"all-acks"]


def _wait_for_isr(apache: ApacheKafka, topic: str, isr: list[int], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while True:
        state = apache.metadata([topic]).topics[topic][0]
        if sorted(state.isr) == sorted(isr):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}-0 has ISR {list(state.isr)}, expected {sorted(isr)}")
        time.sleep(0.1)


async def _elect_unclean(apache: ApacheKafka, topic: str, leader: int) -> None:
    """Elect `leader`, a replica out of sync, with kafka-leader-election (UNCLEAN): retried
    while the controllers regain their quorum and the broker is fenced."""
    args = ("--election-type", "UNCLEAN", "--topic", topic, "--partition", "0")
    with anyio.fail_after(90):
        while apache.leader(topic) != leader:
            with contextlib.suppress(BrokerStartError):
                await anyio.to_thread.run_sync(
                    lambda: apache.run_tool(ELECTION_TOOL, *args, timeout=60)
                )
            await anyio.sleep(0.5)


async def test_a_consumer_resumes_where_an_unclean_leader_s_log_diverges(
    kafka_cluster: BrokerInfo, unique_topic: str
) -> None:
    """OffsetForLeaderEpoch (KIP-320) on Apache Kafka: a log truncated by an unclean leader
    election. Two replicas, min.insync.replicas 1: the follower is paused until it leaves
    the ISR, 20 more records are written to the leader alone, and a group consumes all 40
    and commits offset 40 with the leader's epoch. The leader is killed, the stale follower
    is elected (unclean) and 10 new records take offsets 20-29 in a new epoch. A consumer of
    the group starts from the committed offset and its epoch: it must learn from the new
    leader where that epoch ends (OffsetForLeaderEpoch, or a Fetch answering with the
    diverging epoch) and read from offset 20, the new records. A consumer that dropped the
    committed epoch finds offset 40 out of range and, with auto_offset_reset "latest",
    skips them (this test then fails)."""
    apache = _apache(kafka_cluster)
    leader, follower = apache.broker_ids[:2]
    async with Admin(kafka_cluster.bootstrap) as admin:
        created = await admin.create_topics(
            [
                NewTopic(
                    unique_topic,
                    replica_assignment={0: [leader, follower]},
                    configs={"min.insync.replicas": "1", "unclean.leader.election.enable": "true"},
                )
            ]
        )
    assert created[unique_topic].error is None
    await anyio.to_thread.run_sync(
        lambda: apache.wait_for_leader(unique_topic, among=[leader], timeout=60)
    )
    tp = TopicPartition(unique_topic, 0)
    group = f"diverged-{unique_topic}"
    old = [b"old-%02d" % i for i in range(40)]
    new = [b"new-%02d" % i for i in range(10)]
    options: dict[str, Any] = {
        "group_id": group,
        "auto_offset_reset": "latest",
        "request_timeout_ms": 5000,
    }
    with anyio.fail_after(GUARD * 2):
        await _produce(kafka_cluster.bootstrap, unique_topic, old[:20], acks="all")
        apache.pause(follower)
        try:
            await anyio.to_thread.run_sync(_wait_for_isr, apache, unique_topic, [leader], 60)
            await _produce(kafka_cluster.bootstrap, unique_topic, old[20:], acks="all")
            async with Consumer(bootstrap_servers=kafka_cluster.bootstrap, **options) as first:
                first.assign([tp])
                first.seek(tp, 0)
                got = await _read(first, 40)
                await first.commit()
            await anyio.to_thread.run_sync(apache.kill, leader)
        finally:
            apache.resume(follower)
        await _elect_unclean(apache, unique_topic, follower)
        sent = await _produce(kafka_cluster.bootstrap, unique_topic, new, acks="all")
        async with Consumer(bootstrap_servers=kafka_cluster.bootstrap, **options) as second:
            second.assign([tp])
            after = await _read(second, 10)
            position = await second.position(tp)
    assert [(r.offset, r.value) for r in got] == list(enumerate(old))
    assert [md.offset for md in sent] == list(range(20, 30))
    assert [(r.offset, r.value) for r in after] == list(zip(range(20, 30), new, strict=True))
    assert position == 30
