"""kafkaio.Consumer in a consumer group (classic protocol) on Tansu and the mock cluster:
exactly-once consumption by 3 members over every codec, commits seen by aiokafka, a member
leaving, listener order, a failing listener, pattern subscription and max_poll_interval_ms
expiry."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from kafkaio import Consumer, TopicPartition
from kafkaio.consumer import RebalanceListener
from kafkaio.errors import KafkaError
from kafkaio.testing import BrokerInfo

pytestmark = pytest.mark.integration

# The mock cluster's group API versions are capped by the kafkaio.testing plugin (it
# advertises flexible group APIs it cannot parse).

GROUP_OPTIONS: dict[str, Any] = {
    "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 300,
    "auto_offset_reset": "earliest",
    "metadata_max_age_ms": 1000,
}


@pytest.fixture
def broker(kafka_broker: BrokerInfo) -> Iterator[BrokerInfo]:
    kafka_broker.skip_unless("consumer_groups")
    if kafka_broker.cluster is not None:
        kafka_broker.cluster.set_group_initial_rebalance_delay_ms(200)
    yield kafka_broker


def _skip_multi_member_on_mock(broker: BrokerInfo) -> None:
    if broker.cluster is not None:
        pytest.skip(
            "librdkafka 2.16 mock cluster: its classic group completes SyncGroup as soon as "
            "the leader's SyncGroup (with every assignment) arrives and answers follower "
            "SyncGroups that come later with INVALID_REQUEST (state Up), with a null "
            "assignment; when the leader is faster than its followers the group rebalances "
            "forever (seen here: generations 2, 3, 4... each syncing only the leader)"
        )


def _group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


async def _produce(
    broker: BrokerInfo,
    topic: str,
    count: int,
    partitions: int,
    *,
    compression: str | None = None,
    start: int = 0,
) -> dict[int, list[bytes]]:
    """`count` records with aiokafka, record i to partition i % partitions."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=broker.bootstrap, compression_type=compression, linger_ms=5
    )
    await producer.start()
    sent: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    try:
        futures = []
        for i in range(start, start + count):
            value = f"{compression}-{i:05d}".encode() + bytes(30)
            sent[i % partitions].append(value)
            futures.append(await producer.send(topic, value, partition=i % partitions))
        for future in futures:
            await future
    finally:
        await producer.stop()
    return sent


class Recorder(RebalanceListener):
    """Remembers every callback (in order) and can commit on revocation."""

    def __init__(self, consumer: Consumer | None = None) -> None:
        self.calls: list[tuple[str, frozenset[TopicPartition]]] = []
        self.consumer = consumer

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.calls.append(("revoked", frozenset(revoked)))
        if self.consumer is not None:
            try:
                await self.consumer.commit()
            except KafkaError:  # the mock cluster refuses commits during a rebalance
                pass

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.calls.append(("assigned", frozenset(assigned)))

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.calls.append(("lost", frozenset(lost)))


def _by_value(records: list[Any]) -> Counter[bytes]:
    return Counter(r.value for r in records)


async def test_three_members_consume_every_codec_exactly_once(
    broker: BrokerInfo, unique_topic: str
) -> None:
    _skip_multi_member_on_mock(broker)
    partitions = 6
    await broker.create_topic(unique_topic, partitions)
    group = _group()
    got: list[list[Any]] = [[], [], []]
    members: list[Consumer] = []
    done = anyio.Event()

    async def member(i: int) -> None:
        async with Consumer(
            unique_topic,
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            client_id=f"member-{i}",
            max_poll_records=20,
            **GROUP_OPTIONS,
        ) as consumer:
            members.append(consumer)
            while not done.is_set():
                if i == 0:  # one member takes records one by one (batched under the hood)
                    with anyio.move_on_after(0.2):
                        got[i].append(await consumer.getone())
                else:
                    batch = await consumer.getmany(timeout_ms=200)
                    got[i] += [r for recs in batch.values() for r in recs]
            await consumer.commit()

    sent: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(member, i)
            # a clean run: produce once the group is stable (the mock cluster refuses
            # commits while a rebalance is under way, so revocations could not commit)
            while not (
                len(members) == 3
                and all(c.assignment() for c in members)
                and len({c.group_metadata().generation_id for c in members}) == 1
            ):
                await anyio.sleep(0.05)
            per_codec = 60
            for n, codec in enumerate([None, "gzip", "snappy", "lz4", "zstd"]):
                part = await _produce(
                    broker,
                    unique_topic,
                    per_codec,
                    partitions,
                    compression=codec,
                    start=n * per_codec,
                )
                for p, values in part.items():
                    sent[p] += values
            total = sum(len(v) for v in sent.values())
            while sum(map(len, got)) < total:
                await anyio.sleep(0.05)
            await anyio.sleep(0.3)  # nothing more arrives
            done.set()
    records = [r for member_records in got for r in member_records]
    for p in range(partitions):
        mine = sorted((r for r in records if r.partition == p), key=lambda r: r.offset)
        assert [r.offset for r in mine] == list(range(len(sent[p])))  # no gap, no duplicate
        assert [r.value for r in mine] == sent[p]
    assert all(got), "every member consumed records"

    # the committed offsets are the log ends, for aiokafka and for kafkaio
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioTP

    reader = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group)
    with anyio.fail_after(20):
        await reader.start()
        try:
            for p in range(partitions):
                assert await reader.committed(AioTP(unique_topic, p)) == len(sent[p])
        finally:
            await reader.stop()
        async with Consumer(
            bootstrap_servers=broker.bootstrap, group_id=group, **GROUP_OPTIONS
        ) as check:
            for p in range(partitions):
                committed = await check.committed(TopicPartition(unique_topic, p))
                assert committed is not None and committed.offset == len(sent[p])


async def test_a_leaving_member_hands_its_partitions_over_from_committed_offsets(
    broker: BrokerInfo, unique_topic: str
) -> None:
    _skip_multi_member_on_mock(broker)
    partitions = 4
    await broker.create_topic(unique_topic, partitions)
    sent = await _produce(broker, unique_topic, 200, partitions)
    group = _group()
    options = dict(GROUP_OPTIONS, enable_auto_commit=False, max_poll_records=10)
    everything = {v for values in sent.values() for v in values}
    got_stayers: list[Any] = []
    leaver_window: list[Any] = []
    leaver_committed: list[Any] = []

    async def poll(consumer: Consumer, sink: list[Any], **kwargs: Any) -> list[Any]:
        batch = await consumer.getmany(timeout_ms=100, **kwargs)
        records = [r for rs in batch.values() for r in rs]
        sink += records
        return records

    async with (
        Consumer(bootstrap_servers=broker.bootstrap, group_id=group, **options) as s0,
        Consumer(bootstrap_servers=broker.bootstrap, group_id=group, **options) as s1,
    ):
        stayers = [s0, s1]
        for stayer in stayers:  # the stayers commit before giving partitions up
            stayer.subscribe([unique_topic], listener=Recorder(stayer))
        with anyio.fail_after(40):
            async with Consumer(
                unique_topic, bootstrap_servers=broker.bootstrap, group_id=group, **options
            ) as leaver:
                # everyone polls until the group has spread the partitions over all three;
                # the leaver commits each record as it takes it
                while not (leaver.assignment() and all(s.assignment() for s in stayers)):
                    if await poll(leaver, leaver_committed, max_records=1):
                        await leaver.commit()
                    for s in stayers:
                        await poll(s, got_stayers)
                # the leaver commits some records, then takes some without committing
                while len(leaver_window) < 5:
                    await poll(leaver, leaver_committed, max_records=5)
                    await leaver.commit()
                    await poll(leaver, leaver_window, max_records=5)
                held = leaver.assignment()
            # the leaver closed (LeaveGroup, nothing committed): the others take over
            while set(_by_value(got_stayers + leaver_committed)) != everything:
                for s in stayers:
                    await poll(s, got_stayers)
            assert set.union(*(s.assignment() for s in stayers)) == {
                TopicPartition(unique_topic, p) for p in range(partitions)
            }
    counts = _by_value(got_stayers + leaver_committed + leaver_window)
    assert set(counts) == everything  # no gap
    assert all(n <= 2 for n in counts.values())
    # only the leaver's uncommitted records came twice, and all of them did
    assert {v for v, n in counts.items() if n > 1} == {r.value for r in leaver_window}
    assert {TopicPartition(r.topic, r.partition) for r in leaver_window} <= held


async def test_listener_callbacks_arrive_in_order_with_the_right_partitions(
    broker: BrokerInfo, unique_topic: str
) -> None:
    _skip_multi_member_on_mock(broker)
    await broker.create_topic(unique_topic, 4)
    everything = frozenset(TopicPartition(unique_topic, p) for p in range(4))
    group = _group()
    first, second = Recorder(), Recorder()
    with anyio.fail_after(40):
        async with Consumer(
            bootstrap_servers=broker.bootstrap, group_id=group, **GROUP_OPTIONS
        ) as a:
            a.subscribe([unique_topic], listener=first)
            while a.assignment() != everything:
                await a.getmany(timeout_ms=100)
            async with Consumer(
                bootstrap_servers=broker.bootstrap, group_id=group, **GROUP_OPTIONS
            ) as b:
                b.subscribe([unique_topic], listener=second)
                while not (a.assignment() and b.assignment()):
                    await a.getmany(timeout_ms=50)
                    await b.getmany(timeout_ms=50)
                split = (frozenset(a.assignment()), frozenset(b.assignment()))
                assert split[0] | split[1] == everything and not split[0] & split[1]
                metadata = b.group_metadata()
                assert metadata.group_id == group and metadata.member_id
                assert metadata.generation_id == a.group_metadata().generation_id
            # b left: a takes everything back
            while a.assignment() != everything:
                await a.getmany(timeout_ms=100)
        assert first.calls == [
            ("assigned", everything),
            ("revoked", everything),
            ("assigned", split[0]),
            ("revoked", split[0]),
            ("assigned", everything),
            ("revoked", everything),  # close
        ]
        assert second.calls == [("assigned", split[1]), ("revoked", split[1])]


class _Failing(RebalanceListener):
    def __init__(self) -> None:
        self.revoked = 0

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.revoked += 1
        raise LookupError(f"the listener failed for {sorted(revoked)}")


async def test_a_failing_listener_is_raised_by_unsubscribe_and_by_close_once_done(
    broker: BrokerInfo, unique_topic: str
) -> None:
    await broker.create_topic(unique_topic, 1)
    everything = {TopicPartition(unique_topic, 0)}
    listener = _Failing()
    with anyio.fail_after(60):
        consumer = Consumer(bootstrap_servers=broker.bootstrap, group_id=_group(), **GROUP_OPTIONS)
        await consumer.start()
        try:
            consumer.subscribe([unique_topic], listener=listener)
            while consumer.assignment() != everything:
                await consumer.getmany(timeout_ms=100)
            with pytest.raises(LookupError, match="the listener failed"):
                await consumer.unsubscribe()
            assert listener.revoked == 1
            assert consumer.assignment() == set() and consumer.subscription() == frozenset()
            consumer.subscribe([unique_topic], listener=listener)  # the group again
            while consumer.assignment() != everything:
                await consumer.getmany(timeout_ms=100)
        finally:
            with pytest.raises(LookupError, match="the listener failed"):
                await consumer.close()
        assert listener.revoked == 2
        with pytest.raises(KafkaError, match="closed"):  # closed all the same
            await consumer.getmany(timeout_ms=0)
        await consumer.close()  # a second close has nothing left to raise


async def test_async_with_keeps_the_bodys_error_over_a_failing_listener(
    broker: BrokerInfo, unique_topic: str
) -> None:
    await broker.create_topic(unique_topic, 1)
    listener = _Failing()
    with anyio.fail_after(60), pytest.raises(ZeroDivisionError):
        async with Consumer(
            bootstrap_servers=broker.bootstrap, group_id=_group(), **GROUP_OPTIONS
        ) as consumer:
            consumer.subscribe([unique_topic], listener=listener)
            while not consumer.assignment():
                await consumer.getmany(timeout_ms=100)
            1 / 0  # noqa: B018
    assert listener.revoked == 1  # it ran on close, and its error was only logged


async def test_pattern_subscription_picks_up_a_new_topic(
    broker: BrokerInfo, unique_topic: str
) -> None:
    first, later = f"{unique_topic}-a", f"{unique_topic}-b"
    await broker.create_topic(first, 2)
    await _produce(broker, first, 10, 2)
    with anyio.fail_after(40):
        async with Consumer(
            bootstrap_servers=broker.bootstrap, group_id=_group(), **GROUP_OPTIONS
        ) as consumer:
            consumer.subscribe(pattern=f"{unique_topic}-.*")
            got: list[Any] = []
            while len(got) < 10:
                got += [r for rs in (await consumer.getmany(timeout_ms=200)).values() for r in rs]
            assert consumer.subscription() == {first}
            await broker.create_topic(later, 1)
            await _produce(broker, later, 5, 1)
            while len(got) < 15:
                got += [r for rs in (await consumer.getmany(timeout_ms=200)).values() for r in rs]
            assert consumer.subscription() == {first, later}
            assert Counter(r.topic for r in got) == {first: 10, later: 5}


async def test_max_poll_interval_expiry_leaves_and_the_next_poll_rejoins(
    broker: BrokerInfo, unique_topic: str
) -> None:
    await broker.create_topic(unique_topic, 2)
    sent = await _produce(broker, unique_topic, 20, 2)
    everything = frozenset(TopicPartition(unique_topic, p) for p in range(2))
    listener = Recorder()
    with anyio.fail_after(40):
        async with Consumer(
            bootstrap_servers=broker.bootstrap,
            group_id=_group(),
            max_poll_interval_ms=1500,
            max_poll_records=10,
            **GROUP_OPTIONS,
        ) as consumer:
            consumer.subscribe([unique_topic], listener=listener)
            got: list[Any] = []
            while not got:
                got += [r for rs in (await consumer.getmany(timeout_ms=200)).values() for r in rs]
            await consumer.commit()
            member_id = consumer.group_metadata().member_id
            assert member_id
            await anyio.sleep(2.5)  # the application stops polling: the member leaves
            assert consumer.group_metadata().member_id == ""
            while len(got) < 20:
                got += [r for rs in (await consumer.getmany(timeout_ms=200)).values() for r in rs]
            assert consumer.group_metadata().member_id not in ("", None)
        assert listener.calls[:3] == [
            ("assigned", everything),
            ("lost", everything),
            ("assigned", everything),
        ]
        assert sorted(r.value for r in got) == sorted(v for vs in sent.values() for v in vs)


class _Counting(RebalanceListener):
    def __init__(self) -> None:
        self.revoked: list[set[TopicPartition]] = []
        self.task: Any = None

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.revoked.append(set(revoked))
        self.task = anyio.get_current_task().id


async def test_unsubscribe_called_without_await_still_leaves_the_group(
    broker: BrokerInfo, unique_topic: str
) -> None:
    """aiokafka's unsubscribe() is not a coroutine: called without await, kafkaio's works
    too (no "never awaited" warning): the next poll leaves the group in the caller's task,
    and subscribe() before that says what to do."""
    import gc
    import warnings

    await broker.create_topic(unique_topic, 1)
    everything = {TopicPartition(unique_topic, 0)}
    listener = _Counting()
    with anyio.fail_after(60), warnings.catch_warnings():
        warnings.simplefilter("error")  # a "coroutine ... was never awaited" would fail
        async with Consumer(
            bootstrap_servers=broker.bootstrap, group_id=_group(), **GROUP_OPTIONS
        ) as consumer:
            consumer.subscribe([unique_topic], listener=listener)
            while consumer.assignment() != everything:
                await consumer.getmany(timeout_ms=100)
            consumer.unsubscribe()  # no await, as with aiokafka
            gc.collect()
            with pytest.raises(KafkaError, match="not awaited yet"):
                consumer.subscribe([unique_topic])
            assert await consumer.getmany(timeout_ms=100) == {}
            assert listener.revoked == [everything]
            assert listener.task == anyio.get_current_task().id
            assert consumer.assignment() == set() and consumer.subscription() == frozenset()
            await consumer.unsubscribe()  # awaited: now nothing left to do
            consumer.subscribe([unique_topic], listener=listener)  # allowed again
            while consumer.assignment() != everything:
                await consumer.getmany(timeout_ms=100)
            consumer.unsubscribe()
        # close() ran the pending unsubscribe: the listener saw the second revocation
        assert listener.revoked == [everything, everything]


async def test_close_returns_when_the_member_is_out_not_at_the_next_check(
    broker: BrokerInfo, unique_topic: str
) -> None:
    """close() (and unsubscribe()) wait in the application's task for the network task to
    take the member out of the group: the LeaveGroup's outcome wakes that wait. Before, only
    records or background events did, so every close slept out a 1 s check interval after
    the member was out."""
    await broker.create_topic(unique_topic, 1)
    everything = {TopicPartition(unique_topic, 0)}
    with anyio.fail_after(60):
        consumer = Consumer(bootstrap_servers=broker.bootstrap, group_id=_group(), **GROUP_OPTIONS)
        await consumer.start()
        consumer.subscribe([unique_topic])
        while consumer.assignment() != everything:
            await consumer.getmany(timeout_ms=100)
        woken: list[bool] = []
        wait = consumer._wait_for_data

        async def recording_wait(seconds: float) -> None:
            await wait(seconds)
            woken.append(consumer._data_ready.is_set())  # False: the wait timed out

        consumer._wait_for_data = recording_wait  # type: ignore[method-assign]
        await consumer.close()
    assert woken, "close() did not wait for the member to leave"
    assert woken[-1], f"close() slept until its check interval once the member was out: {woken}"
