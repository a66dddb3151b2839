"""Small public value types shared by the clients."""

from __future__ import annotations

from dataclasses import dataclass

from kafkaio.metadata.cluster import TopicPartition

__all__ = ["OffsetAndMetadata", "TopicPartition"]


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed (or to-be-committed) offset: the next offset to read, not the last read."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None
