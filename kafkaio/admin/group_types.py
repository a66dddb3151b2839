"""Typed results of the Admin consumer-group calls: listings, descriptions, committed
offsets and lag. Per-item results carry ``error: KafkaError | None``."""

from __future__ import annotations

from dataclasses import dataclass

from kafkaio.errors import KafkaError
from kafkaio.metadata.cluster import TopicPartition

# the state DescribeGroups gives a group the coordinator does not know (before KIP-1043)
DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class GroupListing:
    """A group as ListGroups lists it; `state` (v4+) and `type` (v5+) are None before."""

    group_id: str
    protocol_type: str
    state: str | None = None
    type: str | None = None


@dataclass(frozen=True, slots=True)
class MemberDescription:
    """A group member. `assignment` is decoded for consumer groups; `member_epoch` and
    `subscribed_topics` are known for consumer-protocol (KIP-848) groups only."""

    member_id: str
    client_id: str
    client_host: str
    group_instance_id: str | None = None
    assignment: tuple[TopicPartition, ...] = ()
    member_epoch: int | None = None
    subscribed_topics: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A group as its coordinator describes it.

    `group_type` is "classic" (DescribeGroups) or "consumer" (ConsumerGroupDescribe);
    `protocol` is the classic group's assignor (or the consumer group's assignor name).
    """

    group_id: str
    error: KafkaError | None
    state: str = ""
    protocol_type: str = ""
    protocol: str = ""
    group_type: str = "classic"
    members: tuple[MemberDescription, ...] = ()
    coordinator: int | None = None
    group_epoch: int | None = None
    assignment_epoch: int | None = None

    @property
    def found(self) -> bool:
        """Whether the coordinator knows the group: Kafka 4 answers DescribeGroups for an
        unknown group with GROUP_ID_NOT_FOUND (KIP-1043), older brokers with the state Dead."""
        return self.error is None and self.state != DEAD


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """A group's committed offset for one partition; `offset` is None when none is
    committed."""

    offset: int | None
    metadata: str = ""
    leader_epoch: int | None = None
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """Committed offset, end offset and lag (end - committed, at least 0) of one partition.

    `lag` is None when either offset is unknown; `error` says why.
    """

    tp: TopicPartition
    committed: int | None
    end_offset: int | None
    lag: int | None
    error: KafkaError | None = None
