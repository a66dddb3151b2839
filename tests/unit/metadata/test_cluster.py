"""Tests of ClusterMetadata snapshots: lookups, KIP-320 stale epochs, full and partial updates."""

from __future__ import annotations

import uuid

import pytest

from kafkaio.metadata import BrokerNode, ClusterMetadata, TopicPartition
from kafkaio.protocol.messages import MetadataResponse
from tests.unit.metadata.responses import (
    LEADER_NOT_AVAILABLE,
    TOPIC_AUTHORIZATION_FAILED,
    partition,
    response,
    topic,
    topic_uuid,
)

TP = TopicPartition


def snapshot(*topics: MetadataResponse.MetadataResponseTopic, **kw: object) -> ClusterMetadata:
    return ClusterMetadata().with_response(response(*topics), 1000.0, **kw)  # type: ignore[arg-type]


def test_topic_partition_is_a_cheap_ordered_hashable_pair() -> None:
    a, b, c = TP("a", 1), TP("a", 0), TP("b", 0)
    assert sorted([c, a, b]) == [b, a, c]
    assert {a: 1}[TP("a", 1)] == 1
    assert a == ("a", 1)
    assert str(a) == "a-1"
    assert (a.topic, a.partition) == ("a", 1)


def test_empty_snapshot_knows_nothing() -> None:
    c = ClusterMetadata()
    assert c.version == 0
    assert c.updated_ms is None
    assert c.leader_for(TP("t", 0)) is None
    assert c.partitions_for("t") is None
    assert c.available_partitions_for("t") == []
    assert c.partitions_by_leader() == {}
    assert c.broker(1) is None


def test_snapshot_from_response_answers_lookups() -> None:
    c = snapshot(
        topic("orders", partition(1, leader=2, epoch=7), partition(0, leader=1, epoch=3)),
        topic("__consumer_offsets", partition(0, leader=3), internal=True),
    )
    assert c.version == 1
    assert c.updated_ms == 1000.0
    assert c.cluster_id == "cluster-a"
    assert c.controller_id == 1
    assert c.broker(2) == BrokerNode(2, "broker2.example", 9092, "rack0")
    assert sorted(c.brokers) == [1, 2, 3]
    assert c.leader_for(TP("orders", 0)) == 1
    assert c.leader_for(TP("orders", 1)) == 2
    assert c.leader_for(TP("orders", 2)) is None
    assert c.leader_epoch(TP("orders", 1)) == 7
    assert c.partitions_for("orders") == [0, 1]  # sorted although the response was not
    assert [p.partition for p in c.topics["orders"].partitions] == [0, 1]
    assert c.topics["__consumer_offsets"].is_internal
    assert not c.topics["orders"].is_internal
    info = c.partition(TP("orders", 1))
    assert info is not None
    assert (info.replicas, info.isr, info.offline_replicas, info.error) == ((2,), (2,), (), 0)


def test_unknown_or_unreachable_leaders_are_not_available() -> None:
    c = snapshot(
        topic(
            "t",
            partition(0, leader=1),
            partition(1, leader=-1, epoch=-1, error=LEADER_NOT_AVAILABLE),
            partition(2, leader=9),  # node 9 is not in the broker list
            partition(3, leader=3),
        )
    )
    assert c.partitions_for("t") == [0, 1, 2, 3]
    assert c.available_partitions_for("t") == [0, 3]
    assert c.leader_for(TP("t", 1)) is None
    assert c.leader_epoch(TP("t", 1)) is None
    assert c.leader_for(TP("t", 2)) is None
    p1 = c.partition(TP("t", 1))
    assert p1 is not None and p1.error == LEADER_NOT_AVAILABLE and p1.leader is None


def test_partitions_by_leader_groups_sorted_partitions() -> None:
    c = snapshot(
        topic("b", partition(0, leader=2), partition(1, leader=1)),
        topic("a", partition(1, leader=1), partition(0, leader=1), partition(2, leader=-1)),
    )
    assert dict(c.partitions_by_leader()) == {
        1: (TP("a", 0), TP("a", 1), TP("b", 1)),
        2: (TP("b", 0),),
    }
    assert c.partitions_by_leader() is c.partitions_by_leader()  # computed once


def test_topic_id_and_name_map_both_ways() -> None:
    c = snapshot(topic("a", partition(0)), topic("b", partition(0)))
    assert c.topic_id("a") == topic_uuid("a")
    assert c.topic_name(topic_uuid("b")) == "b"
    assert c.topic_id("zzz") is None
    assert c.topic_name(uuid.uuid4()) is None
    # Brokers before v10 send no id: the all-zero uuid means "none".
    old = snapshot(topic("a", partition(0), topic_id=uuid.UUID(int=0)))
    assert old.topic_id("a") is None
    assert old.topic_name(uuid.UUID(int=0)) is None


def test_nameless_topic_is_resolved_by_id_or_skipped() -> None:
    c = snapshot(topic("a", partition(0, leader=1, epoch=1)))
    renamed = c.with_response(
        response(
            topic(None, partition(0, leader=2, epoch=2), topic_id=topic_uuid("a")),
            topic(None, partition(0), topic_id=uuid.uuid4()),
        ),
        2000.0,
    )
    assert renamed.leader_for(TP("a", 0)) == 2
    assert list(renamed.topics) == ["a"]


def test_topic_error_replaces_the_topic_with_an_empty_one() -> None:
    c = snapshot(topic("t", partition(0)))
    c2 = c.with_response(response(topic("t", error=TOPIC_AUTHORIZATION_FAILED)), 2000.0)
    assert c2.topics["t"].error == TOPIC_AUTHORIZATION_FAILED
    assert c2.partitions_for("t") is None
    assert c2.available_partitions_for("t") == []
    assert c2.leader_for(TP("t", 0)) is None
    assert c.leader_for(TP("t", 0)) == 1  # the old snapshot is untouched


def test_full_response_drops_absent_topics_partial_keeps_them() -> None:
    c = snapshot(topic("a", partition(0)), topic("b", partition(0)))
    update = response(topic("a", partition(0, leader=2, epoch=1)))
    full = c.with_response(update, 2000.0, full=True)
    partial = c.with_response(update, 2000.0, full=False)
    assert set(full.topics) == {"a"}
    assert full.leader_for(TP("b", 0)) is None
    assert full.topic_name(topic_uuid("b")) is None
    assert set(partial.topics) == {"a", "b"}
    assert partial.leader_for(TP("b", 0)) == 1
    assert full.leader_for(TP("a", 0)) == partial.leader_for(TP("a", 0)) == 2


def test_brokers_always_come_from_the_response() -> None:
    c = snapshot(topic("a", partition(0, leader=3)))
    c2 = c.with_response(response(brokers=(1, 2)), 2000.0, full=False)
    assert sorted(c2.brokers) == [1, 2]
    # Topic "a" is kept by the partial update, but its leader (3) left the cluster.
    assert c2.partitions_for("a") == [0]
    assert c2.leader_for(TP("a", 0)) is None


@pytest.mark.parametrize(
    ("new_epoch", "expected_leader", "expected_epoch"),
    [
        (4, 1, 5),  # older than cached: a lagging broker, keep the cached partition
        (5, 2, 5),  # same epoch: the response wins (ISR or replicas may have changed)
        (6, 2, 6),  # newer
        (-1, 2, None),  # no epoch (old broker): cannot compare, the response wins
    ],
)
def test_stale_leader_epoch_is_ignored(
    new_epoch: int, expected_leader: int, expected_epoch: int | None
) -> None:
    c = snapshot(topic("t", partition(0, leader=1, epoch=5), partition(1, leader=1, epoch=5)))
    c2 = c.with_response(
        response(topic("t", partition(0, leader=2, epoch=new_epoch), partition(1, 3, 9))), 2.0
    )
    assert c2.leader_for(TP("t", 0)) == expected_leader
    assert c2.leader_epoch(TP("t", 0)) == expected_epoch
    assert (c2.leader_for(TP("t", 1)), c2.leader_epoch(TP("t", 1))) == (3, 9)


def test_recreated_topic_accepts_lower_epochs() -> None:
    c = snapshot(topic("t", partition(0, leader=1, epoch=8)))
    c2 = c.with_response(
        response(topic("t", partition(0, leader=2, epoch=0), topic_id=uuid.uuid4())), 2.0
    )
    assert (c2.leader_for(TP("t", 0)), c2.leader_epoch(TP("t", 0))) == (2, 0)


def test_min_leader_epochs_reject_older_responses_when_something_is_cached() -> None:
    c = snapshot(topic("t", partition(0, leader=1, epoch=3)))
    floors = {TP("t", 0): 7, TP("t", 1): 7}
    update = response(topic("t", partition(0, leader=2, epoch=6), partition(1, 2, 6)))
    c2 = c.with_response(update, 2.0, min_leader_epochs=floors)
    assert (c2.leader_for(TP("t", 0)), c2.leader_epoch(TP("t", 0))) == (1, 3)
    # Nothing cached for partition 1: the response is better than no partition at all.
    assert (c2.leader_for(TP("t", 1)), c2.leader_epoch(TP("t", 1))) == (2, 6)
    c3 = c.with_response(
        response(topic("t", partition(0, leader=3, epoch=7))), 3.0, min_leader_epochs=floors
    )
    assert (c3.leader_for(TP("t", 0)), c3.leader_epoch(TP("t", 0))) == (3, 7)


def test_versions_increase_unless_given() -> None:
    c1 = snapshot(topic("a", partition(0)))
    c2 = c1.with_response(response(), 2.0)
    c3 = c2.with_response(response(), 3.0, version=10)
    assert (c1.version, c2.version, c3.version) == (1, 2, 10)
    assert (c2.updated_ms, c3.updated_ms) == (2.0, 3.0)


@pytest.mark.parametrize("version", [1, 7, 9, 12])
def test_snapshot_from_wire_bytes(version: int) -> None:
    original = response(
        topic("orders", partition(0, leader=1, epoch=4), partition(1, leader=2, epoch=4)),
        topic("denied", error=TOPIC_AUTHORIZATION_FAILED),
    )
    decoded = MetadataResponse.decode(original.encode(version), version)
    c = ClusterMetadata().with_response(decoded, 5.0, full=True)
    assert c.leader_for(TP("orders", 1)) == 2
    assert c.partitions_for("orders") == [0, 1]
    assert c.topics["denied"].error == TOPIC_AUTHORIZATION_FAILED
    assert c.controller_id == 1
    assert c.broker(3) == BrokerNode(3, "broker3.example", 9093, "rack1")
    # Leader epochs exist from v7, cluster ids from v2, topic ids from v10.
    assert c.leader_epoch(TP("orders", 0)) == (4 if version >= 7 else None)
    assert c.cluster_id == ("cluster-a" if version >= 2 else None)
    assert c.topic_id("orders") == (topic_uuid("orders") if version >= 10 else None)
    assert c.partitions_by_leader() == {1: (TP("orders", 0),), 2: (TP("orders", 1),)}
