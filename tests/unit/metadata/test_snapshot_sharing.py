"""Tests of how a snapshot reuses its predecessor: unchanged partitions and topics are the same
objects, lookup tables follow the topics that changed, and a chain of updates answers every
lookup as a snapshot built from scratch over the same topics does."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaio.metadata import ClusterMetadata, PartitionInfo, TopicInfo, TopicPartition
from kafkaio.protocol.messages import MetadataResponse
from tests.unit.metadata.responses import (
    LEADER_NOT_AVAILABLE,
    TOPIC_AUTHORIZATION_FAILED,
    Partition,
    Topic,
    partition,
    response,
    topic,
    topic_uuid,
)

TP = TopicPartition


def _refresh(*topics: Topic) -> MetadataResponse:
    return response(*topics)


def test_a_refresh_that_changes_nothing_shares_every_partition_and_topic() -> None:
    first = ClusterMetadata().with_response(
        _refresh(
            topic("a", partition(0, leader=1, epoch=2), partition(1, leader=2, epoch=2)),
            topic("b", partition(0, leader=3, epoch=0)),
        ),
        1.0,
        full=True,
    )
    leaders = first.partitions_by_leader()
    second = first.with_response(
        _refresh(
            topic("a", partition(1, leader=2, epoch=2), partition(0, leader=1, epoch=2)),
            topic("b", partition(0, leader=3, epoch=0)),
        ),
        2.0,
        full=True,
    )
    assert second.version == 2 and second.updated_ms == 2.0
    assert second.topics["a"] is first.topics["a"]
    assert second.topics["b"] is first.topics["b"]
    assert second.partitions_by_leader() == leaders
    assert second.leader_for(TP("a", 1)) == 2
    assert second.topic_name(topic_uuid("b")) == "b"


def test_a_changed_partition_is_new_and_the_others_are_shared() -> None:
    first = ClusterMetadata().with_response(
        _refresh(
            topic("a", *(partition(i, leader=1, epoch=1) for i in range(4))),
            topic("b", partition(0, leader=1, epoch=1)),
        ),
        1.0,
    )
    assert dict(first.partitions_by_leader()) == {
        1: (TP("a", 0), TP("a", 1), TP("a", 2), TP("a", 3), TP("b", 0))
    }
    moved = Partition(0, 2, 3, 2, [3, 1], [3], [])  # partition 2 moved to node 3, epoch 2
    second = first.with_response(
        _refresh(
            topic("a", *(moved if i == 2 else partition(i, leader=1, epoch=1) for i in range(4))),
            topic("b", partition(0, leader=1, epoch=1)),
        ),
        2.0,
    )
    old, new = first.topics["a"].partitions, second.topics["a"].partitions
    assert [n is o for n, o in zip(new, old, strict=True)] == [True, True, False, True]
    assert new[2] == PartitionInfo("a", 2, 3, 2, (3, 1), (3,), (), 0)
    assert second.topics["b"] is first.topics["b"]
    assert second.leader_for(TP("a", 2)) == 3 and second.leader_epoch(TP("a", 2)) == 2
    assert dict(second.partitions_by_leader()) == {
        1: (TP("a", 0), TP("a", 1), TP("a", 3), TP("b", 0)),
        3: (TP("a", 2),),
    }
    # the previous snapshot is untouched
    assert first.leader_for(TP("a", 2)) == 1
    assert len(first.partitions_by_leader()[1]) == 5


def test_replicas_isr_and_error_changes_make_a_new_partition() -> None:
    first = ClusterMetadata().with_response(_refresh(topic("t", partition(0))), 1.0)
    for changed in (
        Partition(0, 0, 1, 0, [1, 2], [1], []),  # a replica added
        Partition(0, 0, 1, 0, [1], [], []),  # out of the ISR
        Partition(0, 0, 1, 0, [1], [1], [1]),  # offline
        Partition(LEADER_NOT_AVAILABLE, 0, 1, 0, [1], [1], []),
    ):
        second = first.with_response(_refresh(topic("t", changed)), 2.0)
        p = second.partition(TP("t", 0))
        assert p is not None and p is not first.partition(TP("t", 0))
        assert (p.replicas, p.isr, p.offline_replicas, p.error) == (
            tuple(changed.replica_nodes),
            tuple(changed.isr_nodes),
            tuple(changed.offline_replicas),
            changed.error_code,
        )


def test_an_unchanged_topic_error_is_kept_by_a_full_refresh() -> None:
    first = ClusterMetadata().with_response(
        _refresh(topic("t", error=TOPIC_AUTHORIZATION_FAILED), topic("u", partition(0))),
        1.0,
        full=True,
    )
    second = first.with_response(
        _refresh(topic("t", error=TOPIC_AUTHORIZATION_FAILED), topic("u", partition(0))),
        2.0,
        full=True,
    )
    assert second.topics["t"] is first.topics["t"]
    assert second.topics["t"].error == TOPIC_AUTHORIZATION_FAILED
    # the error clears: the topic comes back with its partitions
    third = second.with_response(_refresh(topic("t", partition(0, leader=2))), 3.0, full=True)
    assert third.leader_for(TP("t", 0)) == 2
    assert third.topics["t"].error == 0
    assert "u" not in third.topics and third.partition(TP("u", 0)) is None


def test_a_broker_leaving_unsets_the_leader_of_unchanged_partitions() -> None:
    first = ClusterMetadata().with_response(
        _refresh(topic("t", partition(0, leader=3), partition(1, leader=1))), 1.0
    )
    second = first.with_response(
        response(topic("t", partition(0, leader=3), partition(1, leader=1)), brokers=(1, 2)), 2.0
    )
    assert second.topics["t"] is first.topics["t"]
    assert second.leader_for(TP("t", 0)) is None
    assert second.available_partitions_for("t") == [1]
    assert dict(second.partitions_by_leader()) == {1: (TP("t", 1),)}


# -- a chain of random updates against a model of the rules ---------------------------------

NAMES = ("a", "b", "c")
IDS = {name: (topic_uuid(name), uuid.uuid5(topic_uuid(name), "recreated")) for name in NAMES}
NODES = (1, 2, 3, 4)


@st.composite
def partitions(draw: st.DrawFn) -> list[Partition]:
    indexes = draw(st.lists(st.integers(0, 5), unique=True, max_size=5))
    node_lists = st.lists(st.sampled_from(NODES), max_size=3)
    return [
        Partition(
            draw(st.sampled_from((0, 0, LEADER_NOT_AVAILABLE))),
            index,
            draw(st.sampled_from((-1, *NODES))),
            draw(st.integers(-1, 3)),
            draw(node_lists),
            draw(node_lists),
            draw(st.lists(st.sampled_from(NODES), max_size=1)),
        )
        for index in indexes
    ]


@st.composite
def responses(draw: st.DrawFn) -> tuple[MetadataResponse, bool, dict[TopicPartition, int]]:
    topics = []
    for name in draw(st.lists(st.sampled_from(NAMES), max_size=4)):
        topic_id = draw(st.sampled_from(IDS[name]))
        error = draw(st.sampled_from((0, 0, 0, TOPIC_AUTHORIZATION_FAILED)))
        nameless = draw(st.booleans()) and draw(st.booleans())
        topics.append(
            Topic(error, None if nameless else name, topic_id, False, [] if error else draw(partitions()))
        )
    brokers = tuple(draw(st.lists(st.sampled_from(NODES), min_size=1, max_size=4, unique=True)))
    floors = draw(
        st.dictionaries(st.tuples(st.sampled_from(NAMES), st.integers(0, 5)), st.integers(0, 3))
    )
    return (
        response(*topics, brokers=brokers),
        draw(st.booleans()),
        {TP(*k): v for k, v in floors.items()},
    )


def _model(
    previous: ClusterMetadata,
    update: MetadataResponse,
    full: bool,
    floors: dict[TopicPartition, int],
) -> dict[str, TopicInfo]:
    """The topics with_response promises, rule by rule, without any sharing."""
    topics = {} if full else dict(previous.topics)
    for t in update.topics:
        topic_id = None if t.topic_id == uuid.UUID(int=0) else t.topic_id
        name = t.name if t.name is not None else previous.topic_name(t.topic_id)
        if name is None:
            continue
        if t.error_code:
            topics[name] = TopicInfo(name, topic_id, t.is_internal, (), t.error_code)
            continue
        old = previous.topics.get(name)
        recreated = old is not None and old.topic_id not in (None, topic_id)
        cached = {} if old is None or recreated else {p.partition: p for p in old.partitions}
        parts = []
        for rp in t.partitions:
            new = PartitionInfo(
                name,
                rp.partition_index,
                rp.leader_id if rp.leader_id >= 0 else None,
                rp.leader_epoch if rp.leader_epoch >= 0 else None,
                tuple(rp.replica_nodes),
                tuple(rp.isr_nodes),
                tuple(rp.offline_replicas),
                rp.error_code,
            )
            kept = cached.get(rp.partition_index)
            if kept is not None and rp.leader_epoch >= 0:
                floor = max(
                    floors.get(TP(name, rp.partition_index), -1),
                    -1 if kept.leader_epoch is None else kept.leader_epoch,
                )
                if rp.leader_epoch < floor:
                    new = kept
            parts.append(new)
        parts.sort(key=lambda p: p.partition)
        topics[name] = TopicInfo(name, topic_id, t.is_internal, tuple(parts), 0)
    return topics


def _lookups(c: ClusterMetadata) -> tuple[object, ...]:
    tps = [TP(name, i) for name in NAMES for i in range(6)]
    return (
        [c.partition(tp) for tp in tps],
        [c.leader_for(tp) for tp in tps],
        [c.leader_epoch(tp) for tp in tps],
        [(c.partitions_for(n), c.available_partitions_for(n), c.topic_id(n)) for n in NAMES],
        [c.topic_name(i) for ids in IDS.values() for i in ids],
        dict(c.partitions_by_leader()),
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(responses(), min_size=1, max_size=6))
def test_a_chain_of_updates_follows_the_rules_and_shares_what_did_not_change(
    updates: list[tuple[MetadataResponse, bool, dict[TopicPartition, int]]],
) -> None:
    snapshot = ClusterMetadata()
    for i, (update, full, floors) in enumerate(updates):
        snapshot.partitions_by_leader()  # cached on the snapshot a next one may share it with
        expected = _model(snapshot, update, full, floors)
        nxt = snapshot.with_response(update, float(i), full=full, min_leader_epochs=floors)
        assert dict(nxt.topics) == expected
        # every lookup answers as a snapshot indexed from scratch over the same topics
        fresh = ClusterMetadata(nxt.brokers, nxt.topics, nxt.controller_id, nxt.cluster_id)
        assert _lookups(nxt) == _lookups(fresh)
        for name, info in nxt.topics.items():
            old = snapshot.topics.get(name)
            if old is None:
                continue
            if info == old:
                assert info is old
            if info.topic_id == old.topic_id:
                olds = {p.partition: p for p in old.partitions}
                for p in info.partitions:
                    if p == olds.get(p.partition):
                        assert p is olds[p.partition]
        snapshot = nxt
