"""Builders of MetadataResponse objects for the metadata tests, from the generated classes.

`partition(index, leader, epoch)` and `topic(name, *partitions)` keep the tests short.
"""

from __future__ import annotations

import uuid

from kafkaio.protocol.messages import MetadataResponse

Broker = MetadataResponse.MetadataResponseBroker
Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition

UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
INVALID_TOPIC_EXCEPTION = 17
TOPIC_AUTHORIZATION_FAILED = 29


def topic_uuid(name: str) -> uuid.UUID:
    """A stable, distinct id per topic name."""
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


def partition(index: int, leader: int = 1, epoch: int = 0, *, error: int = 0) -> Partition:
    replicas = [leader] if leader >= 0 else []
    return Partition(error, index, leader, epoch, replicas, replicas, [])


def topic(
    name: str | None,
    *partitions: Partition,
    error: int = 0,
    topic_id: uuid.UUID | None = None,
    internal: bool = False,
) -> Topic:
    if topic_id is None:
        topic_id = topic_uuid(name) if name else uuid.UUID(int=0)
    return Topic(error, name, topic_id, internal, list(partitions))


def response(*topics: Topic, brokers: tuple[int, ...] = (1, 2, 3)) -> MetadataResponse:
    return MetadataResponse(
        brokers=[Broker(n, f"broker{n}.example", 9090 + n, f"rack{n % 2}") for n in brokers],
        cluster_id="cluster-a",
        controller_id=brokers[0] if brokers else -1,
        topics=list(topics),
    )
