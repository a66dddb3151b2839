"""Typed arguments and results of the Admin client."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kafkaio.errors import BrokerResponseError
from kafkaio.metadata.cluster import BrokerNode


@dataclass(slots=True)
class NewTopic:
    """A topic to create. -1 partitions / replication factor: the broker's defaults."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)
    replica_assignment: dict[int, list[int]] = field(default_factory=dict)


@dataclass(slots=True)
class CreateTopicResult:
    """What the controller answered for one topic; `error` is None on success."""

    name: str
    error: BrokerResponseError | None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int | None
    brokers: tuple[BrokerNode, ...]
