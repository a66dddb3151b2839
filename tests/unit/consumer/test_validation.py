"""PositionValidationManager and complete_validation (KIP-320) on a fake clock: leader changes,
committed epochs, truncation per auto_offset_reset, retries and brokers without the API."""

from __future__ import annotations

from typing import Any

import pytest

from kafkaio.consumer.errors import LogTruncationError
from kafkaio.consumer.subscription import (
    FetchPosition,
    FetchState,
    OffsetResetStrategy,
    SubscriptionState,
)
from kafkaio.consumer.validation import PositionValidationManager, complete_validation
from kafkaio.errors import (
    ClusterAuthorizationFailedError,
    FencedLeaderEpochError,
    KafkaConnectionError,
    TopicAuthorizationFailedError,
    UnknownLeaderEpochError,
    UnsupportedVersionError,
)
from kafkaio.metadata.manager import MetadataManager
from kafkaio.protocol import messages as m
from kafkaio.runtime.requests import PollResult, UnsentRequest
from kafkaio.structs import OffsetAndMetadata

from .fakes import TOPIC, make_metadata, metadata_response, tp

FENCED = FencedLeaderEpochError.code
UNKNOWN_EPOCH = UnknownLeaderEpochError.code


class Harness:
    def __init__(self, reset: str = "earliest", *, epoch: int = 5) -> None:
        self.subs = SubscriptionState(OffsetResetStrategy.parse(reset))
        self.md: MetadataManager = make_metadata(epoch=epoch)  # p0, p2 on node 1; p1 on 2
        self.errors: list[BaseException] = []
        # rng 0.5 makes the jitter factor exactly 1: delays are 100, 200, 400... ms
        self.manager = PositionValidationManager(
            self.subs,
            self.md,
            self.errors.append,
            retry_backoff_ms=100,
            retry_backoff_max_ms=1000,
            rng=lambda: 0.5,
        )

    def poll(self, now: float = 0.0) -> PollResult:
        return self.manager.poll(now)

    def new_metadata(self, now: float = 0.0, **kwargs: Any) -> None:
        self.md.on_response(now, metadata_response(**kwargs))

    def state(self, partition: int) -> FetchState:
        return self.subs.state(tp(partition)).fetch_state

    def position(self, partition: int) -> FetchPosition:
        position = self.subs.position(tp(partition))
        assert position is not None
        return position


def asked(request: UnsentRequest) -> dict[int, tuple[int, int]]:
    """{partition: (current_leader_epoch, leader_epoch)} of an OffsetForLeaderEpoch request."""
    req = request.request
    assert isinstance(req, m.OffsetForLeaderEpochRequest)
    assert req.replica_id == -1
    assert all(t.topic == TOPIC for t in req.topics)
    return {
        p.partition: (p.current_leader_epoch, p.leader_epoch)
        for t in req.topics
        for p in t.partitions
    }


def answer(request: UnsentRequest, now: float, answers: dict[int, tuple[int, int, int]]) -> None:
    """answers: {partition: (error_code, leader_epoch, end_offset)}"""
    request.handler(
        now,
        m.OffsetForLeaderEpochResponse(
            topics=[
                m.OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(
                    topic=TOPIC,
                    partitions=[
                        m.OffsetForLeaderEpochResponse.EpochEndOffset(
                            error_code=code, partition=p, leader_epoch=epoch, end_offset=end
                        )
                        for p, (code, epoch, end) in answers.items()
                    ],
                )
            ]
        ),
        None,
    )


def only_request(result: PollResult) -> UnsentRequest:
    assert len(result.requests) == 1, result.requests
    return result.requests[0]


# -- leader changes ---------------------------------------------------------------------------


def test_leader_move_validates_against_the_new_leader_with_both_epochs() -> None:
    h = Harness()
    h.subs.assign_from_user([tp(0), tp(1)])
    h.subs.seek(tp(0), 10, offset_epoch=3)
    h.subs.seek(tp(1), 4)  # no epoch: nothing to validate
    assert h.poll().requests == []
    assert h.state(0) is FetchState.FETCHING
    # p0 moves from node 1 to node 3 with epoch 6; p1 stays on node 2 but its epoch bumps too
    h.new_metadata(leaders={0: 3, 1: 2, 2: 1}, epoch=6)
    request = only_request(h.poll(1.0))
    assert request.node_id == 3
    assert asked(request) == {0: (6, 3)}
    assert h.state(0) is FetchState.AWAIT_VALIDATION
    assert h.state(1) is FetchState.FETCHING
    assert (h.position(1).leader_id, h.position(1).leader_epoch) == (2, 6)
    assert h.poll(2.0).requests == []  # one request in flight per partition
    answer(request, 3.0, {0: (0, 3, 25)})
    assert h.state(0) is FetchState.FETCHING
    assert h.position(0) == FetchPosition(10, 3, 3, 6)
    assert h.errors == []
    assert h.poll(4.0).requests == []


def test_epoch_bump_on_the_same_leader_is_validated_too() -> None:
    h = Harness()
    h.subs.assign_from_user([tp(0)])
    h.subs.seek(tp(0), 10, offset_epoch=5)
    h.poll()
    h.new_metadata(epoch=7)
    request = only_request(h.poll(1.0))
    assert (request.node_id, asked(request)) == (1, {0: (7, 5)})


def test_unchanged_metadata_sends_nothing() -> None:
    h = Harness()
    h.subs.assign_from_user([tp(0)])
    h.subs.seek(tp(0), 10, offset_epoch=5)
    h.poll()
    h.new_metadata(epoch=5)  # a refresh with the same leaders and epochs
    assert h.poll(1.0).requests == []
    assert h.state(0) is FetchState.FETCHING


def test_a_seek_after_the_leader_moved_is_not_validated_but_later_moves_are() -> None:
    h = Harness()
    h.subs.assign_from_user([tp(0)])
    h.poll()
    h.new_metadata(leaders={0: 2, 1: 2, 2: 1}, epoch=6)
    h.poll(1.0)
    h.subs.seek(tp(0), 10, offset_epoch=6)  # positioned while node 2 leads
    assert h.poll(2.0).requests == []
    h.new_metadata(leaders={0: 3, 1: 2, 2: 1}, epoch=7)
    request = only_request(h.poll(3.0))
    assert (request.node_id, asked(request)) == (3, {0: (7, 6)})


def test_a_leader_move_during_validation_is_validated_again() -> None:
    h = Harness()
    h.subs.assign_from_user([tp(0)])
    h.subs.seek_unvalidated(tp(0), FetchPosition(10, offset_epoch=3))
    first = only_request(h.poll())
    h.new_metadata(leaders={0: 2, 1: 2, 2: 1}, epoch=6)
    assert h.poll(1.0).requests == []  # still in flight
    answer(first, 2.0, {0: (0, 3, 30)})  # node 1 answered for its (old) epoch
    second = only_request(h.poll(3.0))
    assert (second.node_id, asked(second)) == (2, {0: (6, 3)})


# -- committed offsets and other components ---------------------------------------------------


def test_committed_position_with_epoch_is_validated_with_the_current_leader() -> None:
    h = Harness()
    h.subs.assign_from_user([tp(0), tp(1), tp(2)])
    for p in (0, 1, 2):
        h.subs.seek_unvalidated(tp(p), FetchPosition(100 + p, offset_epoch=4))
    requests = {r.node_id: asked(r) for r in h.poll().requests}
    assert requests == {1: {0: (5, 4), 2: (5, 4)}, 2: {1: (5, 4)}}


def test_positions_without_epochs_or_metadata_epochs_skip_validation() -> None:
    h = Harness(epoch=-1)  # old brokers' metadata has no leader epochs
    h.subs.assign_from_user([tp(0), tp(1)])
    h.subs.seek_unvalidated(tp(0), FetchPosition(10, offset_epoch=4))
    assert h.poll().requests == []
    assert h.state(0) is FetchState.FETCHING
    h2 = Harness()
    h2.subs.assign_from_user([tp(0)])
    h2.subs.seek_unvalidated(tp(0), FetchPosition(10))  # a component found no epoch
    assert h2.poll().requests == []
    assert h2.state(0) is FetchState.FETCHING
    assert h2.position(0).offset == 10


def test_unknown_leader_waits_for_metadata() -> None:
    h = Harness()
    h.subs.assign_from_user([tp(3)])  # not in the metadata
    h.subs.seek_unvalidated(tp(3), FetchPosition(10, offset_epoch=4))
    assert h.md.time_to_next_update(1_000.0) > 0
    assert h.poll().requests == []
    assert h.md.time_to_next_update(1_000.0) == 0
    assert h.state(3) is FetchState.AWAIT_VALIDATION


def test_answer_for_a_position_that_moved_is_ignored() -> None:
    h = Harness()
    h.subs.assign_from_user([tp(0)])
    h.subs.seek_unvalidated(tp(0), FetchPosition(10, offset_epoch=3))
    request = only_request(h.poll())
    h.subs.seek(tp(0), 50)  # the application seeked meanwhile
    answer(request, 1.0, {0: (0, 3, 5)})  # would be a truncation of offset 10
    assert h.state(0) is FetchState.FETCHING
    assert h.position(0).offset == 50
    assert h.errors == []


# -- truncation -------------------------------------------------------------------------------


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_truncation_moves_the_position_to_the_divergent_offset(reset: str) -> None:
    h = Harness(reset)
    h.subs.assign_from_user([tp(0)])
    h.subs.seek_unvalidated(tp(0), FetchPosition(10, offset_epoch=3))
    answer(only_request(h.poll()), 1.0, {0: (0, 3, 7)})
    assert h.state(0) is FetchState.FETCHING
    position = h.position(0)
    assert (position.offset, position.offset_epoch) == (7, 3)
    assert h.errors == []


def test_truncation_without_reset_policy_reports_log_truncation_until_a_seek() -> None:
    h = Harness("none")
    h.subs.assign_from_user([tp(0), tp(2)])
    h.subs.seek_unvalidated(tp(0), FetchPosition(10, offset_epoch=3))
    h.subs.seek_unvalidated(tp(2), FetchPosition(20, offset_epoch=3))
    answer(only_request(h.poll()), 1.0, {0: (0, 2, 7), 2: (0, 3, 40)})
    [error] = h.errors
    assert isinstance(error, LogTruncationError)
    assert error.positions == {tp(0): 10}
    assert error.divergent_offsets == {tp(0): OffsetAndMetadata(7, "", 2)}
    assert "auto_offset_reset is 'none'" in str(error)
    assert h.state(0) is FetchState.AWAIT_VALIDATION
    assert h.state(2) is FetchState.FETCHING
    assert h.poll(5_000.0).requests == []  # not asked again: the application must seek
    h.subs.seek(tp(0), 7, offset_epoch=2)
    assert h.poll(6_000.0).requests == []
    assert h.state(0) is FetchState.FETCHING
    h.subs.seek_unvalidated(tp(0), FetchPosition(9, offset_epoch=2))
    assert asked(only_request(h.poll(7_000.0))) == {0: (5, 2)}


@pytest.mark.parametrize(("reset", "strategy"), [("earliest", "EARLIEST"), ("latest", "LATEST")])
def test_undefined_epoch_resets_per_auto_offset_reset(reset: str, strategy: str) -> None:
    h = Harness(reset)
    h.subs.assign_from_user([tp(0)])
    h.subs.seek_unvalidated(tp(0), FetchPosition(10, offset_epoch=3))
    answer(only_request(h.poll()), 1.0, {0: (0, -1, -1)})
    st = h.subs.state(tp(0))
    assert st.fetch_state is FetchState.AWAIT_RESET
    assert st.reset_strategy is OffsetResetStrategy[strategy]
    assert h.errors == []


def test_undefined_epoch_without_reset_policy_reports_log_truncation() -> None:
    h = Harness("none")
    h.subs.assign_from_user([tp(0)])
    h.subs.seek_unvalidated(tp(0), FetchPosition(10, offset_epoch=3))
    answer(only_request(h.poll()), 1.0, {0: (0, -1, -1)})
    [error] = h.errors
    assert isinstance(error, LogTruncationError)
    assert error.positions == {tp(0): 10}
    assert error.divergent_offsets == {tp(0): None}
    assert h.state(0) is FetchState.AWAIT_VALIDATION


def test_v0_answer_without_epoch_counts_as_the_requested_epochs_end() -> None:
    h = Harness()
    h.subs.assign_from_user([tp(0), tp(2)])
    h.subs.seek_unvalidated(tp(0), FetchPosition(10, offset_epoch=3))
    h.subs.seek_unvalidated(tp(2), FetchPosition(10, offset_epoch=3))
    answer(only_request(h.poll()), 1.0, {0: (0, -1, 12), 2: (0, -1, 8)})
    assert h.state(0) is FetchState.FETCHING and h.position(0).offset == 10
    assert h.state(2) is FetchState.FETCHING
    assert (h.position(2).offset, h.position(2).offset_epoch) == (8, 3)


def test_complete_validation_handles_a_fetch_diverging_epoch() -> None:
    subs = SubscriptionState(OffsetResetStrategy.EARLIEST)
    subs.assign_from_user([tp(0)])
    subs.seek(tp(0), 10, offset_epoch=3)
    assert complete_validation(subs, tp(0), 11, 3, 3, 6) is None  # not the position: ignored
    assert subs.position(tp(0)) == FetchPosition(10, 3)
    assert complete_validation(subs, tp(0), 10, 3, 3, 6) is None
    assert subs.position(tp(0)) == FetchPosition(6, 3)
    assert subs.state(tp(0)).fetch_state is FetchState.FETCHING
    strict = SubscriptionState(OffsetResetStrategy.NONE)
    strict.assign_from_user([tp(0)])
    strict.seek(tp(0), 10, offset_epoch=3)
    error = complete_validation(strict, tp(0), 10, 3, 2, 6)
    assert isinstance(error, LogTruncationError)
    assert strict.state(tp(0)).fetch_state is FetchState.AWAIT_VALIDATION  # fetching stops


# -- errors and retries -----------------------------------------------------------------------


def test_fenced_epoch_refreshes_metadata_then_retries_after_backoff() -> None:
    h = Harness()
    h.subs.assign_from_user([tp(0)])
    h.subs.seek_unvalidated(tp(0), FetchPosition(10, offset_epoch=3))
    assert h.md.time_to_next_update(1_000.0) > 0
    answer(only_request(h.poll(0.0)), 10.0, {0: (FENCED, -1, -1)})
    assert h.md.time_to_next_update(1_000.0) == 0  # refresh asked for
    assert h.state(0) is FetchState.AWAIT_VALIDATION
    assert h.poll(500.0).requests == []  # backoff over, but no newer metadata yet
    h.new_metadata(600.0, epoch=8)
    request = only_request(h.poll(600.0))
    assert asked(request) == {0: (8, 3)}
    answer(request, 601.0, {0: (0, 3, 10)})
    assert h.state(0) is FetchState.FETCHING


def test_fenced_epoch_waits_for_the_backoff_even_with_new_metadata() -> None:
    h = Harness()
    h.subs.assign_from_user([tp(0)])
    h.subs.seek_unvalidated(tp(0), FetchPosition(10, offset_epoch=3))
    answer(only_request(h.poll(0.0)), 10.0, {0: (FENCED, -1, -1)})
    h.new_metadata(50.0, epoch=8)
    result = h.poll(50.0)
    assert result.requests == [] and result.next_poll_ms == 60.0
    assert asked(only_request(h.poll(110.0))) == {0: (8, 3)}


def test_unknown_leader_epoch_retries_with_growing_backoff() -> None:
    h = Harness()
    h.subs.assign_from_user([tp(0)])
    h.subs.seek_unvalidated(tp(0), FetchPosition(10, offset_epoch=3))
    assert h.md.time_to_next_update(1_000.0) > 0
    answer(only_request(h.poll(0.0)), 0.0, {0: (UNKNOWN_EPOCH, -1, -1)})
    assert h.md.time_to_next_update(1_000.0) == 0  # a refresh, without waiting for it
    result = h.poll(50.0)
    assert result.requests == [] and result.next_poll_ms == 50.0
    request = only_request(h.poll(100.0))
    assert asked(request) == {0: (5, 3)}
    answer(request, 100.0, {0: (UNKNOWN_EPOCH, -1, -1)})
    assert h.poll(299.0).requests == []  # second delay: 200 ms
    answer(only_request(h.poll(300.0)), 300.0, {0: (0, 3, 11)})
    assert h.state(0) is FetchState.FETCHING
    assert h.errors == []


def test_connection_error_retries_after_backoff_and_refreshes_metadata() -> None:
    h = Harness()
    h.subs.assign_from_user([tp(0)])
    h.subs.seek_unvalidated(tp(0), FetchPosition(10, offset_epoch=3))
    assert h.md.time_to_next_update(1_000.0) > 0
    only_request(h.poll(0.0)).handler(0.0, None, KafkaConnectionError("connection lost"))
    assert h.md.time_to_next_update(1_000.0) == 0
    assert h.poll(99.0).requests == []
    assert asked(only_request(h.poll(100.0))) == {0: (5, 3)}
    assert h.errors == []


def test_non_retriable_partition_error_is_reported_and_retried() -> None:
    h = Harness()
    h.subs.assign_from_user([tp(0)])
    h.subs.seek_unvalidated(tp(0), FetchPosition(10, offset_epoch=3))
    answer(only_request(h.poll(0.0)), 0.0, {0: (TopicAuthorizationFailedError.code, -1, -1)})
    [error] = h.errors
    assert isinstance(error, TopicAuthorizationFailedError)
    assert h.state(0) is FetchState.AWAIT_VALIDATION
    assert len(h.poll(100.0).requests) == 1


def test_partition_missing_from_the_answer_is_retried() -> None:
    h = Harness()
    h.subs.assign_from_user([tp(0), tp(2)])
    h.subs.seek_unvalidated(tp(0), FetchPosition(10, offset_epoch=3))
    h.subs.seek_unvalidated(tp(2), FetchPosition(10, offset_epoch=3))
    answer(only_request(h.poll(0.0)), 0.0, {0: (0, 3, 10)})
    assert h.state(0) is FetchState.FETCHING
    assert h.state(2) is FetchState.AWAIT_VALIDATION
    assert asked(only_request(h.poll(100.0))) == {2: (5, 3)}


# -- brokers without OffsetForLeaderEpoch -----------------------------------------------------


def test_unsupported_api_skips_validation_for_that_broker_from_then_on() -> None:
    h = Harness()
    h.subs.assign_from_user([tp(0), tp(1)])
    h.subs.seek_unvalidated(tp(0), FetchPosition(10, offset_epoch=3))
    request = only_request(h.poll(0.0))
    request.handler(0.0, None, UnsupportedVersionError("no OffsetForLeaderEpoch", api="x"))
    assert h.state(0) is FetchState.FETCHING
    assert h.position(0).offset == 10
    assert h.manager.unsupported_nodes == frozenset({1})
    # a later committed offset led by node 1 is trusted; one led by node 2 is still checked
    h.subs.seek_unvalidated(tp(0), FetchPosition(20, offset_epoch=4))
    h.subs.seek_unvalidated(tp(1), FetchPosition(20, offset_epoch=4))
    request = only_request(h.poll(1.0))
    assert (request.node_id, asked(request)) == (2, {1: (5, 4)})
    assert h.state(0) is FetchState.FETCHING
    # a leader move onto node 1 is not validated either
    h.subs.seek(tp(0), 30, offset_epoch=4)
    h.poll(2.0)
    h.new_metadata(leaders={0: 1, 1: 1, 2: 1}, epoch=6)
    result = h.poll(3.0)
    assert result.requests == []
    assert h.state(0) is FetchState.FETCHING
    assert h.errors == []


def test_cluster_authorization_failure_of_old_versions_skips_validation() -> None:
    h = Harness()
    h.subs.assign_from_user([tp(0)])
    h.subs.seek_unvalidated(tp(0), FetchPosition(10, offset_epoch=3))
    code = ClusterAuthorizationFailedError.code
    answer(only_request(h.poll(0.0)), 0.0, {0: (code, -1, -1)})
    assert h.state(0) is FetchState.FETCHING
    assert h.errors == []


def test_revoked_partitions_are_forgotten() -> None:
    h = Harness()
    h.subs.assign_from_user([tp(0), tp(1)])
    h.subs.seek_unvalidated(tp(0), FetchPosition(10, offset_epoch=3))
    answer(only_request(h.poll(0.0)), 0.0, {0: (UNKNOWN_EPOCH, -1, -1)})
    h.subs.assign_from_user([tp(1)])
    h.poll(1.0)
    h.subs.assign_from_user([tp(0), tp(1)])
    h.subs.seek_unvalidated(tp(0), FetchPosition(10, offset_epoch=3))
    assert len(h.poll(2.0).requests) == 1  # no leftover backoff from before the revocation


def test_position_in_the_leaders_current_epoch_needs_no_request() -> None:
    h = Harness()  # epoch 5
    h.subs.assign_from_user([tp(0), tp(2)])
    h.subs.seek_unvalidated(tp(0), FetchPosition(10, offset_epoch=5))
    h.subs.seek_unvalidated(tp(2), FetchPosition(10, offset_epoch=6))  # newer than metadata
    assert asked(only_request(h.poll())) == {2: (5, 6)}
    assert h.state(0) is FetchState.FETCHING
    assert h.position(0) == FetchPosition(10, 5, 1, 5)
