"""Position validation (KIP-320) against real brokers: on the librdkafka mock cluster a consumer
validates positions with OffsetForLeaderEpoch after leader moves and detects truncation; on
Tansu, which has no OffsetForLeaderEpoch, validation is skipped and consuming works.

The mock reports the partition's current leader epoch as every committed offset's epoch, so a
committed position with an older epoch cannot be made through it: those tests set the position
the way CommitManager does for such a commit (``seek_unvalidated``).
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from kafkaio import Consumer, TopicPartition
from kafkaio.consumer.errors import LogTruncationError
from kafkaio.consumer.subscription import FetchPosition
from kafkaio.structs import OffsetAndMetadata
from kafkaio.testing import BrokerInfo

pytestmark = pytest.mark.integration

OFFSET_FOR_LEADER_EPOCH = 23


async def _produce(broker: BrokerInfo, topic: str, start: int, count: int) -> list[bytes]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
    await producer.start()
    try:
        values = [f"value-{i:04d}".encode() for i in range(start, start + count)]
        futures = [await producer.send(topic, v, partition=0) for v in values]
        for f in futures:
            await f
    finally:
        await producer.stop()
    return values


async def _consume(consumer: Consumer, expected: int) -> list[Any]:
    records: list[Any] = []
    with anyio.fail_after(20):
        while len(records) < expected:
            for recs in (await consumer.getmany(timeout_ms=500)).values():
                records.extend(recs)
    extra = await consumer.getmany(timeout_ms=300)  # and nothing more
    records.extend(r for recs in extra.values() for r in recs)
    return records


def _consumer(broker: BrokerInfo, reset: str = "earliest", group: str | None = None) -> Consumer:
    return Consumer(
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        auto_offset_reset=reset,
        enable_auto_commit=False,
    )


def _validations_to(broker: BrokerInfo, node: int) -> int:
    assert broker.cluster is not None
    requests = broker.cluster.get_requests()
    return sum(1 for b, key, _ in requests if key == OFFSET_FOR_LEADER_EPOCH and b == node)


def _move_leader(broker: BrokerInfo, consumer: Consumer, tp: TopicPartition) -> int:
    assert broker.cluster is not None
    leader = consumer._metadata.cluster.leader_for(tp)
    new_leader = 1 if leader != 1 else 2
    broker.cluster.set_partition_leader(tp.topic, tp.partition, new_leader)
    return new_leader


async def test_a_running_consumer_validates_and_continues_after_a_leader_move(
    isolated_mock_cluster: BrokerInfo, unique_topic: str
) -> None:
    broker = isolated_mock_cluster
    assert broker.cluster is not None
    await broker.create_topic(unique_topic, 1)
    tp = TopicPartition(unique_topic, 0)
    sent = await _produce(broker, unique_topic, 0, 40)
    with anyio.fail_after(60):
        async with _consumer(broker) as consumer:
            consumer.assign([tp])
            records = await _consume(consumer, 40)
            broker.cluster.start_request_tracking()
            new_leader = _move_leader(broker, consumer, tp)
            sent += await _produce(broker, unique_topic, 40, 40)
            records += await _consume(consumer, 40)
            assert consumer._metadata.cluster.leader_for(tp) == new_leader
    assert [r.offset for r in records] == list(range(80))  # no gap, no duplicate
    assert [r.value for r in records] == sent
    assert _validations_to(broker, new_leader) >= 1


async def test_committed_offsets_survive_leader_moves(
    isolated_mock_cluster: BrokerInfo, unique_topic: str
) -> None:
    broker = isolated_mock_cluster
    assert broker.cluster is not None
    await broker.create_topic(unique_topic, 1)
    tp = TopicPartition(unique_topic, 0)
    group = f"g-{unique_topic}"
    sent = await _produce(broker, unique_topic, 0, 30)
    with anyio.fail_after(60):
        async with _consumer(broker, group=group) as first:
            first.assign([tp])
            got = await _consume(first, 30)
            await first.commit({tp: OffsetAndMetadata(20, "", got[19].leader_epoch)})
            _move_leader(broker, first, tp)
        sent += await _produce(broker, unique_topic, 30, 20)
        async with _consumer(broker, group=group) as second:
            second.assign([tp])
            records = await _consume(second, 30)
            broker.cluster.start_request_tracking()
            new_leader = _move_leader(broker, second, tp)  # moves again while consuming
            sent += await _produce(broker, unique_topic, 50, 10)
            records += await _consume(second, 10)
    assert [r.offset for r in records] == list(range(20, 60))
    assert [r.value for r in records] == sent[20:]
    assert _validations_to(broker, new_leader) >= 1


async def _epoch_of_first_records(broker: BrokerInfo, tp: TopicPartition, count: int) -> int:
    """Produce `count` records and read them back: the leader epoch they were written in."""
    await _produce(broker, tp.topic, 0, count)
    async with _consumer(broker) as reader:
        reader.assign([tp])
        records = await _consume(reader, count)
    epoch = records[-1].leader_epoch
    assert epoch is not None
    return int(epoch)


async def _truncated_log(broker: BrokerInfo, tp: TopicPartition) -> int:
    """20 records in epoch e, a leader move, 20 records in epoch e+1; returns e."""
    assert broker.cluster is not None
    epoch = await _epoch_of_first_records(broker, tp, 20)
    broker.cluster.set_partition_leader(tp.topic, tp.partition, 2)
    broker.cluster.set_partition_leader(tp.topic, tp.partition, 3)
    await _produce(broker, tp.topic, 20, 20)
    return epoch


async def test_truncation_under_a_position_moves_it_back_to_the_divergence(
    isolated_mock_cluster: BrokerInfo, unique_topic: str
) -> None:
    broker = isolated_mock_cluster
    await broker.create_topic(unique_topic, 1)
    tp = TopicPartition(unique_topic, 0)
    with anyio.fail_after(60):
        epoch = await _truncated_log(broker, tp)
        async with _consumer(broker, reset="latest") as consumer:
            consumer.assign([tp])
            await consumer._settle()  # the network task applied the assignment
            # a committed offset 25 in epoch `epoch`, which ends at 20 on the leader
            consumer._subscriptions.seek_unvalidated(tp, FetchPosition(25, offset_epoch=epoch))
            records = await _consume(consumer, 20)
    # without validation the consumer would start at 25; 'latest' would start at 40
    assert [r.offset for r in records] == list(range(20, 40))


async def test_truncation_without_reset_policy_raises_log_truncation(
    isolated_mock_cluster: BrokerInfo, unique_topic: str
) -> None:
    broker = isolated_mock_cluster
    await broker.create_topic(unique_topic, 1)
    tp = TopicPartition(unique_topic, 0)
    with anyio.fail_after(60):
        epoch = await _truncated_log(broker, tp)
        async with _consumer(broker, reset="none") as consumer:
            consumer.assign([tp])
            await consumer._settle()  # the network task applied the assignment
            consumer._subscriptions.seek_unvalidated(tp, FetchPosition(25, offset_epoch=epoch))
            with pytest.raises(LogTruncationError) as caught:
                while True:
                    assert not await consumer.getmany(timeout_ms=500)
            assert caught.value.positions == {tp: 25}
            assert caught.value.divergent_offsets == {tp: OffsetAndMetadata(20, "", epoch)}
            consumer.seek(tp, 20)  # what the error suggests
            records = await _consume(consumer, 20)
    assert [r.offset for r in records] == list(range(20, 40))


async def test_epoch_unknown_to_the_leader_resets_per_policy(
    isolated_mock_cluster: BrokerInfo, unique_topic: str
) -> None:
    broker = isolated_mock_cluster
    assert broker.cluster is not None
    await broker.create_topic(unique_topic, 1)
    tp = TopicPartition(unique_topic, 0)
    with anyio.fail_after(60):
        # records in epoch e only; the leader moves twice: e+1 holds no record
        epoch = await _epoch_of_first_records(broker, tp, 10)
        broker.cluster.set_partition_leader(unique_topic, 0, 2)
        broker.cluster.set_partition_leader(unique_topic, 0, 3)
        async with _consumer(broker, reset="earliest") as consumer:
            consumer.assign([tp])
            await consumer._settle()  # the network task applied the assignment
            consumer._subscriptions.seek_unvalidated(tp, FetchPosition(5, offset_epoch=epoch + 1))
            records = await _consume(consumer, 10)
            assert consumer._metadata.cluster.leader_epoch(tp) == epoch + 2
    # the leader has no end for epoch e+1: reset to earliest instead of trusting offset 5
    assert [r.offset for r in records] == list(range(10))


async def test_broker_without_offset_for_leader_epoch_skips_validation(
    isolated_mock_cluster: BrokerInfo, unique_topic: str
) -> None:
    broker = isolated_mock_cluster
    assert broker.cluster is not None
    await broker.create_topic(unique_topic, 1)
    tp = TopicPartition(unique_topic, 0)
    with anyio.fail_after(60):
        epoch = await _truncated_log(broker, tp)
        broker.cluster.set_apiversion(OFFSET_FOR_LEADER_EPOCH, -1, -1)  # no such API
        async with _consumer(broker, reset="none") as consumer:
            consumer.assign([tp])
            await consumer._settle()  # the network task applied the assignment
            consumer._subscriptions.seek_unvalidated(tp, FetchPosition(25, offset_epoch=epoch))
            records = await _consume(consumer, 15)
            assert consumer._validation.unsupported_nodes == {3}
    # the position is trusted as is: no truncation check is possible
    assert [r.offset for r in records] == list(range(25, 40))


async def test_tansu_consumer_works_without_offset_for_leader_epoch(
    tansu_broker: BrokerInfo, unique_topic: str
) -> None:
    broker = tansu_broker
    assert not broker.has("offset_for_leader_epoch")
    await broker.create_topic(unique_topic, 1)
    tp = TopicPartition(unique_topic, 0)
    group = f"g-{unique_topic}"
    with anyio.fail_after(60):
        sent = await _produce(broker, unique_topic, 0, 20)
        async with _consumer(broker, group=group) as committer:
            committer.assign([tp])
            await _consume(committer, 20)
            await committer.commit({tp: OffsetAndMetadata(12, "", 0)})
        async with _consumer(broker, reset="none", group=group) as consumer:
            consumer.assign([tp])
            records = await _consume(consumer, 8)  # Tansu keeps no committed epochs
            epoch = consumer._metadata.cluster.leader_epoch(tp)
            assert epoch is not None  # but its metadata has leader epochs
            # a position with an epoch other than the leader's must be validated (as a
            # committed one from a broker that keeps epochs would be)
            consumer.seek(tp, 0)  # drops what is buffered
            await consumer._settle()  # the network task applied the seek
            consumer._subscriptions.seek_unvalidated(tp, FetchPosition(4, offset_epoch=epoch + 1))
            records += await _consume(consumer, 16)
            # validation was tried and skipped: Tansu has no OffsetForLeaderEpoch
            assert consumer._validation.unsupported_nodes
    assert [r.value for r in records] == sent[12:] + sent[4:]
