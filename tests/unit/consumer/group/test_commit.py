"""CommitManager on a fake clock: auto-commit cadence, sync retries, fencing, OffsetFetch."""

from __future__ import annotations

import pytest

from kafkaio.consumer.group.commit import CommitManager
from kafkaio.consumer.group.coordinator import CoordinatorManager
from kafkaio.consumer.group.errors import CommitFailedError
from kafkaio.consumer.group.events import PartitionsLost
from kafkaio.consumer.subscription import FetchState, OffsetResetStrategy, SubscriptionState
from kafkaio.errors import (
    KafkaError,
    KafkaTimeoutError,
    RebalanceInProgressError,
    UnknownTopicOrPartitionError,
)
from kafkaio.metadata.cluster import TopicPartition as TP
from kafkaio.protocol import messages as m
from kafkaio.runtime.requests import UnsentRequest
from kafkaio.structs import OffsetAndMetadata as OM

from .harness import Group
from .support import answer, discover, only, wire

CommitResp = m.OffsetCommitResponse
T0, T1, T2 = TP("t", 0), TP("t", 1), TP("t", 2)
COORDINATOR_LOAD_IN_PROGRESS = 14
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22


def commit_ok(req: UnsentRequest, now: float, code: int = 0, version: int = 9) -> None:
    topics = [
        CommitResp.OffsetCommitResponseTopic(
            t.name,
            [
                CommitResp.OffsetCommitResponsePartition(p.partition_index, code)
                for p in t.partitions
            ],
        )
        for t in req.request.topics
    ]
    answer(req, now, CommitResp(topics=topics), version)


def committed_offsets(req: UnsentRequest) -> dict[TP, int]:
    return {
        TP(t.name, p.partition_index): p.committed_offset
        for t in req.request.topics
        for p in t.partitions
    }


def stable_group() -> Group:
    g = Group()
    g.join_stable([T0, T1])
    for tp in (T0, T1):
        g.subs.seek(tp, 10)
    return g


def test_auto_commit_cadence_commits_only_what_changed() -> None:
    g = stable_group()
    start = g.now
    assert g.commits.poll(g.now).requests == []  # starts the interval
    assert g.commits.poll(start + 4999).requests == []
    (req,) = g.commits.poll(start + 5000).requests
    assert committed_offsets(req) == {T0: 10, T1: 10}
    assert req.request.generation_id_or_member_epoch == 1 and req.request.member_id == "m1"
    commit_ok(req, start + 5001)
    assert g.commits.poll(start + 10_000).requests == []  # nothing consumed since
    g.subs.advance(T1, 15, None)
    (req,) = g.commits.poll(start + 15_000).requests
    assert committed_offsets(req) == {T1: 15}
    assert g.commits.poll(start + 15_001).next_poll_ms == pytest.approx(4999)


def test_auto_commit_retries_after_backoff_on_retriable_errors() -> None:
    g = stable_group()
    g.commits.poll(0)
    (req,) = g.commits.poll(5000).requests
    commit_ok(req, 5000, COORDINATOR_LOAD_IN_PROGRESS)
    assert g.commits.poll(5050).requests == []
    (req,) = g.commits.poll(5100).requests
    assert committed_offsets(req) == {T0: 10, T1: 10}


def test_commit_sync_retries_until_its_deadline_then_times_out() -> None:
    g = stable_group()
    handle = g.commits.commit_sync({T0: OM(11, "meta", 4)}, deadline_ms=g.now + 1000)
    attempts = 0
    while not handle.done:
        for req in g.commits.poll(g.now).requests:
            attempts += 1
            (p,) = wire(req.request, 9).topics[0].partitions
            assert (p.committed_offset, p.committed_leader_epoch, p.committed_metadata) == (
                11,
                4,
                "meta",
            )
            commit_ok(req, g.now, COORDINATOR_LOAD_IN_PROGRESS)
        g.advance(10)
    assert attempts == 3  # at 0, 200 and 600 ms; the next (1400) is past the deadline
    assert isinstance(handle.error, KafkaTimeoutError)
    assert "COORDINATOR_LOAD_IN_PROGRESS" in str(handle.error)


def test_commit_sync_follows_the_coordinator_after_not_coordinator() -> None:
    g = stable_group()
    handle = g.commits.commit_sync({T0: OM(12)}, deadline_ms=g.now + 5000)
    commit_ok(only(g.commits.poll(g.now).requests, m.OffsetCommitRequest), g.now, NOT_COORDINATOR)
    assert g.coordinator.coordinator is None
    g.advance(200)
    discover(g.coordinator, g.now, node_id=3)
    req = only(g.commits.poll(g.now).requests, m.OffsetCommitRequest)
    assert req.node_id == g.coordinator.coordinator.connection_id  # type: ignore[union-attr]
    commit_ok(req, g.now, version=2)
    assert handle.value == {T0: OM(12)} and handle.error is None


def test_commit_async_does_not_retry() -> None:
    g = stable_group()
    handle = g.commits.commit_async({T0: OM(12)})
    commit_ok(
        only(g.commits.poll(g.now).requests, m.OffsetCommitRequest),
        g.now,
        COORDINATOR_LOAD_IN_PROGRESS,
    )
    assert handle.done and handle.error is not None and handle.error.retriable


def test_commit_with_a_stale_generation_fails_and_fences_the_member() -> None:
    g = stable_group()
    handle = g.commits.commit_sync({T0: OM(12)}, deadline_ms=g.now + 5000)
    commit_ok(
        only(g.commits.poll(g.now).requests, m.OffsetCommitRequest), g.now, ILLEGAL_GENERATION
    )
    assert isinstance(handle.error, CommitFailedError)
    (event,) = g.member.drain_events()
    assert event == PartitionsLost(frozenset({T0, T1}))


def test_commit_during_a_rebalance_fails_with_rebalance_in_progress() -> None:
    g = stable_group()
    g.member.request_rejoin("test")
    g.poll()
    g.member.drain_events()
    g.member.on_revocation_done(g.now)  # now JOINING
    handle = g.commits.commit_sync({T0: OM(12)}, deadline_ms=g.now + 5000)
    assert g.commits.poll(g.now).requests == []
    assert isinstance(handle.error, RebalanceInProgressError)


def manual(
    *, validate_positions: bool = False
) -> tuple[SubscriptionState, CoordinatorManager, CommitManager]:
    subs = SubscriptionState(OffsetResetStrategy.EARLIEST)
    coordinator = CoordinatorManager("g", 100, 1000, backoff_jitter=0)
    discover(coordinator, 0)
    commits = CommitManager(
        "g",
        subs,
        coordinator,
        None,
        auto_commit=False,
        validate_positions=validate_positions,
        backoff_jitter=0,
    )
    return subs, coordinator, commits


def fetch_response_v8(rows: list[tuple[TP, int, int, str]], code: int = 0) -> m.OffsetFetchResponse:
    R = m.OffsetFetchResponse
    topics: dict[str, list[R.OffsetFetchResponsePartitions]] = {}
    for tp, offset, epoch, meta in rows:
        topics.setdefault(tp.topic, []).append(
            R.OffsetFetchResponsePartitions(tp.partition, offset, epoch, meta, code)
        )
    return R(
        groups=[
            R.OffsetFetchResponseGroup(
                "g", [R.OffsetFetchResponseTopics(t, ps) for t, ps in topics.items()], 0
            )
        ]
    )


def fetch_response_v3(rows: list[tuple[TP, int, int, str]], code: int = 0) -> m.OffsetFetchResponse:
    R = m.OffsetFetchResponse
    topics: dict[str, list[R.OffsetFetchResponsePartition]] = {}
    for tp, offset, epoch, meta in rows:
        topics.setdefault(tp.topic, []).append(
            R.OffsetFetchResponsePartition(tp.partition, offset, epoch, meta, code)
        )
    return R(topics=[R.OffsetFetchResponseTopic(t, ps) for t, ps in topics.items()])


def test_user_assigned_commits_carry_no_generation() -> None:
    subs, _, commits = manual()
    subs.assign_from_user([T0])
    handle = commits.commit_async({T0: OM(5)})
    req = only(commits.poll(0).requests, m.OffsetCommitRequest)
    assert (req.request.generation_id_or_member_epoch, req.request.member_id) == (-1, "")
    commit_ok(req, 0)
    assert handle.value == {T0: OM(5)}


@pytest.mark.parametrize(("version", "build"), [(9, fetch_response_v8), (5, fetch_response_v3)])
def test_assignment_positions_come_from_committed_offsets(version: int, build: object) -> None:
    subs, _, commits = manual(validate_positions=True)
    subs.assign_from_user([T0, T1, T2])
    (req,) = commits.poll(0).requests
    for v in (3, 9):  # both layouts ask for the same partitions
        decoded = wire(req.request, v)
        topics = decoded.groups[0].topics if v >= 8 else decoded.topics
        assert [(t.name, t.partition_indexes) for t in topics] == [("t", [0, 1, 2])]
    assert commits.poll(1).requests == []  # one lookup in flight
    answer(req, 2, build([(T0, 40, 3, ""), (T1, 7, -1, "m"), (T2, -1, -1, "")]), version)  # type: ignore[operator]
    st0, st1, st2 = subs.state(T0), subs.state(T1), subs.state(T2)
    assert st0.fetch_state is FetchState.AWAIT_VALIDATION  # epoch known: validate first
    assert (st0.position.offset, st0.position.offset_epoch) == (40, 3)  # type: ignore[union-attr]
    assert st1.fetch_state is FetchState.FETCHING and st1.position.offset == 7  # type: ignore[union-attr]
    assert (
        st2.fetch_state is FetchState.AWAIT_RESET
        and st2.reset_strategy is OffsetResetStrategy.EARLIEST
    )


def test_without_validation_a_committed_epoch_is_kept_and_fetching_starts() -> None:
    subs, _, commits = manual()
    subs.assign_from_user([T0])
    (req,) = commits.poll(0).requests
    answer(req, 2, fetch_response_v8([(T0, 40, 3, "")]), 9)
    st0 = subs.state(T0)
    assert st0.fetch_state is FetchState.FETCHING
    assert (st0.position.offset, st0.position.offset_epoch) == (40, 3)  # type: ignore[union-attr]


def test_a_seek_during_the_lookup_wins() -> None:
    subs, _, commits = manual()
    subs.assign_from_user([T0])
    (req,) = commits.poll(0).requests
    subs.seek(T0, 99)
    answer(req, 1, fetch_response_v8([(T0, 40, 3, "")]), 9)
    assert subs.position(T0).offset == 99  # type: ignore[union-attr]


def test_partitions_assigned_after_an_unsubscribe_get_their_committed_offsets() -> None:
    subs, _, commits = manual()
    subs.assign_from_user([T0])
    (stale,) = commits.poll(0).requests  # T0's lookup, in flight when the app unsubscribes
    commits.fail_pending(KafkaError("the consumer unsubscribed"))
    subs.unsubscribe()
    answer(stale, 1, fetch_response_v8([(T0, 40, -1, "")]), 9)  # a late answer: ignored
    subs.assign_from_user([T1])
    (req,) = commits.poll(2).requests
    assert [t.partition_indexes for t in req.request.groups[0].topics] == [[1]]
    answer(req, 3, fetch_response_v8([(T1, 7, -1, "")]), 9)
    assert subs.position(T1).offset == 7  # type: ignore[union-attr]


def test_fetch_committed_reports_missing_offsets_and_errors() -> None:
    subs, _, commits = manual()
    handle = commits.fetch_committed([T0, T1], deadline_ms=1000)
    (req,) = commits.poll(0).requests
    answer(req, 1, fetch_response_v8([(T0, 5, 2, "x"), (T1, -1, -1, "")]), 8)
    assert handle.value == {T0: OM(5, "x", 2), T1: None}
    handle = commits.fetch_committed([T0], deadline_ms=1000)
    (req,) = commits.poll(2).requests
    answer(req, 3, fetch_response_v8([(T0, -1, -1, "")], code=3), 8)  # UNKNOWN_TOPIC_OR_PARTITION
    assert not handle.done  # retriable: tried again after the backoff
    (req,) = commits.poll(300).requests
    answer(req, 300, fetch_response_v8([(T0, 6, -1, "")]), 8)
    assert handle.value == {T0: OM(6)}
    assert UnknownTopicOrPartitionError.retriable
