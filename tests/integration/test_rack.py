"""Rack awareness against the librdkafka mock cluster: follower fetching (KIP-392) reads every
record exactly once from the replica the leader names, and a group leader (KIP-881) builds
its replica racks from the cluster's metadata."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from kafkaio import Consumer, TopicPartition
from kafkaio.testing import BrokerInfo

pytestmark = pytest.mark.integration

FETCH = 1
RACKS = {1: "az-1", 2: "az-2", 3: "az-3"}


async def _produce(bootstrap: str, topic: str, partitions: int, count: int) -> list[bytes]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    values = [f"value-{i:05d}".encode() for i in range(count)]
    try:
        futures = [
            await producer.send(topic, v, partition=i % partitions) for i, v in enumerate(values)
        ]
        for f in futures:
            await f
    finally:
        await producer.stop()
    return values


async def _consume(consumer: Consumer, count: int) -> list[Any]:
    records: list[Any] = []
    with anyio.fail_after(30):
        while len(records) < count:
            batch = await consumer.getmany(timeout_ms=500)
            records.extend(r for recs in batch.values() for r in recs)
    extra = await consumer.getmany(timeout_ms=300)  # nothing more arrives
    records.extend(r for recs in extra.values() for r in recs)
    return records


async def test_consumer_fetches_from_the_follower_in_its_rack(
    isolated_mock_cluster: BrokerInfo, unique_topic: str
) -> None:
    cluster = isolated_mock_cluster.cluster
    assert cluster is not None
    for broker_id, rack in RACKS.items():
        cluster.set_rack(broker_id, rack)
    cluster.create_topic(unique_topic, 2, 3)
    for p in (0, 1):
        cluster.set_partition_leader(unique_topic, p, 1)
        cluster.set_partition_follower(unique_topic, p, 3)  # the mock names it to fetchers
    values = await _produce(isolated_mock_cluster.bootstrap, unique_topic, 2, 400)
    cluster.start_request_tracking()
    async with Consumer(
        bootstrap_servers=isolated_mock_cluster.bootstrap,
        auto_offset_reset="earliest",
        client_rack="az-3",
    ) as consumer:
        consumer.assign([TopicPartition(unique_topic, p) for p in (0, 1)])
        records = await _consume(consumer, len(values))
        replicas = {
            p: consumer._subscriptions.state(TopicPartition(unique_topic, p)).preferred_read_replica
            for p in (0, 1)
        }
    assert sorted(r.value for r in records) == sorted(values)  # each record exactly once
    for p in (0, 1):
        offsets = [r.offset for r in records if r.partition == p]
        assert offsets == list(range(len(values) // 2))
    assert replicas == {0: 3, 1: 3}
    fetch_brokers = [b for b, api, _ in cluster.get_requests() if api == FETCH]
    assert 3 in fetch_brokers
    # the leader only named the replica (the mock sends no records with that): after the
    # switch every fetch went to broker 3, which served all the records
    first = fetch_brokers.index(3)
    assert set(fetch_brokers[first:]) == {3}
    assert fetch_brokers[:first] and set(fetch_brokers[:first]) == {1}


async def test_group_leader_sees_the_replica_racks_of_the_mock_cluster(
    isolated_mock_cluster: BrokerInfo, unique_topic: str
) -> None:
    # The mock's classic groups cannot hold two members (see test_consumer_group.py), so
    # rack-aware assignment itself is covered by the unit tests; here one member leads and
    # the racks it hands its assignor come from real Metadata responses.
    cluster = isolated_mock_cluster.cluster
    assert cluster is not None
    for broker_id, rack in RACKS.items():
        cluster.set_rack(broker_id, rack)
    cluster.create_topic(unique_topic, 4, 1)  # one replica each, spread over the brokers
    async with Consumer(
        unique_topic,
        bootstrap_servers=isolated_mock_cluster.bootstrap,
        group_id=f"g-{unique_topic}",
        auto_offset_reset="earliest",
        client_rack="az-1",
        session_timeout_ms=6000,
        heartbeat_interval_ms=200,
    ) as consumer:
        with anyio.fail_after(30):
            while len(consumer.assignment()) < 4:
                await consumer.getmany(timeout_ms=100)
        membership: Any = consumer._membership
        racks = dict(membership._leader_racks)
        metadata = consumer._metadata.cluster
        replicas = {
            TopicPartition(unique_topic, p): metadata.partition(
                TopicPartition(unique_topic, p)
            ).replicas
            for p in range(4)
        }
    assert all(len(r) == 1 for r in replicas.values())
    assert racks == {tp: frozenset({RACKS[r[0]]}) for tp, r in replicas.items()}
    assert len(set(racks.values())) > 1  # the partitions really live in different racks
