"""Immutable snapshots of cluster metadata: brokers, topics, partitions and their leaders.

Sans-I/O: a snapshot is built from a MetadataResponse with `ClusterMetadata.with_response`.
"""

from __future__ import annotations

import bisect
import dataclasses
import operator
import uuid
from collections.abc import Iterable, Mapping
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
        for topic in self.topics.values():
            _index_topic(topic, self.brokers, partitions, leaders)
        object.__setattr__(self, "_partitions", partitions)
        object.__setattr__(self, "_leaders", leaders)
        object.__setattr__(self, "_names_by_id", _names_by_id(self.topics))
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
        previous = self.topics
        topics: dict[str, TopicInfo] = {} if full else dict(previous)
        changed: list[str] = []  # topics whose TopicInfo is not the previous snapshot's
        for t in response.topics:
            topic_id = None if t.topic_id == _NO_TOPIC_ID else t.topic_id
            name = t.name
            if name is None:  # v10+: a topic requested by id alone may come back nameless
                name = self._names_by_id.get(t.topic_id) if topic_id is not None else None
                if name is None:
                    continue
            old = previous.get(name)
            if t.error_code:
                info = TopicInfo(name, topic_id, t.is_internal, (), t.error_code)
                if info == old:
                    topics[name] = old  # the same error as before: share it
                else:
                    topics[name] = info
                    changed.append(name)
                continue
            recreated = (
                old is not None
                and old.topic_id is not None
                and topic_id is not None
                and old.topic_id != topic_id
            )
            # the cached partitions, to keep a newer epoch from and to share when unchanged
            # (none when the topic is new or was recreated)
            cached_parts = () if recreated or old is None else old.partitions
            parts = _partitions(name, t.partitions, cached_parts, floors)
            if (
                old is not None
                and not old.error
                and len(parts) == len(cached_parts)
                and old.topic_id == topic_id
                and old.is_internal == t.is_internal
                and all(map(operator.is_, parts, cached_parts))
            ):
                topics[name] = old  # nothing changed: share the whole topic
                continue
            topics[name] = TopicInfo(name, topic_id, t.is_internal, tuple(parts), 0)
            changed.append(name)
        brokers: Mapping[int, BrokerNode] = {
            b.node_id: BrokerNode(b.node_id, b.host, b.port, b.rack) for b in response.brokers
        }
        if brokers == self.brokers:
            brokers = self.brokers
        controller_id = None if response.controller_id < 0 else response.controller_id
        version = self.version + 1 if version is None else version
        removed = [name for name in previous if name not in topics] if full else []
        if not previous or brokers.keys() != self.brokers.keys():
            # first snapshot, or leaders to check against another broker list: index anew
            return ClusterMetadata(
                brokers, topics, controller_id, response.cluster_id, version, now
            )
        return self._updated(
            brokers, topics, controller_id, response.cluster_id, version, now, changed, removed
        )

    def with_leaders(
        self,
        leaders: Mapping[TopicPartition, tuple[int, int]],
        nodes: Iterable[BrokerNode],
        now: float,
        version: int,
    ) -> tuple[ClusterMetadata, list[TopicPartition]]:
        """KIP-951: a snapshot with the partitions' new leaders from a Produce or Fetch
        answer, ``leaders[tp] = (leader id, leader epoch)``, and the brokers in `nodes` added
        (or updated); returns it with the partitions that moved (self when none did).

        As the Java client's ``Metadata.updatePartitionLeadership``, a leader is taken only
        if its epoch is newer than the cached one, the partition is cached, and the leader is
        a known broker or one of `nodes`; replicas and ISR stay as they were.
        """
        brokers: dict[int, BrokerNode] = dict(self.brokers)
        for node in nodes:
            brokers[node.node_id] = node
        moved: list[TopicPartition] = []
        by_topic: dict[str, dict[int, PartitionInfo]] = {}
        for tp, (leader, epoch) in leaders.items():
            current = self._partitions.get(tp)
            if current is None or leader < 0 or epoch < 0 or leader not in brokers:
                continue
            if current.leader_epoch is not None and epoch <= current.leader_epoch:
                continue
            by_topic.setdefault(tp.topic, {})[tp.partition] = dataclasses.replace(
                current, leader=leader, leader_epoch=epoch
            )
            moved.append(tp)
        if not moved:
            return self, moved
        topics = dict(self.topics)
        for name, updates in by_topic.items():
            info = topics[name]
            parts = tuple(updates.get(p.partition, p) for p in info.partitions)
            topics[name] = dataclasses.replace(info, partitions=parts)
        if brokers == self.brokers:
            brokers_map: Mapping[int, BrokerNode] = self.brokers
        else:
            brokers_map = brokers
        if brokers_map.keys() != self.brokers.keys():
            snapshot = ClusterMetadata(
                brokers_map, topics, self.controller_id, self.cluster_id, version, now
            )
        else:
            snapshot = self._updated(
                brokers_map,
                topics,
                self.controller_id,
                self.cluster_id,
                version,
                now,
                list(by_topic),
                [],
            )
        return snapshot, moved

    def _updated(
        self,
        brokers: Mapping[int, BrokerNode],
        topics: Mapping[str, TopicInfo],
        controller_id: int | None,
        cluster_id: str | None,
        version: int,
        now: float,
        changed: list[str],
        removed: list[str],
    ) -> ClusterMetadata:
        """The next snapshot, its lookup tables updated from this one's for the topics that
        changed or went (the same broker ids: the leaders of unchanged topics stay valid).

        A refresh that changes nothing shares every table; one that changes a few topics
        copies the tables and re-indexes those topics only.
        """
        partitions = self._partitions
        leaders = self._leaders
        names_by_id = self._names_by_id
        by_leader = self._by_leader
        if changed or removed:
            partitions = dict(partitions)
            leaders = dict(leaders)
            by_leader = None
            previous = self.topics
            for name in (*removed, *changed):
                old = previous.get(name)
                if old is not None:
                    for p in old.partitions:
                        key = _new_tp(TopicPartition, (name, p.partition))
                        partitions.pop(key, None)  # a name twice in a response: gone already
                        leaders.pop(key, None)
            for name in changed:
                _index_topic(topics[name], brokers, partitions, leaders)
            names_by_id = _names_by_id(topics)
        snapshot: ClusterMetadata = object.__new__(ClusterMetadata)
        init = object.__setattr__
        init(snapshot, "brokers", brokers)
        init(snapshot, "topics", topics)
        init(snapshot, "controller_id", controller_id)
        init(snapshot, "cluster_id", cluster_id)
        init(snapshot, "version", version)
        init(snapshot, "updated_ms", now)
        init(snapshot, "_partitions", partitions)
        init(snapshot, "_leaders", leaders)
        init(snapshot, "_names_by_id", names_by_id)
        init(snapshot, "_by_leader", by_leader)
        return snapshot


def _index_topic(
    topic: TopicInfo,
    brokers: Mapping[int, BrokerNode],
    partitions: dict[TopicPartition, PartitionInfo],
    leaders: dict[TopicPartition, int],
) -> None:
    """Add a topic's partitions to the lookup tables of a snapshot."""
    name = topic.name
    new_tp = _new_tp
    for p in topic.partitions:
        tp = new_tp(TopicPartition, (name, p.partition))
        partitions[tp] = p
        # A leader missing from the broker list cannot be reached: treat it as unknown.
        leader = p.leader
        if leader is not None and leader in brokers:
            leaders[tp] = leader


def _names_by_id(topics: Mapping[str, TopicInfo]) -> dict[uuid.UUID, str]:
    return {t.topic_id: t.name for t in topics.values() if t.topic_id is not None}


def _partitions(
    name: str,
    received: list[MetadataResponse.MetadataResponsePartition],
    cached_parts: tuple[PartitionInfo, ...],
    floors: Mapping[TopicPartition, int],
) -> list[PartitionInfo]:
    """A topic's partitions from a response, sorted by index.

    A partition equal to the cached one is the cached object: a refresh that changes nothing
    allocates nothing per partition (fewer objects for the garbage collector to track).
    KIP-320: a partition whose epoch is older than the cached one's (or than `floors[tp]`)
    is the cached one.
    """
    parts: list[PartitionInfo] = []
    append = parts.append
    cached_count = len(cached_parts)
    ordered = True
    last = -1
    for rp in received:
        index = rp.partition_index
        epoch = rp.leader_epoch
        if index <= last:
            ordered = False
        last = index
        cached = None
        if cached_count:
            # partitions are sorted by index, usually 0..n-1: the cached one is at its index
            if 0 <= index < cached_count and cached_parts[index].partition == index:
                cached = cached_parts[index]
            else:
                cached = _find(cached_parts, index)
        leader = None if rp.leader_id < 0 else rp.leader_id
        replicas = tuple(rp.replica_nodes)
        isr = tuple(rp.isr_nodes)
        offline = tuple(rp.offline_replicas)
        if cached is not None:
            if epoch >= 0:
                floor = -1
                if floors:
                    floor = floors.get(_new_tp(TopicPartition, (name, index)), -1)
                cached_epoch = cached.leader_epoch
                if cached_epoch is not None and cached_epoch > floor:
                    floor = cached_epoch
                if epoch < floor:
                    append(cached)  # stale response from a lagging broker
                    continue
            if (
                cached.leader_epoch == (None if epoch < 0 else epoch)
                and cached.leader == leader
                and cached.error == rp.error_code
                and cached.replicas == replicas
                and cached.isr == isr
                and cached.offline_replicas == offline
            ):
                append(cached)  # unchanged: share it
                continue
        append(
            PartitionInfo(
                name,
                index,
                leader,
                None if epoch < 0 else epoch,
                replicas,
                isr,
                offline,
                rp.error_code,
            )
        )
    if not ordered:
        parts.sort(key=_partition_index)
    return parts


def _find(parts: tuple[PartitionInfo, ...], index: int) -> PartitionInfo | None:
    """The partition with this index in partitions sorted by index, or None."""
    at = bisect.bisect_left(parts, index, key=_partition_index)
    return parts[at] if at < len(parts) and parts[at].partition == index else None


def _partition_index(p: PartitionInfo) -> int:
    return p.partition
