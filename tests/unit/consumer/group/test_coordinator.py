"""CoordinatorManager: lookups, both response layouts, backoff, mark_unknown, fatal errors."""

from __future__ import annotations

import pytest

from kafkaio.consumer.group.coordinator import CoordinatorManager, coordinator_connection_id
from kafkaio.errors import GroupAuthorizationFailedError, KafkaConnectionError
from kafkaio.protocol import messages as m

from .support import answer, fail, wire

COORD_NOT_AVAILABLE = 15
GROUP_AUTHORIZATION_FAILED = 30


def manager(**kw: object) -> CoordinatorManager:
    return CoordinatorManager("g", 100, 1000, backoff_jitter=0, **kw)  # type: ignore[arg-type]


def v4(node: int, code: int = 0) -> m.FindCoordinatorResponse:
    return m.FindCoordinatorResponse(
        coordinators=[
            m.FindCoordinatorResponse.Coordinator("g", node, f"b{node}", 9000 + node, code, None)
        ]
    )


def test_request_carries_the_key_for_old_and_new_versions() -> None:
    (req,) = manager().poll(0).requests
    assert req.node_id is None  # any broker
    for version in range(0, 4):
        assert wire(req.request, version).key == "g"
    for version in range(4, 7):
        decoded = wire(req.request, version)
        assert decoded.coordinator_keys == ["g"] and decoded.key_type == 0


def test_batched_response_sets_the_coordinator_with_a_separate_connection_id() -> None:
    c = manager()
    (req,) = c.poll(0).requests
    assert c.poll(1).requests == []  # one lookup at a time
    answer(req, 5, v4(3), 4)
    assert c.coordinator is not None
    assert (c.coordinator.node_id, c.coordinator.host, c.coordinator.port) == (3, "b3", 9003)
    assert c.coordinator.connection_id == coordinator_connection_id(3) == 2**31 - 4
    assert c.addresses() == {2**31 - 4: ("b3", 9003)}
    assert c.poll(10).requests == []  # known: nothing to send


def test_old_response_layout_and_plain_node_id_option() -> None:
    c = manager(separate_connection=False)
    (req,) = c.poll(0).requests
    answer(req, 1, m.FindCoordinatorResponse(node_id=2, host="b2", port=9092), 3)
    assert c.coordinator is not None and c.coordinator.connection_id == 2


def test_retriable_errors_back_off_exponentially() -> None:
    c = manager()
    (req,) = c.poll(0).requests
    answer(req, 0, v4(-1, COORD_NOT_AVAILABLE), 4)
    assert c.coordinator is None and c.drain_errors() == []
    result = c.poll(50)
    assert result.requests == [] and result.next_poll_ms == pytest.approx(150)  # 100 * 2**1
    (req,) = c.poll(200).requests
    fail(req, 200, KafkaConnectionError("refused"))
    assert c.poll(500).requests == []  # 200 + 400
    (req,) = c.poll(600).requests
    answer(req, 600, v4(1), 4)
    assert c.coordinator is not None and c.last_error is None


def test_mark_unknown_looks_up_again_after_the_base_backoff() -> None:
    c = manager()
    (req,) = c.poll(0).requests
    answer(req, 0, v4(1), 4)
    epoch = c.epoch
    c.mark_unknown(50, "NOT_COORDINATOR")
    assert c.coordinator is None and c.epoch > epoch
    assert c.poll(60).requests == []  # lookups at least retry_backoff_ms apart
    (req,) = c.poll(100).requests
    answer(req, 100, v4(2), 4)
    assert c.coordinator is not None and c.coordinator.node_id == 2


def test_group_authorization_failure_reaches_the_application_and_is_retried() -> None:
    c = manager()
    (req,) = c.poll(0).requests
    answer(req, 0, v4(-1, GROUP_AUTHORIZATION_FAILED), 4)
    (error,) = c.drain_errors()
    assert isinstance(error, GroupAuthorizationFailedError)
    assert c.drain_errors() == []
    assert len(c.poll(1000).requests) == 1
