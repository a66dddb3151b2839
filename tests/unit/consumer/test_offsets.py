"""OffsetsManager: position resets via ListOffsets with backoff, offset lookups as events,
position waits; all on a fake clock."""

from __future__ import annotations

from typing import Any

import pytest

from kafkaio.consumer.errors import LogTruncationError, NoOffsetForPartitionError
from kafkaio.consumer.events import AwaitPositionsEvent, ListOffsetsEvent
from kafkaio.consumer.offsets import OffsetsManager
from kafkaio.consumer.subscription import (
    FetchPosition,
    FetchState,
    OffsetResetStrategy,
    SubscriptionState,
)
from kafkaio.consumer.validation import complete_validation
from kafkaio.errors import KafkaConnectionError, TopicAuthorizationFailedError
from kafkaio.protocol import messages as m
from kafkaio.runtime.requests import UnsentRequest

from .fakes import TOPIC, make_metadata, tp


def _manager(reset: str = "earliest", **kw: Any) -> tuple[SubscriptionState, OffsetsManager]:
    subs = SubscriptionState(OffsetResetStrategy.parse(reset))
    md = make_metadata()
    manager = OffsetsManager(
        subs, md, retry_backoff_ms=100, retry_backoff_max_ms=1000, rng=lambda: 0.5, **kw
    )
    return subs, manager


def _asked(request: UnsentRequest) -> dict[int, int]:
    lo: m.ListOffsetsRequest = request.request
    return {p.partition_index: p.timestamp for t in lo.topics for p in t.partitions}


def _answer(request: UnsentRequest, now: float, answers: dict[int, tuple[int, int, int]]) -> None:
    """answers: {partition: (error_code, offset, timestamp)}"""
    request.handler(
        now,
        m.ListOffsetsResponse(
            topics=[
                m.ListOffsetsResponse.ListOffsetsTopicResponse(
                    name=TOPIC,
                    partitions=[
                        m.ListOffsetsResponse.ListOffsetsPartitionResponse(
                            partition_index=p,
                            error_code=code,
                            offset=offset,
                            timestamp=ts,
                            leader_epoch=5,
                        )
                        for p, (code, offset, ts) in answers.items()
                    ],
                )
            ]
        ),
        None,
    )


def test_initializing_partitions_reset_per_leader_with_the_strategy() -> None:
    subs, manager = _manager("earliest")
    subs.assign_from_user([tp(0), tp(1), tp(2)])
    requests = {r.node_id: r for r in manager.poll(0).requests}
    assert _asked(requests[1]) == {0: -2, 2: -2}
    assert _asked(requests[2]) == {1: -2}
    assert manager.poll(1).requests == []  # in flight: not asked twice
    _answer(requests[1], 2, {0: (0, 40, -1), 2: (0, 7, -1)})
    assert subs.position(tp(0)).offset == 40 and subs.position(tp(0)).offset_epoch == 5
    assert subs.state(tp(2)).fetch_state is FetchState.FETCHING
    assert subs.state(tp(1)).fetch_state is FetchState.AWAIT_RESET


def test_latest_reset_and_seek_to_end_strategy() -> None:
    subs, manager = _manager("latest")
    subs.assign_from_user([tp(1)])
    (request,) = manager.poll(0).requests
    assert _asked(request) == {1: -1}


def test_reset_retries_with_exponential_backoff() -> None:
    subs2, manager2 = _manager()
    subs2.assign_from_user([tp(1)])
    sent_at = []
    now = 0.0
    while now <= 2000 and len(sent_at) < 4:
        result = manager2.poll(now)
        for request in result.requests:
            sent_at.append(now)
            _answer(request, now, {1: (6, -1, -1)})
        now += 10
    # backoff 100, 200, 400 ms (rng 0.5: no jitter offset)
    assert sent_at == [0.0, 100.0, 300.0, 700.0]
    assert subs2.state(tp(1)).fetch_state is FetchState.AWAIT_RESET


def test_reset_result_ignored_after_a_seek() -> None:
    subs, manager = _manager()
    subs.assign_from_user([tp(1)])
    (request,) = manager.poll(0).requests
    subs.seek(tp(1), 99)
    _answer(request, 1, {1: (0, 3, -1)})
    assert subs.position(tp(1)).offset == 99


def test_reset_none_is_not_sent_and_position_wait_fails() -> None:
    subs, manager = _manager("none")
    subs.assign_from_user([tp(0)])
    assert manager.poll(0).requests == []
    event = AwaitPositionsEvent(1000, (tp(0),))
    manager.await_positions(event, 0)
    assert event.done
    with pytest.raises(NoOffsetForPartitionError, match="t-0"):
        event.result()


def test_a_truncation_found_with_reset_none_fails_the_position_wait_until_a_seek() -> None:
    subs, manager = _manager("none")
    subs.assign_from_user([tp(0)])
    subs.seek_unvalidated(tp(0), FetchPosition(40, offset_epoch=3))
    waiting = AwaitPositionsEvent(1000, (tp(0),))
    manager.await_positions(waiting, 0)
    assert not waiting.done
    error = complete_validation(subs, tp(0), 40, 3, end_epoch=3, end_offset=30)
    assert isinstance(error, LogTruncationError)
    manager.poll(1)
    with pytest.raises(LogTruncationError):  # before: waited until its deadline
        waiting.result()
    again = AwaitPositionsEvent(1000, (tp(0),))
    manager.await_positions(again, 2)
    with pytest.raises(LogTruncationError):
        again.result()
    subs.seek(tp(0), 30)  # what the application does about it
    after = AwaitPositionsEvent(1000, (tp(0),))
    manager.await_positions(after, 3)
    assert after.result() == {tp(0): 30}


def test_no_reset_when_a_group_supplies_committed_offsets() -> None:
    subs, manager = _manager(initialize_without_group=False)
    subs.assign_from_user([tp(0)])
    assert manager.poll(0).requests == []
    assert subs.state(tp(0)).fetch_state is FetchState.INITIALIZING


def test_position_wait_completes_after_reset() -> None:
    subs, manager = _manager()
    subs.assign_from_user([tp(1)])
    event = AwaitPositionsEvent(1000, (tp(1),))
    manager.await_positions(event, 0)
    (request,) = manager.poll(0).requests
    assert not event.done
    _answer(request, 5, {1: (0, 12, -1)})
    manager.poll(6)
    assert event.result() == {tp(1): 12}


def test_list_offsets_event_by_timestamp() -> None:
    _, manager = _manager()
    event = ListOffsetsEvent(10_000, {tp(0): 1_000, tp(1): 2_000})
    manager.list_offsets(event, 0)
    requests = {r.node_id: r for r in manager.poll(0).requests}
    assert _asked(requests[1]) == {0: 1_000} and _asked(requests[2]) == {1: 2_000}
    _answer(requests[1], 1, {0: (0, 17, 1_005)})
    assert not event.done
    _answer(requests[2], 1, {1: (0, -1, -1)})  # no record at/after the timestamp
    assert event.result() == {tp(0): (17, 1_005, 5), tp(1): None}


def test_list_offsets_timestamp_match_without_timestamp_means_none() -> None:
    _, manager = _manager()
    event = ListOffsetsEvent(10_000, {tp(1): 5_000})
    manager.list_offsets(event, 0)
    (request,) = manager.poll(0).requests
    _answer(request, 1, {1: (0, 0, -1)})
    assert event.result() == {tp(1): None}


def test_list_offsets_retries_retriable_errors_then_fails_fatal_ones() -> None:
    _, manager = _manager()
    event = ListOffsetsEvent(10_000, {tp(1): -1})
    manager.list_offsets(event, 0)
    (request,) = manager.poll(0).requests
    request.handler(1, None, KafkaConnectionError("gone"))
    assert manager.poll(50).requests == []
    (request,) = manager.poll(101).requests
    _answer(request, 102, {1: (29, -1, -1)})  # TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(TopicAuthorizationFailedError):
        event.result()


def test_a_lookup_of_a_partition_being_reset_waits_instead_of_dropping_the_reset() -> None:
    """end_offsets() right after assign(): the reset and the lookup of one partition share
    the poll; each gets its own answer (before, the lookup replaced the reset in the request
    and the partition stayed unreset: the consumer never fetched it)."""
    subs, manager = _manager("earliest")
    subs.assign_from_user([tp(1)])
    event = ListOffsetsEvent(10_000, {tp(1): -1})
    manager.list_offsets(event, 0)
    (request,) = manager.poll(0).requests
    assert _asked(request) == {1: -2}  # the reset
    _answer(request, 1, {1: (0, 3, -1)})
    assert subs.position(tp(1)).offset == 3
    (request,) = manager.poll(2).requests
    assert _asked(request) == {1: -1}  # then the lookup
    _answer(request, 3, {1: (0, 10, -1)})
    assert event.done and event.result() == {tp(1): (10, -1, 5)}
