"""In-flight table: wrapping correlation ids, ordering, the pipelining limit, fail-all."""

from __future__ import annotations

import math
from typing import Any

import pytest

from kafkaio.errors import KafkaConnectionError, KafkaError, KafkaProtocolError
from kafkaio.net.inflight import INT32_MAX, CorrelationIds, InFlightRequests


class Slot:
    def __init__(self) -> None:
        self.result: Any = None
        self.error: BaseException | None = None

    def complete(self, value: Any) -> bool:
        self.result = value
        return True

    def fail(self, error: BaseException) -> bool:
        self.error = error
        return True


def test_correlation_ids_wrap_at_int32_max() -> None:
    ids = CorrelationIds(INT32_MAX - 1)
    assert [ids.next() for _ in range(4)] == [INT32_MAX - 1, INT32_MAX, 0, 1]


def test_correlation_id_start_is_validated() -> None:
    with pytest.raises(ValueError):
        CorrelationIds(-1)


def test_responses_complete_in_order() -> None:
    table: InFlightRequests[Slot] = InFlightRequests(3)
    for cid in (7, 8, 9):
        table.add(cid, 3, 12, 0.0, math.inf, Slot())
    assert [table.pop_response(c).correlation_id for c in (7, 8, 9)] == [7, 8, 9]
    assert len(table) == 0


def test_out_of_order_response_is_protocol_error() -> None:
    table: InFlightRequests[Slot] = InFlightRequests(3)
    table.add(1, 3, 12, 0.0, math.inf, Slot())
    table.add(2, 3, 12, 0.0, math.inf, Slot())
    with pytest.raises(KafkaProtocolError, match="out of order"):
        table.pop_response(2)
    assert len(table) == 2  # unchanged: the caller fails everything


def test_unknown_correlation_id_is_protocol_error() -> None:
    table: InFlightRequests[Slot] = InFlightRequests(3)
    table.add(1, 3, 12, 0.0, math.inf, Slot())
    with pytest.raises(KafkaProtocolError, match="unknown correlation id"):
        table.pop_response(99)
    with pytest.raises(KafkaProtocolError, match="no request was in flight"):
        InFlightRequests[Slot](1).pop_response(1)


def test_limit() -> None:
    table: InFlightRequests[Slot] = InFlightRequests(2)
    table.add(1, 0, 9, 0.0, math.inf, Slot())
    assert not table.full
    table.add(2, 0, 9, 0.0, math.inf, Slot())
    assert table.full
    with pytest.raises(KafkaError, match="limit is 2"):
        table.add(3, 0, 9, 0.0, math.inf, Slot())
    table.pop_response(1)
    table.add(3, 0, 9, 0.0, math.inf, Slot())
    assert len(table) == 2
    with pytest.raises(ValueError):
        InFlightRequests[Slot](0)


def test_fail_all_with_one_error_and_with_factory() -> None:
    table: InFlightRequests[Slot] = InFlightRequests(5)
    slots = [Slot() for _ in range(3)]
    for cid, slot in enumerate(slots):
        table.add(cid, 3, 12, 0.0, math.inf, slot)
    error = KafkaConnectionError("gone")
    failed = table.fail_all(error)
    assert [e.correlation_id for e in failed] == [0, 1, 2]
    assert all(s.error is error for s in slots) and len(table) == 0

    slots = [Slot() for _ in range(2)]
    for cid, slot in enumerate(slots):
        table.add(cid, 3, 12, 0.0, math.inf, slot)
    table.fail_all(lambda e: KafkaConnectionError(f"request {e.correlation_id}"))
    assert [str(s.error) for s in slots] == ["request 0", "request 1"]
    assert slots[0].error is not slots[1].error


def test_deadlines() -> None:
    table: InFlightRequests[Slot] = InFlightRequests(5)
    assert table.next_deadline() is None
    table.add(1, 3, 12, 0.0, 10.0, Slot())
    table.add(2, 3, 12, 0.0, math.inf, Slot())
    table.add(3, 3, 12, 0.0, 5.0, Slot())
    assert table.next_deadline() == 5.0
    assert [e.correlation_id for e in table.expired(4.9)] == []
    assert [e.correlation_id for e in table.expired(10.0)] == [1, 3]
    assert len(table) == 3
    assert table.expired(10.0)[0].timeout == 10.0


def test_fail_all_skips_requests_without_a_slot_and_survives_a_failing_callback() -> None:
    class Raising(Slot):
        def fail(self, error: BaseException) -> bool:
            raise RuntimeError("a callback bug")

    table: InFlightRequests[Slot | None] = InFlightRequests(5)
    after = Slot()
    table.add(1, 18, 3, 0.0, math.inf, None)  # the connection's own request (ApiVersions)
    table.add(2, 3, 12, 0.0, 1.0, Raising())
    table.add(3, 3, 12, 0.0, 1.0, after)
    failed = table.fail_all(KafkaConnectionError("gone"))
    assert [e.correlation_id for e in failed] == [1, 2, 3]
    assert isinstance(after.error, KafkaConnectionError) and len(table) == 0
