"""KIP-951 on Apache Kafka: a producer retries at a partition's new leader named in the
Produce answer, without waiting for a Metadata refresh."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from kafkaio import Consumer, Producer, TopicPartition
from kafkaio.metadata import MetadataManager
from kafkaio.testing import BrokerInfo
from kafkaio.testing.apache import ApacheKafka

pytestmark = pytest.mark.integration


def _record_leader_updates(metadata: MetadataManager) -> list[set[TopicPartition]]:
    """The partitions each KIP-951 leader update moved, recorded from now on."""
    taken: list[set[TopicPartition]] = []
    update = metadata.update_leaders

    def spy(*args: Any, **kwargs: Any) -> set[TopicPartition]:
        moved = update(*args, **kwargs)
        taken.append(set(moved))
        return moved

    metadata.update_leaders = spy  # type: ignore[method-assign]
    return taken


async def _replicated_partition(
    kafka_cluster: BrokerInfo, topic: str
) -> tuple[ApacheKafka, TopicPartition]:
    """The cluster's brokers and partition 0 of `topic`, created with a replica on each."""
    apache = kafka_cluster.apache
    assert apache is not None
    await kafka_cluster.create_topic(topic, 1, replication_factor=3)
    return apache, TopicPartition(topic, 0)


async def test_a_produce_retry_goes_to_the_leader_the_answer_names(
    kafka_cluster: BrokerInfo, unique_topic: str
) -> None:
    apache, tp = await _replicated_partition(kafka_cluster, unique_topic)
    with anyio.fail_after(120):
        # no periodic refresh during the test: only the answers can move the leader
        async with Producer(
            bootstrap_servers=kafka_cluster.bootstrap, metadata_max_age_ms=600_000, linger_ms=0
        ) as producer:
            await producer.send(unique_topic, b"before", partition=0)
            metadata = producer._metadata
            old = metadata.cluster.leader_for(tp)
            assert old is not None
            new = next(b for b in apache.broker_ids if b != old)
            await anyio.to_thread.run_sync(apache.move_leader, unique_topic, 0, new)
            taken = _record_leader_updates(metadata)
            record = await producer.send(unique_topic, b"after", partition=0)
            assert record.offset == 1
            # the old leader answered NOT_LEADER_OR_FOLLOWER naming the new one: taken at once
            assert {tp} in taken
            assert metadata.cluster.leader_for(tp) == new


async def test_a_consumer_fetches_from_the_leader_the_fetch_answer_names(
    kafka_cluster: BrokerInfo, unique_topic: str
) -> None:
    apache, tp = await _replicated_partition(kafka_cluster, unique_topic)
    with anyio.fail_after(120):
        async with Producer(bootstrap_servers=kafka_cluster.bootstrap) as producer:
            for i in range(10):
                await producer.send(unique_topic, b"%d" % i, partition=0)
            async with Consumer(
                bootstrap_servers=kafka_cluster.bootstrap,
                auto_offset_reset="earliest",
                metadata_max_age_ms=600_000,
            ) as consumer:
                consumer.assign([tp])
                records: list[Any] = []
                while len(records) < 10:
                    for batch in (await consumer.getmany(timeout_ms=500)).values():
                        records.extend(batch)
                metadata = consumer._metadata
                taken = _record_leader_updates(metadata)
                old = metadata.cluster.leader_for(tp)
                new = next(b for b in apache.broker_ids if b != old)
                await anyio.to_thread.run_sync(apache.move_leader, unique_topic, 0, new)
                for i in range(10, 20):
                    await producer.send(unique_topic, b"%d" % i, partition=0)
                while len(records) < 20:
                    for batch in (await consumer.getmany(timeout_ms=500)).values():
                        records.extend(batch)
                assert [int(r.value) for r in records] == list(range(20))
                # the old leader's answer named the new one: taken without a refresh
                assert {tp} in taken
                assert metadata.cluster.leader_for(tp) == new
