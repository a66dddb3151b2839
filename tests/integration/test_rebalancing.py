"""Rebalancing on real brokers: the KIP-848 consumer protocol on Apache Kafka and the
librdkafka mock cluster (members joining and leaving with no record lost),
cooperative-sticky (KIP-429) on Tansu and Apache Kafka (a join revokes nothing that stays),
and groups shared with confluent-kafka."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import anyio
import pytest

from kafkaio import Consumer, TopicPartition
from kafkaio.consumer import RebalanceListener
from kafkaio.testing import BrokerInfo

pytestmark = pytest.mark.integration

CONSUMER_GROUP_HEARTBEAT = 68


def _group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


class Recorder(RebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, frozenset[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.calls.append(("revoked", frozenset(revoked)))

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.calls.append(("assigned", frozenset(assigned)))

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.calls.append(("lost", frozenset(lost)))


async def _produce(bootstrap: str, topic: str, count: int, partitions: int, start: int) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        futures = [
            await producer.send(topic, f"v-{i:06d}".encode(), partition=i % partitions)
            for i in range(start, start + count)
        ]
        for future in futures:
            await future
    finally:
        await producer.stop()


@pytest.fixture(params=["mock", "kafka"])
def consumer_protocol_broker(request: pytest.FixtureRequest) -> BrokerInfo:
    """A broker running KIP-848 groups: a private librdkafka mock cluster (heartbeats every
    200 ms), or the session's Apache Kafka (500 ms, its group.consumer.heartbeat.interval.ms
    in the test configuration)."""
    if request.param == "mock":
        broker: BrokerInfo = request.getfixturevalue("isolated_mock_cluster")
        assert broker.cluster is not None
        low, high = broker.api_versions[CONSUMER_GROUP_HEARTBEAT]
        assert low <= 1 <= high, "librdkafka 2.16's mock speaks ConsumerGroupHeartbeat v1"
        broker.cluster.set_group_consumer_heartbeat_interval_ms(200)
    else:
        broker = request.getfixturevalue("apache_kafka")
    broker.skip_unless("consumer_group_heartbeat")
    return broker


async def test_consumer_protocol_group_loses_nothing_while_members_join_and_leave(
    consumer_protocol_broker: BrokerInfo, unique_topic: str
) -> None:
    broker = consumer_protocol_broker
    partitions = 8
    await broker.create_topic(unique_topic, partitions)
    group = _group()
    got: Counter[bytes] = Counter()
    listeners: dict[int, Recorder] = {}
    stops = {i: anyio.Event() for i in range(4)}
    consumers: dict[int, Consumer] = {}

    async def member(i: int) -> None:
        listeners[i] = listener = Recorder()
        async with Consumer(
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            group_protocol="consumer",
            auto_offset_reset="earliest",
            max_poll_records=25,
            metadata_max_age_ms=1000,
        ) as consumer:
            consumer.subscribe([unique_topic], listener=listener)
            consumers[i] = consumer
            while not stops[i].is_set():
                batch = await consumer.getmany(timeout_ms=100)
                got.update(r.value for recs in batch.values() for r in recs)
                await anyio.sleep(0.01)  # slow consumers: records stay behind during moves
            consumers.pop(i)

    async def owned_by(members: list[int]) -> None:
        """Wait until exactly these members split every partition."""
        while True:
            live = [consumers.get(i) for i in members]
            if all(c is not None for c in live):
                owned = [tp for c in live if c is not None for tp in c.assignment()]
                if len(owned) == partitions == len(set(owned)) and all(
                    c.assignment() for c in live if c is not None
                ):
                    return
            await anyio.sleep(0.05)

    total = 0
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(member, i)
            await owned_by([0, 1, 2])
            await _produce(broker.bootstrap, unique_topic, 600, partitions, 0)
            total += 600
            tg.start_soon(member, 3)  # a fourth joins while records flow
            await _produce(broker.bootstrap, unique_topic, 600, partitions, total)
            total += 600
            await owned_by([0, 1, 2, 3])
            stops[1].set()  # one leaves
            await _produce(broker.bootstrap, unique_topic, 600, partitions, total)
            total += 600
            await owned_by([0, 2, 3])
            while len(got) < total:
                await anyio.sleep(0.05)
            for stop in stops.values():
                stop.set()
    expected = {f"v-{i:06d}".encode() for i in range(total)}
    assert set(got) == expected  # nothing lost
    duplicates = sum(n - 1 for n in got.values())
    assert duplicates == 0  # revocations committed first: no record was delivered twice
    # incremental: the joiner took partitions without anyone losing or re-taking the rest
    for i in (0, 2):
        assert all(kind != "lost" for kind, _ in listeners[i].calls)
    joined = listeners[3].calls
    assert joined[0][0] == "assigned"


@pytest.mark.parametrize("assignor", ["range", "uniform"])
async def test_the_server_side_assignor_the_members_name_assigns_the_group(
    apache_kafka: BrokerInfo, unique_topic: str, assignor: str
) -> None:
    """KIP-848: members naming group_remote_assignor get that assignor's assignment from
    Apache Kafka. Two topics of 3 partitions, two members: "range" splits each topic into
    ranges the same way (co-partitioned: 4 and 2 partitions), "uniform" balances them (3
    and 3). Every record produced is consumed once."""
    topics = [f"{unique_topic}-a", f"{unique_topic}-b"]
    for topic in topics:
        await apache_kafka.create_topic(topic, 3)
    group = _group()
    consumers: dict[int, Consumer] = {}
    got: Counter[tuple[str, bytes | None]] = Counter()
    stop = anyio.Event()

    async def member(i: int) -> None:
        async with Consumer(
            bootstrap_servers=apache_kafka.bootstrap,
            group_id=group,
            group_protocol="consumer",
            group_remote_assignor=assignor,
            auto_offset_reset="earliest",
        ) as consumer:
            consumer.subscribe(topics)
            consumers[i] = consumer
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=100)
                got.update((tp.topic, r.value) for tp, recs in batch.items() for r in recs)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for i in range(2):
                tg.start_soon(member, i)
            await _wait_split_when_started(consumers, 2, 6)
            owned = [consumers[i].assignment() for i in range(2)]
            for topic in topics:
                await _produce(apache_kafka.bootstrap, topic, 60, 3, 0)
            while len(got) < 120:
                await anyio.sleep(0.05)
            stop.set()
    by_member = [{topic: {tp.partition for tp in tps if tp.topic == topic} for topic in topics}
                 for tps in owned]  # fmt: skip
    if assignor == "range":
        assert sorted(len(tps) for tps in owned) == [2, 4]
        assert all(parts[topics[0]] == parts[topics[1]] for parts in by_member)
    else:
        assert sorted(len(tps) for tps in owned) == [3, 3]
    assert got == Counter((t, f"v-{i:06d}".encode()) for t in topics for i in range(60))


async def _wait_split_when_started(
    consumers: dict[int, Consumer], members: int, partitions: int
) -> None:
    while len(consumers) < members:
        await anyio.sleep(0.05)
    await _wait_split(list(consumers.values()), partitions)


_MOCK_CLASSIC_SKIP = (
    "librdkafka 2.16 mock cluster: its classic group answers follower SyncGroups that arrive "
    "after the leader's with INVALID_REQUEST and a null assignment, so multi-member classic "
    "groups rebalance forever (see test_consumer_group.py)"
)

CLASSIC = {
    "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 300,
    "auto_offset_reset": "earliest",
    "metadata_max_age_ms": 1000,
}


async def _wait_split(consumers: list[Consumer], partitions: int) -> None:
    while True:
        owned = [tp for c in consumers for tp in c.assignment()]
        if len(owned) == partitions == len(set(owned)) and all(c.assignment() for c in consumers):
            return
        await anyio.sleep(0.05)


async def test_cooperative_sticky_join_revokes_only_partitions_that_move(
    kafka_broker: BrokerInfo, unique_topic: str
) -> None:
    kafka_broker.skip_unless("consumer_groups")
    if kafka_broker.cluster is not None:
        pytest.skip(_MOCK_CLASSIC_SKIP)
    partitions = 4
    await kafka_broker.create_topic(unique_topic, partitions)
    group = _group()
    every = frozenset(TopicPartition(unique_topic, p) for p in range(partitions))
    first, second = Recorder(), Recorder()
    stop = anyio.Event()
    consumers: list[Consumer] = []

    async def member(listener: Recorder) -> None:
        async with Consumer(
            bootstrap_servers=kafka_broker.bootstrap,
            group_id=group,
            partition_assignment_strategy="cooperative-sticky",
            **CLASSIC,
        ) as consumer:
            consumer.subscribe([unique_topic], listener=listener)
            consumers.append(consumer)
            while not stop.is_set():
                await consumer.getmany(timeout_ms=100)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(member, first)
            while not consumers or consumers[0].assignment() != every:
                await anyio.sleep(0.05)
            tg.start_soon(member, second)
            while len(consumers) < 2:
                await anyio.sleep(0.05)
            await _wait_split(consumers, partitions)
            kept = frozenset(consumers[0].assignment())
            before_close = list(first.calls)  # closing revokes the rest: not of interest
            stop.set()
    moved = every - kept
    assert len(kept) == len(moved) == 2
    assert before_close[0] == ("assigned", every)
    revoked = [parts for kind, parts in before_close if kind == "revoked"]
    assert revoked == [moved]  # only the moving partitions, once; never the kept ones
    assert all(kind != "lost" for kind, _ in before_close)
    assigned_second = frozenset().union(*(p for k, p in second.calls if k == "assigned"))
    assert moved <= assigned_second


class _ConfluentMember:
    """A confluent-kafka consumer polled in a worker thread."""

    def __init__(self, config: dict[str, Any], topic: str) -> None:
        self.config = config
        self.topic = topic
        self.values: Counter[bytes] = Counter()
        self.assignment: frozenset[TopicPartition] = frozenset()
        self.stop = False
        self.error: BaseException | None = None

    def run(self) -> None:
        from confluent_kafka import Consumer as CKConsumer

        consumer = CKConsumer(self.config)
        try:
            consumer.subscribe([self.topic])
            while not self.stop:
                msg = consumer.poll(0.1)
                if msg is not None and msg.error() is None:
                    self.values[msg.value()] += 1
                self.assignment = frozenset(
                    TopicPartition(tp.topic, tp.partition) for tp in consumer.assignment()
                )
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            consumer.close()


async def _shared_group(
    broker: BrokerInfo, topic: str, kafkaio_options: dict[str, Any], ck_options: dict[str, Any]
) -> tuple[frozenset[TopicPartition], _ConfluentMember, Counter[bytes], int]:
    """A kafkaio and a confluent-kafka member share a group; records are produced once both
    own partitions. Returns kafkaio's assignment at that point, the confluent member, what
    kafkaio consumed, and the number of records produced."""
    partitions = 6
    await broker.create_topic(topic, partitions)
    group = _group()
    ck = _ConfluentMember(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, **ck_options}, topic
    )
    got: Counter[bytes] = Counter()
    stop = anyio.Event()
    total = 300
    mine: frozenset[TopicPartition] = frozenset()
    async with Consumer(
        bootstrap_servers=broker.bootstrap, group_id=group, **kafkaio_options
    ) as consumer:
        consumer.subscribe([topic])

        async def drain() -> None:
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=100)
                got.update(r.value for recs in batch.values() for r in recs)

        async with anyio.create_task_group() as tg:
            tg.start_soon(drain)
            tg.start_soon(anyio.to_thread.run_sync, ck.run)
            try:
                with anyio.move_on_after(25):
                    while not (
                        consumer.assignment()
                        and ck.assignment
                        and len(consumer.assignment() | ck.assignment) == partitions
                        and not consumer.assignment() & ck.assignment
                    ):
                        assert ck.error is None, ck.error
                        await anyio.sleep(0.05)
                mine = frozenset(consumer.assignment())
                if mine and ck.assignment:
                    await _produce(broker.bootstrap, topic, total, partitions, 0)
                    with anyio.move_on_after(20):
                        while sum(got.values()) + sum(ck.values.values()) < total:
                            await anyio.sleep(0.05)
            finally:
                stop.set()
                ck.stop = True
    return mine, ck, got, total


def _check_split(
    topic: str,
    mine: frozenset[TopicPartition],
    ck: _ConfluentMember,
    got: Counter[bytes],
    total: int,
) -> None:
    every = {TopicPartition(topic, p) for p in range(6)}
    assert mine and ck.assignment, (mine, ck.assignment)
    assert mine | ck.assignment == every and not mine & ck.assignment
    assert set(got) | set(ck.values) == {f"v-{i:06d}".encode() for i in range(total)}
    assert not set(got) & set(ck.values)
    assert got and ck.values  # both consumed their share


async def test_consumer_protocol_group_shared_with_confluent_kafka(
    consumer_protocol_broker: BrokerInfo, unique_topic: str
) -> None:
    broker = consumer_protocol_broker
    with anyio.fail_after(60):
        mine, ck, got, total = await _shared_group(
            broker,
            unique_topic,
            {"group_protocol": "consumer", "auto_offset_reset": "earliest"},
            {"group.protocol": "consumer", "auto.offset.reset": "earliest"},
        )
    assert ck.error is None
    _check_split(unique_topic, mine, ck, got, total)


async def test_cooperative_sticky_group_shared_with_confluent_kafka(
    kafka_broker: BrokerInfo, unique_topic: str
) -> None:
    kafka_broker.skip_unless("consumer_groups")
    if kafka_broker.cluster is not None:
        pytest.skip(_MOCK_CLASSIC_SKIP)
    with anyio.fail_after(60):
        mine, ck, got, total = await _shared_group(
            kafka_broker,
            unique_topic,
            {"partition_assignment_strategy": "cooperative-sticky", **CLASSIC},
            {
                "partition.assignment.strategy": "cooperative-sticky",
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 300,
            },
        )
    assert ck.error is None
    _check_split(unique_topic, mine, ck, got, total)
