"""Typed arguments and results of the Admin client: topics, cluster, offsets and records.

Every per-item result carries ``error: KafkaError | None`` (None on success).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

from kafkaio.errors import KafkaError
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
    error: KafkaError | None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(slots=True)
class NewPartitions:
    """Grow a topic to `total_count` partitions; `assignments` lists the replicas (broker
    ids) of each new partition, or is None to let the controller place them."""

    total_count: int
    assignments: list[list[int]] | None = None


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    """The cluster id, the controller (None if unknown) and the brokers, sorted by id."""

    cluster_id: str | None
    controller_id: int | None
    brokers: tuple[BrokerNode, ...]


class OffsetSpec(enum.IntEnum):
    """Which offset ListOffsets looks up; any int >= 0 is a timestamp (ms) instead.

    LATEST is the end offset (the next offset to be written), EARLIEST the log start
    offset, MAX_TIMESTAMP the offset of the record with the largest timestamp (ListOffsets
    v7+, KIP-734).
    """

    LATEST = -1
    EARLIEST = -2
    MAX_TIMESTAMP = -3


@dataclass(frozen=True, slots=True)
class ListedOffset:
    """One partition's answer to ListOffsets.

    `offset` is None when no record matches (a timestamp after the last record's), or on
    error; `timestamp` is the record's timestamp for timestamp lookups (None when unknown).
    """

    offset: int | None
    timestamp: int | None = None
    leader_epoch: int | None = None
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class DeletedRecords:
    """One partition's answer to DeleteRecords: its new log start offset (low watermark)."""

    low_watermark: int | None
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class ReplicaLogInfo:
    """One replica in one log directory: its size, lag and whether it is a future replica."""

    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """One log directory of a broker; the byte totals are None before DescribeLogDirs v4."""

    path: str
    error: KafkaError | None
    replicas: dict[tuple[str, int], ReplicaLogInfo]
    total_bytes: int | None = None
    usable_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class BrokerLogDirs:
    """One broker's answer to DescribeLogDirs (or why it could not be asked)."""

    broker_id: int
    error: KafkaError | None
    log_dirs: tuple[LogDirDescription, ...] = ()
