"""ShareMembershipManager: join, heartbeat schedule, assignment, fencing, errors and leave."""

from __future__ import annotations

import uuid
from typing import Any

from kafkaio.backoff import ExponentialBackoff
from kafkaio.consumer.group.coordinator import CoordinatorManager
from kafkaio.errors import GroupAuthorizationFailedError, KafkaConnectionError
from kafkaio.protocol import messages as m
from kafkaio.runtime.requests import UnsentRequest
from kafkaio.share.membership import MemberState, ShareMembershipManager
from kafkaio.share.protocol import ShareGroupHeartbeatRequestV1

TOPIC_ID = uuid.UUID(int=7)
BACKOFF_AFTER_ONE_FAILURE = ExponentialBackoff(100, 1000, jitter=0.0).delay_ms(1)
NOT_COORDINATOR, FENCED, UNKNOWN_MEMBER, GROUP_AUTH = 16, 110, 25, 30


def coordinator() -> CoordinatorManager:
    coord = CoordinatorManager("g", backoff_jitter=0.0)
    [request] = coord.poll(0.0).requests
    request.handler(0.0, m.FindCoordinatorResponse(node_id=2, host="h", port=1), None)
    assert coord.coordinator is not None
    return coord


def member(coord: CoordinatorManager | None = None) -> ShareMembershipManager:
    return ShareMembershipManager(
        "g", ["b", "a", "a"], coord or coordinator(), member_id="me", backoff_jitter=0.0
    )


def response(
    epoch: int,
    *,
    error: int = 0,
    interval: int = 1000,
    parts: list[int] | None = None,
    member_id: str | None = "me",
) -> m.ShareGroupHeartbeatResponse:
    assignment = None
    if parts is not None:
        assignment = m.ShareGroupHeartbeatResponse.Assignment(
            [m.ShareGroupHeartbeatResponse.TopicPartitions(TOPIC_ID, parts)]
        )
    return m.ShareGroupHeartbeatResponse(
        error_code=error,
        member_id=member_id,
        member_epoch=epoch,
        heartbeat_interval_ms=interval,
        assignment=assignment,
    )


def one(mgr: ShareMembershipManager, now: float) -> UnsentRequest:
    result = mgr.poll(now)
    assert len(result.requests) == 1, result
    return result.requests[0]


def answer(
    req: UnsentRequest, now: float, resp: Any = None, error: BaseException | None = None
) -> None:
    req.handler(now, resp, error)


def test_nothing_is_sent_before_join() -> None:
    mgr = member()
    assert mgr.poll(0.0).requests == []
    assert mgr.state is MemberState.UNSUBSCRIBED


def test_join_heartbeat_then_schedule_on_the_interval() -> None:
    mgr = member()
    mgr.join()
    req = one(mgr, 0.0)
    body = req.request
    assert isinstance(body, ShareGroupHeartbeatRequestV1)
    assert (body.member_epoch, body.subscribed_topic_names, body.member_id) == (0, ["a", "b"], "me")
    assert req.node_id == 2**31 - 1 - 2  # the coordinator's own connection
    assert mgr.poll(1.0).requests == []  # one heartbeat in flight at a time
    answer(req, 10.0, response(3, interval=1000, parts=[0, 2]))
    assert mgr.state is MemberState.STABLE and mgr.member_epoch == 3
    assert mgr.assignment == {TOPIC_ID: frozenset({0, 2})}
    assert mgr.poll(500.0).next_poll_ms == 510.0
    req = one(mgr, 1010.0)
    assert (req.request.member_epoch, req.request.subscribed_topic_names) == (3, None)
    answer(req, 1011.0, response(3))  # no assignment field: unchanged
    assert mgr.assignment == {TOPIC_ID: frozenset({0, 2})}


def test_the_coordinators_member_id_is_adopted() -> None:
    mgr = member()
    mgr.join()
    answer(one(mgr, 0.0), 0.0, response(1, member_id="theirs"))
    assert mgr.member_id == "theirs"


def test_fenced_member_rejoins_at_once_with_epoch_zero_and_no_assignment() -> None:
    for code in (FENCED, UNKNOWN_MEMBER):
        mgr = member()
        mgr.join()
        answer(one(mgr, 0.0), 0.0, response(4, parts=[1]))
        version = mgr.assignment_version
        answer(one(mgr, 5_000.0), 5_000.0, response(0, error=code))
        assert mgr.state is MemberState.JOINING and mgr.assignment == {}
        assert mgr.assignment_version == version + 1
        req = one(mgr, 5_000.0)
        assert (req.request.member_epoch, req.request.subscribed_topic_names) == (0, ["a", "b"])


def test_not_coordinator_looks_the_coordinator_up_again_after_a_backoff() -> None:
    coord = coordinator()
    mgr = member(coord)
    mgr.join()
    answer(one(mgr, 0.0), 0.0, response(0, error=NOT_COORDINATOR))
    assert coord.coordinator is None
    assert mgr.poll(1.0).requests == []  # no coordinator to send to
    assert mgr.state is MemberState.JOINING and mgr.fatal_error is None


def test_a_lost_connection_retries_with_exponential_backoff() -> None:
    coord = coordinator()
    mgr = member(coord)
    mgr.join()
    answer(one(mgr, 0.0), 0.0, error=KafkaConnectionError("gone"))
    assert coord.coordinator is None  # a lost connection may mean the coordinator moved
    [lookup] = coord.poll(100.0).requests  # lookups are 100 ms apart
    lookup.handler(100.0, m.FindCoordinatorResponse(node_id=2, host="h", port=1), None)
    delay = BACKOFF_AFTER_ONE_FAILURE
    assert mgr.poll(100.0).next_poll_ms == delay - 100.0
    assert one(mgr, delay).request.member_epoch == 0


def test_a_non_retriable_error_is_fatal() -> None:
    mgr = member()
    mgr.join()
    answer(one(mgr, 0.0), 0.0, response(0, error=GROUP_AUTH))
    assert mgr.state is MemberState.FATAL
    assert isinstance(mgr.fatal_error, GroupAuthorizationFailedError)
    assert mgr.poll(10_000.0).requests == []


def test_leave_sends_epoch_minus_one_then_left() -> None:
    mgr = member()
    mgr.join()
    answer(one(mgr, 0.0), 0.0, response(5, parts=[0]))
    mgr.leave()
    assert mgr.is_leaving and mgr.assignment == {}
    req = one(mgr, 1.0)  # at once, not on the heartbeat interval
    assert req.request.member_epoch == -1 and req.request.subscribed_topic_names is None
    answer(req, 2.0, response(-1, member_id=None))
    assert mgr.state is MemberState.LEFT
    assert mgr.poll(10_000.0).requests == []


def test_leave_while_the_join_is_in_flight_leaves_right_after_it() -> None:
    mgr = member()
    mgr.join()
    join = one(mgr, 0.0)
    mgr.leave()
    assert mgr.poll(1.0).requests == []
    answer(join, 2.0, response(1, member_id="given"))
    req = one(mgr, 2.0)
    assert (req.request.member_epoch, req.request.member_id) == (-1, "given")


def test_leave_before_joining_needs_no_request() -> None:
    mgr = member()
    mgr.leave()
    assert mgr.state is MemberState.LEFT
