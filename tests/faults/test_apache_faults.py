"""Brokers die under kafkaio's clients: a 3-broker Apache Kafka cluster (replication factor
3, min.insync.replicas 2) loses the leader, the group coordinator or the transaction
coordinator mid-stream, and what reaches the log is judged by Apache Kafka's Java consumer.

Each test prints one ``FIGURES`` line (run with ``-s`` to see it): docs/reliability.md
quotes them.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
import pytest

from kafkaio import Consumer, Producer, TopicPartition
from kafkaio.admin import Admin
from kafkaio.errors import KafkaError
from kafkaio.net.config import ConnectionConfig
from kafkaio.net.connection import Connection
from kafkaio.protocol.messages import FindCoordinatorRequest
from kafkaio.testing import BrokerInfo
from kafkaio.testing.apache import ApacheKafka
from kafkaio.testing.java import JavaClients

pytestmark = pytest.mark.integration

GROUP_KEY, TRANSACTION_KEY = 0, 1


def _cluster(broker: BrokerInfo) -> ApacheKafka:
    assert broker.apache is not None
    return broker.apache


async def find_coordinator(cluster: ApacheKafka, key: str, key_type: int) -> int:
    """The broker id coordinating `key` (a group or a transactional id), asked of a live
    broker until one answers."""
    with anyio.fail_after(60):
        while True:
            for node in cluster.nodes.values():
                if not node.running or node.paused:
                    continue
                try:
                    conn = await Connection.connect("127.0.0.1", node.port, ConnectionConfig())
                except KafkaError:
                    continue
                try:
                    response = await conn.send(
                        FindCoordinatorRequest(key=key, key_type=key_type, coordinator_keys=[key])
                    )
                finally:
                    await conn.close()
                entries = [(c.error_code, c.node_id) for c in response.coordinators] or [
                    (response.error_code, response.node_id)
                ]
                code, node_id = entries[0]
                if code == 0 and node_id >= 0:
                    return int(node_id)
            await anyio.sleep(0.2)


async def _stop_and_restart(
    cluster: ApacheKafka, broker_id: int, down_s: float, note: dict[str, float]
) -> None:
    """kill -9 `broker_id`, keep it down `down_s` seconds, start it again."""
    began = time.monotonic()
    await anyio.to_thread.run_sync(cluster.kill, broker_id)
    note["killed_at_s"] = began
    await anyio.sleep(down_s)
    await anyio.to_thread.run_sync(cluster.start_broker, broker_id)
    note["down_s"] = time.monotonic() - began


# -- idempotent producer, leader killed ----------------------------------------------------


async def test_idempotent_producer_loses_and_duplicates_nothing_when_the_leader_dies(
    kafka_cluster: BrokerInfo, java_clients: JavaClients, unique_topic: str
) -> None:
    cluster = _cluster(kafka_cluster)
    partitions, total, keys = 6, 200_000, 100
    await kafka_cluster.create_topic(unique_topic, partitions=partitions, replication_factor=3)
    victim = cluster.leader(unique_topic, 0)
    led = [p for p in range(partitions) if cluster.leader(unique_topic, p) == victim]
    note: dict[str, float] = {}
    sent = 0
    failed: list[BaseException] = []

    async def produce() -> None:
        nonlocal sent
        async with Producer(
            kafka_cluster.bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            request_timeout_ms=5000,
        ) as producer:
            futures = []
            for i in range(total):
                key = b"key-%03d" % (i % keys)
                futures.append(await producer.enqueue(unique_topic, b"%d" % i, key=key))
                sent = i + 1
                if i % 20_000 == 19_999:
                    await anyio.sleep(0.05)
            await producer.flush()
            for future in futures:
                error = future.exception()
                if error is not None:
                    failed.append(error)

    began = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        with anyio.fail_after(120):
            while sent < total // 4:
                await anyio.sleep(0.01)
        await _stop_and_restart(cluster, victim, 5.0, note)
    elapsed = time.monotonic() - began
    assert failed == []
    records = await anyio.to_thread.run_sync(
        lambda: java_clients.read_all(
            kafka_cluster.bootstrap, unique_topic, expect=total, idle_ms=5000, timeout=300
        )
    )
    values = Counter(r.value for r in records)
    duplicated = sum(n - 1 for n in values.values() if n > 1)
    lost = total - len(values)
    per_key: dict[bytes | None, list[int]] = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        assert r.value is not None
        per_key.setdefault(r.key, []).append(int(r.value))
    out_of_order = [k for k, seq in per_key.items() if seq != sorted(seq)]
    print(
        f"FIGURES idempotent-leader-kill: {total} records, {keys} keys, {partitions} "
        f"partitions (broker {victim} led {led}), killed after {total // 4} sent, down "
        f"{note['down_s']:.1f} s, {elapsed:.1f} s in all ({total / elapsed:,.0f} msg/s): "
        f"lost {lost}, duplicated {duplicated}, keys out of order {len(out_of_order)}"
    )
    assert (lost, duplicated, out_of_order) == (0, 0, [])
    assert len(records) == total


# -- a consumer group, coordinator killed ---------------------------------------------------


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_a_group_keeps_consuming_when_its_coordinator_dies(
    kafka_cluster: BrokerInfo, unique_topic: str, protocol: str
) -> None:
    cluster = _cluster(kafka_cluster)
    partitions, total = 6, 30_000
    await kafka_cluster.create_topic(unique_topic, partitions=partitions, replication_factor=3)
    group = f"survivor-{unique_topic}"
    consumed: list[tuple[str, int, int]] = []
    assigned: dict[str, int] = {}
    stop = anyio.Event()
    note: dict[str, float] = {}

    async def member(name: str) -> None:
        async with Consumer(
            bootstrap_servers=kafka_cluster.bootstrap,
            group_id=group,
            group_protocol=protocol,
            auto_offset_reset="earliest",
            session_timeout_ms=10_000,
            request_timeout_ms=5000,
        ) as consumer:
            consumer.subscribe([unique_topic])
            while not stop.is_set():
                for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                    consumed.extend((name, tp.partition, r.offset) for r in records)
                assigned[name] = len(consumer.assignment())

    async def produce() -> None:
        async with Producer(kafka_cluster.bootstrap, acks="all", linger_ms=5) as producer:
            for i in range(total):
                await producer.enqueue(unique_topic, b"%d" % i, key=b"k%d" % i)
                if i % 1000 == 999:
                    await anyio.sleep(0.1)  # about 3 s of production
            await producer.flush()

    async with anyio.create_task_group() as tg:
        tg.start_soon(member, "m1")
        tg.start_soon(member, "m2")
        with anyio.fail_after(60):
            while sum(assigned.values()) < partitions or len(assigned) < 2:
                await anyio.sleep(0.1)
        tg.start_soon(produce)
        coordinator = await find_coordinator(cluster, group, GROUP_KEY)
        await anyio.sleep(1.0)
        before_kill = len(consumed)
        tg.start_soon(_stop_and_restart, cluster, coordinator, 8.0, note)
        with anyio.fail_after(120):
            while len({(p, o) for _, p, o in consumed}) < total:
                await anyio.sleep(0.05)
        all_consumed_s = time.monotonic() - note["killed_at_s"]
        while "down_s" not in note:  # the broker is still restarting
            await anyio.sleep(0.1)
        async with Admin(kafka_cluster.bootstrap) as admin:
            with anyio.fail_after(60):
                while True:
                    described = (await admin.describe_groups([group]))[group]
                    if described.state.lower() == "stable" and len(described.members) == 2:
                        break
                    await anyio.sleep(0.2)
        stop.set()
    counts = Counter((p, o) for _, p, o in consumed)
    redelivered = sum(n - 1 for n in counts.values())
    print(
        f"FIGURES group-coordinator-kill ({protocol}): {total} records, coordinator broker "
        f"{coordinator} killed after {before_kill} records were consumed, down "
        f"{note['down_s']:.1f} s; every record consumed {all_consumed_s:.1f} s after the "
        f"kill; redelivered {redelivered} (at-least-once)"
    )
    assert len(counts) == total
    assert {name for name, *_ in consumed} == {"m1", "m2"}


# -- members join and leave while a broker is down and records keep coming ---------------


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_members_come_and_go_while_a_broker_is_down_and_records_keep_coming(
    kafka_cluster: BrokerInfo, unique_topic: str, protocol: str
) -> None:
    """A group rebalances twice while a partition leader (not the coordinator) is dead and
    records keep being produced: a second member subscribes, then the first leaves and a
    third subscribes; then the broker comes back. Every acknowledged record is consumed (at
    least once) and the offsets the members commit end at each partition's end."""
    cluster = _cluster(kafka_cluster)
    partitions = 6
    await kafka_cluster.create_topic(unique_topic, partitions=partitions, replication_factor=3)
    group = f"churn-{unique_topic}"
    consumed: list[tuple[str, int, int]] = []
    assigned: dict[str, int] = {}
    stops = {name: anyio.Event() for name in ("m1", "m2", "m3")}
    churned = anyio.Event()
    acked: list[tuple[int, int]] = []
    produced = [0]
    note: dict[str, float] = {}

    async def member(name: str) -> None:
        async with Consumer(
            bootstrap_servers=kafka_cluster.bootstrap,
            group_id=group,
            group_protocol=protocol,
            auto_offset_reset="earliest",
            session_timeout_ms=10_000,
            request_timeout_ms=5000,
        ) as consumer:
            consumer.subscribe([unique_topic])
            while not stops[name].is_set():
                for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                    consumed.extend((name, tp.partition, r.offset) for r in records)
                assigned[name] = len(consumer.assignment())
        assigned.pop(name, None)  # closed: it committed and left the group

    async def produce() -> None:
        """200 records every 0.1 s until the members are done coming and going."""
        async with Producer(
            kafka_cluster.bootstrap, acks="all", linger_ms=5, request_timeout_ms=5000
        ) as producer:
            futures = []
            while not churned.is_set() and len(futures) < 200_000:
                for _ in range(200):
                    i = len(futures)
                    futures.append(await producer.enqueue(unique_topic, b"%d" % i, key=b"k%d" % i))
                produced[0] = len(futures)
                await anyio.sleep(0.1)
            await producer.flush()
            acked.extend((md.partition, md.offset) for md in [f.result() for f in futures])

    def owners() -> int:
        return sum(assigned.values())

    async def settle(members: set[str], label: str) -> None:
        """Wait until exactly `members` share every partition, each some."""
        with anyio.fail_after(60):
            while set(assigned) != members or owners() != partitions or not all(assigned.values()):
                await anyio.sleep(0.05)
        note[f"{label}_s"] = time.monotonic() - note["killed_at"]
        note[f"{label}_produced"] = produced[0]

    async with anyio.create_task_group() as tg:
        tg.start_soon(member, "m1")
        with anyio.fail_after(60):
            while owners() < partitions:
                await anyio.sleep(0.1)
        tg.start_soon(produce)
        coordinator = await find_coordinator(cluster, group, GROUP_KEY)
        victim = next(
            b
            for b in (cluster.leader(unique_topic, p) for p in range(partitions))
            if b != coordinator
        )
        with anyio.fail_after(60):
            while produced[0] < 5000:
                await anyio.sleep(0.05)
        await anyio.to_thread.run_sync(cluster.kill, victim)
        note["killed_at"] = time.monotonic()
        note["kill_produced"] = produced[0]
        tg.start_soon(member, "m2")  # joins while the broker is down
        await settle({"m1", "m2"}, "m2")
        stops["m1"].set()  # leaves
        tg.start_soon(member, "m3")  # joins
        await settle({"m2", "m3"}, "m3")
        churned.set()
        await anyio.to_thread.run_sync(cluster.start_broker, victim)
        note["down_s"] = time.monotonic() - note["killed_at"]
        with anyio.fail_after(120):
            while not acked or len({(p, o) for _, p, o in consumed}) < len(acked):
                await anyio.sleep(0.05)
        note["all_consumed_s"] = time.monotonic() - note["killed_at"]
        stops["m2"].set()
        stops["m3"].set()
    ends = Counter(p for p, _ in acked)
    async with Admin(kafka_cluster.bootstrap) as admin:
        committed = await admin.list_group_offsets(group)
    counts = Counter((p, o) for _, p, o in consumed)
    redelivered = sum(n - 1 for n in counts.values())
    by_member = Counter(name for name, *_ in consumed)
    print(
        f"FIGURES group-churn-broker-kill ({protocol}): {len(acked)} records; broker "
        f"{victim} (a leader, not coordinator {coordinator}) killed at "
        f"{note['kill_produced']:.0f} produced; m2 joined (assigned {note['m2_s']:.1f} s "
        f"after the kill, {note['m2_produced']:.0f} produced), m1 left and m3 joined "
        f"(settled at {note['m3_s']:.1f} s, {note['m3_produced']:.0f} produced); broker back "
        f"{note['down_s']:.1f} s after the kill; every record consumed "
        f"{note['all_consumed_s']:.1f} s after the kill; per member "
        f"{dict(sorted(by_member.items()))}; redelivered {redelivered} (at-least-once)"
    )
    # records kept coming while each rebalance ran
    assert note["kill_produced"] < note["m2_produced"] < note["m3_produced"] <= len(acked)
    assert set(counts) == set(acked)  # every acknowledged record, nothing else
    assert set(by_member) == {"m1", "m2", "m3"}
    assert {tp.partition: c.offset for tp, c in committed.items()} == {
        p: max(o for q, o in acked if q == p) + 1 for p in ends
    }


# -- consume-transform-produce, transaction coordinator killed -----------------------------


async def _transform(
    bootstrap: str,
    source: str,
    sink: str,
    group: str,
    transactional_id: str,
    total: int,
    progress: Callable[[int], None],
) -> dict[str, int]:
    """Read `source` under `group`, write each value + b"!" to `sink`, committing the input
    offsets in the same transaction; after an abortable error, abort and rewind to the
    committed offsets (the Java pattern). Returns counters."""
    stats = Counter[str]()
    async with (
        Consumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            isolation_level="read_committed",
            request_timeout_ms=5000,
        ) as consumer,
        Producer(
            bootstrap,
            transactional_id=transactional_id,
            linger_ms=5,
            request_timeout_ms=5000,
            transaction_timeout_ms=30_000,
        ) as producer,
    ):
        consumer.subscribe([source])
        await producer.init_transactions()
        done = 0
        with anyio.fail_after(240):
            while done < total:
                batches = await consumer.getmany(timeout_ms=200, max_records=500)
                if not batches:
                    continue
                try:
                    producer.begin_transaction()
                    for records in batches.values():
                        for r in records:
                            await producer.enqueue(sink, r.value + b"!", key=r.key)
                    offsets = {tp: records[-1].offset + 1 for tp, records in batches.items()}
                    await producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
                    await producer.commit_transaction()
                except KafkaError as error:
                    stats[f"aborted: {type(error).__name__}"] += 1
                    await producer.abort_transaction()
                    for tp in batches:
                        found = await consumer.committed(tp)
                        consumer.seek(tp, found.offset if found is not None else 0)
                    continue
                stats["committed transactions"] += 1
                done += sum(len(records) for records in batches.values())
                progress(done)
    return dict(stats)


async def test_consume_transform_produce_is_exactly_once_when_the_transaction_coordinator_dies(
    kafka_cluster: BrokerInfo, java_clients: JavaClients, unique_topic: str
) -> None:
    cluster = _cluster(kafka_cluster)
    source, sink = f"{unique_topic}-in", f"{unique_topic}-out"
    total = 20_000
    await kafka_cluster.create_topic(source, partitions=3, replication_factor=3)
    await kafka_cluster.create_topic(sink, partitions=3, replication_factor=3)
    async with Producer(kafka_cluster.bootstrap, acks="all") as producer:
        for i in range(total):
            await producer.enqueue(source, b"%d" % i, key=b"k%d" % (i % 50))
        await producer.flush()
    transactional_id = f"ctp-{unique_topic}"
    progress = [0]
    note: dict[str, float] = {}
    stats: dict[str, Any] = {}

    async def run() -> None:
        stats.update(
            await _transform(
                kafka_cluster.bootstrap,
                source,
                sink,
                f"ctp-{unique_topic}",
                transactional_id,
                total,
                lambda n: progress.__setitem__(0, n),
            )
        )

    began = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(120):
            while progress[0] < total // 4:
                await anyio.sleep(0.05)
        coordinator = await find_coordinator(cluster, transactional_id, TRANSACTION_KEY)
        await _stop_and_restart(cluster, coordinator, 8.0, note)
    elapsed = time.monotonic() - began
    out = await anyio.to_thread.run_sync(
        lambda: java_clients.read_all(
            kafka_cluster.bootstrap,
            sink,
            isolation="read_committed",
            expect=total,
            idle_ms=5000,
            timeout=300,
        )
    )
    values = Counter(r.value for r in out)
    expected = Counter(b"%d!" % i for i in range(total))
    missing = sum((expected - values).values())
    extra = sum((values - expected).values())
    print(
        f"FIGURES txn-coordinator-kill: {total} records copied in {elapsed:.1f} s, "
        f"transaction coordinator broker {coordinator} killed at {total // 4} and down "
        f"{note['down_s']:.1f} s; {stats}; downstream (Java read_committed): missing "
        f"{missing}, duplicated or extra {extra}"
    )
    assert (missing, extra) == (0, 0)
    async with Consumer(
        bootstrap_servers=kafka_cluster.bootstrap, group_id=f"ctp-{unique_topic}"
    ) as consumer:
        committed = [await consumer.committed(TopicPartition(source, p)) for p in range(3)]
    assert sum(o.offset for o in committed if o is not None) == total
