"""Small public value types shared by the clients."""

from __future__ import annotations

from dataclasses import dataclass

from kafkaio.metadata.cluster import TopicPartition

__all__ = ["ConsumerGroupMetadata", "OffsetAndMetadata", "OffsetAndTimestamp", "TopicPartition"]


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed (or to-be-committed) offset: the next offset to read, not the last read."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """A consumer's group identity, as a transactional producer sends it with offsets.

    ``generation_id`` -1 and ``member_id`` "" stand for a consumer outside group management
    (manual ``assign``); the group coordinator then skips the KIP-447 member fencing.
    """

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    """An answer of offsets_for_times: the first offset whose timestamp is >= the asked one."""

    offset: int
    timestamp: int
    leader_epoch: int | None = None
