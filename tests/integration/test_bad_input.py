"""Calls a broker refuses, against a real broker: the error says why (Apache Kafka)."""

from __future__ import annotations

import anyio
import pytest

from kafkaio import Consumer, TopicPartition
from kafkaio.errors import KafkaTimeoutError, UnknownTopicOrPartitionError
from kafkaio.testing import BrokerInfo

pytestmark = pytest.mark.integration


async def test_a_commit_that_times_out_names_the_brokers_error(
    broker: BrokerInfo, unique_topic: str
) -> None:
    # commit() on a topic that does not exist failed after its timeout with "CommitEvent did
    # not complete before its deadline": the broker's UNKNOWN_TOPIC_OR_PARTITION was lost
    missing = TopicPartition(unique_topic, 0)
    with anyio.fail_after(20):
        async with Consumer(
            bootstrap_servers=broker.bootstrap, group_id=f"{unique_topic}-g"
        ) as consumer:
            with pytest.raises(KafkaTimeoutError, match="UNKNOWN_TOPIC_OR_PARTITION") as info:
                await consumer.commit({missing: 5}, timeout_ms=2000)
    assert isinstance(info.value.__cause__, UnknownTopicOrPartitionError)
    assert info.value.__cause__.context["topic"] == unique_topic
