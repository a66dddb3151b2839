"""The acknowledgement state machine: ACQUIRED -> PENDING -> IN_FLIGHT -> settled, on a fake clock."""

from __future__ import annotations

import pytest

from kafkaio.errors import InvalidRecordStateError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.share.acknowledgements import GAP, Acknowledgements, AcknowledgeType, DeliveryState
from kafkaio.share.errors import (
    AcknowledgementError,
    AcquisitionLockTimeoutError,
    ShareSessionResetError,
)

TP = TopicPartition("t", 0)
LOCK = 30_000.0


def held(*offsets: int, now: float = 0.0, count: int = 1, session: int = 1) -> Acknowledgements:
    acks = Acknowledgements()
    for o in offsets:
        assert acks.acquired(TP, o, count, now + LOCK, node_id=1, session_id=session)
    return acks


def test_consecutive_offsets_of_one_type_form_one_batch() -> None:
    acks = held(10, 11, 12, 14)
    for o in (10, 11, 12, 14):
        acks.acknowledge(TP, o, AcknowledgeType.ACCEPT, now=1.0)
    batches, offsets = acks.take(TP)
    assert offsets == (10, 11, 12, 14)
    assert [(b.first_offset, b.last_offset, b.acknowledge_types) for b in batches] == [
        (10, 12, [1]),
        (14, 14, [1]),
    ]
    assert {acks.state(TP, o) for o in offsets} == {DeliveryState.IN_FLIGHT}


def test_mixed_types_are_sent_one_per_offset_and_gaps_as_zero() -> None:
    acks = held(0, 1, 2, 3)
    acks.acknowledge(TP, 0, AcknowledgeType.ACCEPT, 0.0)
    acks.acknowledge(TP, 1, AcknowledgeType.RELEASE, 0.0)
    acks.acknowledge_gap(TP, 2)
    acks.acknowledge(TP, 3, AcknowledgeType.REJECT, 0.0)
    batches, _ = acks.take(TP)
    assert [(b.first_offset, b.last_offset, b.acknowledge_types) for b in batches] == [
        (0, 3, [1, 2, GAP, 3])
    ]


def test_only_pending_offsets_are_taken() -> None:
    acks = held(0, 1)
    acks.acknowledge(TP, 1, AcknowledgeType.ACCEPT, 0.0)
    assert acks.pending_partitions() == [TP]
    assert acks.pending_partitions(node_id=2) == []
    _, offsets = acks.take(TP)
    assert offsets == (1,)
    assert acks.pending_partitions() == []
    assert acks.state(TP, 0) is DeliveryState.ACQUIRED


def test_ack_after_the_lock_deadline_fails_and_forgets_the_record() -> None:
    acks = held(5, now=1_000.0)
    with pytest.raises(AcquisitionLockTimeoutError, match="lock expired 1 ms ago"):
        acks.acknowledge(TP, 5, AcknowledgeType.ACCEPT, now=1_000.0 + LOCK + 1)
    assert acks.state(TP, 5) is None


def test_ack_just_before_the_deadline_applies() -> None:
    acks = held(5, now=1_000.0)
    acks.acknowledge(TP, 5, AcknowledgeType.ACCEPT, now=1_000.0 + LOCK - 1)
    assert acks.state(TP, 5) is DeliveryState.PENDING


def test_double_and_unknown_acks_are_refused() -> None:
    acks = held(1)
    acks.acknowledge(TP, 1, AcknowledgeType.ACCEPT, 0.0)
    with pytest.raises(AcknowledgementError, match="already acknowledged \\(ACCEPT\\)"):
        acks.acknowledge(TP, 1, AcknowledgeType.REJECT, 0.0)
    with pytest.raises(AcknowledgementError, match="not a record this consumer holds"):
        acks.acknowledge(TP, 2, AcknowledgeType.ACCEPT, 0.0)


def test_a_repeated_delivery_is_ignored_but_a_redelivery_replaces_the_old_copy() -> None:
    acks = held(7, count=1)
    assert acks.acquired(TP, 7, 1, LOCK, node_id=1, session_id=1) is None  # the same again
    assert acks.acquired(TP, 7, 2, 2 * LOCK, node_id=1, session_id=1) is not None
    with pytest.raises(AcquisitionLockTimeoutError, match="delivery 1.*delivery 2"):
        acks.acknowledge(TP, 7, AcknowledgeType.ACCEPT, 0.0, delivery_count=1)
    acks.acknowledge(TP, 7, AcknowledgeType.ACCEPT, 0.0, delivery_count=2)
    assert not acks.unacknowledged(TP, 7, 2)


def test_complete_settles_in_flight_offsets_with_the_error() -> None:
    acks = held(0, 1)
    acks.acknowledge(TP, 0, AcknowledgeType.ACCEPT, 0.0)
    acks.acknowledge(TP, 1, AcknowledgeType.ACCEPT, 0.0)
    assert acks.outstanding() == {TP: {0, 1}}
    _, offsets = acks.take(TP)
    error = InvalidRecordStateError("lock expired on the broker")
    outcome = acks.complete(TP, offsets, error)
    assert outcome.offsets == (0, 1) and outcome.error is error
    assert len(acks) == 0 and acks.outstanding() == {}


def test_session_end_fails_pending_acks_and_drops_held_records() -> None:
    acks = held(0, 1, 2, session=1)
    acks.acquired(TP, 3, 1, LOCK, node_id=1, session_id=2)  # a newer session: untouched
    acks.acknowledge(TP, 0, AcknowledgeType.ACCEPT, 0.0)
    acks.acknowledge(TP, 1, AcknowledgeType.ACCEPT, 0.0)
    acks.take(TP)  # 0 and 1 in flight
    acks.acknowledge(TP, 2, AcknowledgeType.RELEASE, 0.0)  # pending
    outcomes = acks.session_ended(1, 1, "SHARE_SESSION_NOT_FOUND")
    assert [(o.offsets, type(o.error)) for o in outcomes] == [((2,), ShareSessionResetError)]
    # in-flight ones wait for their own request's answer
    assert acks.state(TP, 0) is DeliveryState.IN_FLIGHT
    assert acks.state(TP, 3) is DeliveryState.ACQUIRED


def test_is_held_and_forget_expired_follow_the_clock() -> None:
    acks = held(0, 1, now=0.0)
    assert acks.is_held(TP, 0, now=LOCK - 1)
    assert not acks.is_held(TP, 0, now=LOCK)
    assert acks.state(TP, 0) is None
    assert acks.forget_expired(now=LOCK) == 1
    assert len(acks) == 0
