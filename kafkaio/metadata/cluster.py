"""Immutable snapshots of cluster metadata: brokers, topics, partitions and their leaders.

Sans-I/O: a snapshot is built from a MetadataResponse with `ClusterMetadata.with_response`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from kafkaio.protocol.messages import MetadataResponse

_NO_TOPIC_ID = uuid.UUID(int=0)
# TopicPartition(name, index) without the Python-level __new__ of a NamedTuple: a snapshot
# makes one per partition, 10,000 of them on a large cluster
_new_tp = tuple.__new__


class TopicPartition(NamedTuple):
    """One partition of one topic; hashable and ordered by (topic, partition)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class BrokerNode:
    """A broker as advertised in a metadata response."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition's leadership and replicas; `leader` and `leader_epoch` are None when unknown.

    `error` is the partition-level Kafka error code of the response it came from (0 = none).
    """

    topic: str
    partition: int
    leader: int | None
    leader_epoch: int | None
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    error: int = 0

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """One topic: its id (None when the broker gave none), partitions sorted by index.

    `error` is the topic-level Kafka error code (0 = none); a topic with an error has no
    partitions.
    """

    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: tuple[PartitionInfo, ...]
    error: int = 0


@dataclass(frozen=True, slots=True, eq=False)
class ClusterMetadata:
    """A consistent view of the cluster at one moment; never mutated after construction.

    `version` increases with every snapshot a `MetadataManager` publishes; `updated_ms` is the
    `now` at which the response it was built from arrived (None for the empty snapshot).
    """

    brokers: Mapping[int, BrokerNode] = field(default_factory=dict)
    topics: Mapping[str, TopicInfo] = field(default_factory=dict)
    controller_id: int | None = None
    cluster_id: str | None = None
    version: int = 0
    updated_ms: float | None = None
    _partitions: dict[TopicPartition, PartitionInfo] = field(init=False, repr=False)
    _leaders: dict[TopicPartition, int] = field(init=False, repr=False)
    _names_by_id: dict[uuid.UUID, str] = field(init=False, repr=False)
    _by_leader: Mapping[int, tuple[TopicPartition, ...]] | None = field(
        init=False, repr=False
    )

    def __post_init__(self) -> None:
        partitions: dict[TopicPartition, PartitionInfo] = {}
        leaders: dict[TopicPartition, int] = {}
        names_by_id: dict[uuid.UUID, str] = {}
        brokers = self.brokers
        new_tp = _new_tp
        for topic in self.topics.values():
            if topic.topic_id is not None:
                names_by_id[topic.topic_id] = topic.name
            name = topic.name
            for p in topic.partitions:
                tp = new_tp(TopicPartition, (name, p.partition))
                partitions[tp] = p
                # A leader missing from the broker list cannot be reached: treat it as unknown.
                leader = p.leader
                if leader is not None and leader in brokers:
                    leaders[tp] = leader
        object.__setattr__(self, "_partitions", partitions)
        object.__setattr__(self, "_leaders", leaders)
        object.__setattr__(self, "_names_by_id", names_by_id)
        object.__setattr__(self, "_by_leader", None)

    # -- lookups -------------------------------------------------------------------------

    def broker(self, node_id: int) -> BrokerNode | None:
        """The broker with this id, or None if it is not in the snapshot."""
        return self.brokers.get(node_id)

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        """Everything known about one partition, or None if it is not in the snapshot."""
        return self._partitions.get(tp)

    def leader_for(self, tp: TopicPartition) -> int | None:
        """The node id of the partition's leader; None if unknown or not a known broker."""
        return self._leaders.get(tp)

    def leader_epoch(self, tp: TopicPartition) -> int | None:
        """The partition's leader epoch; None if the partition or its epoch is unknown."""
        p = self._partitions.get(tp)
        return None if p is None else p.leader_epoch

    def partitions_for(self, topic: str) -> list[int] | None:
        """Sorted partition indexes of a topic; None if the topic is unknown or in error."""
        info = self.topics.get(topic)
        if info is None or info.error:
            return None
        return [p.partition for p in info.partitions]

    def available_partitions_for(self, topic: str) -> list[int]:
        """Sorted partition indexes of a topic whose leader is known (empty if none)."""
        info = self.topics.get(topic)
        if info is None:
            return []
        leaders = self._leaders
        return [p.partition for p in info.partitions if (topic, p.partition) in leaders]

    def topic_id(self, name: str) -> uuid.UUID | None:
        """The topic's id, or None if the topic is unknown or the broker gave no id."""
        info = self.topics.get(name)
        return None if info is None else info.topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with this id, or None if no known topic has it."""
        return self._names_by_id.get(topic_id)

    def partitions_by_leader(self) -> Mapping[int, tuple[TopicPartition, ...]]:
        """Every partition with a known leader, grouped by leader node id (sorted)."""
        if self._by_leader is None:  # computed once, on first use
            groups: dict[int, list[TopicPartition]] = {}
            for tp, leader in self._leaders.items():
                groups.setdefault(leader, []).append(tp)
            by_leader = {node: tuple(sorted(tps)) for node, tps in groups.items()}
            object.__setattr__(self, "_by_leader", by_leader)
            return by_leader
        return self._by_leader

    # -- building ------------------------------------------------------------------------

    def with_response(
        self,
        response: MetadataResponse,
        now: float,
        *,
        full: bool = False,
        version: int | None = None,
        min_leader_epochs: Mapping[TopicPartition, int] | None = None,
    ) -> ClusterMetadata:
        """Return a new snapshot updated from `response`, received at `now` (milliseconds).

        `full=True` says the request covered every topic worth keeping (all topics, or the
        whole set of interest): cached topics missing from the response are dropped. With
        `full=False` only the topics in the response are replaced; the others are kept.
        Brokers, controller and cluster id always come from the response.

        KIP-320: a partition whose leader epoch in the response is older than the cached one
        (or than `min_leader_epochs[tp]`, an epoch seen elsewhere) comes from a lagging broker;
        the cached partition is kept instead. A topic whose id changed was deleted and
        recreated, so its epochs start over and the response wins.
        `version` defaults to this snapshot's version + 1.
        """
        floors = min_leader_epochs or {}
        topics: dict[str, TopicInfo] = {} if full else dict(self.topics)
        for t in response.topics:
            topic_id = None if t.topic_id == _NO_TOPIC_ID else t.topic_id
            name = t.name
            if name is None:  # v10+: a topic requested by id alone may come back nameless
                name = self._names_by_id.get(t.topic_id) if topic_id is not None else None
                if name is None:
                    continue
            if t.error_code:
                topics[name] = TopicInfo(name, topic_id, t.is_internal, (), t.error_code)
                continue
            old = self.topics.get(name)
            recreated = (
                old is not None
                and old.topic_id is not None
                and topic_id is not None
                and old.topic_id != topic_id
            )
            parts: list[PartitionInfo] = []
            append = parts.append
            # the cached partitions to keep a newer epoch from (none when the topic is new
            # or was recreated)
            cached_partitions = None if recreated or old is None else self._partitions
            for rp in t.partitions:
                index = rp.partition_index
                epoch = rp.leader_epoch
                new = PartitionInfo(
                    name,
                    index,
                    None if rp.leader_id < 0 else rp.leader_id,
                    None if epoch < 0 else epoch,
                    tuple(rp.replica_nodes),
                    tuple(rp.isr_nodes),
                    tuple(rp.offline_replicas),
                    rp.error_code,
                )
                if epoch >= 0 and cached_partitions:
                    key = _new_tp(TopicPartition, (name, index))
                    cached = cached_partitions.get(key)
                    if cached is not None:
                        floor = floors.get(key, -1) if floors else -1
                        cached_epoch = cached.leader_epoch
                        if cached_epoch is not None and cached_epoch > floor:
                            floor = cached_epoch
                        if epoch < floor:
                            new = cached  # stale response from a lagging broker
                append(new)
            parts.sort(key=_partition_index)
            topics[name] = TopicInfo(name, topic_id, t.is_internal, tuple(parts), 0)
        return ClusterMetadata(
            brokers={
                b.node_id: BrokerNode(b.node_id, b.host, b.port, b.rack) for b in response.brokers
            },
            topics=topics,
            controller_id=None if response.controller_id < 0 else response.controller_id,
            cluster_id=response.cluster_id,
            version=self.version + 1 if version is None else version,
            updated_ms=now,
        )


def _partition_index(p: PartitionInfo) -> int:
    return p.partition
