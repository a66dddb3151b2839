"""Fetch sessions (KIP-227): the per-node state machine, and a FetchManager reading through a
simulated broker that keeps sessions as KIP-227 specifies (a Kafka broker does; Tansu 0.6
and librdkafka's mock cluster do not, so this is where sessions are exercised)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kafkaio.consumer.fetch_session import (
    FETCH_SESSION_ID_NOT_FOUND,
    FINAL_EPOCH,
    INVALID_FETCH_SESSION_EPOCH,
    FetchSession,
    SessionPartition,
)
from kafkaio.errors import KafkaConnectionError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.protocol import messages as m
from kafkaio.runtime.requests import UnsentRequest

from .fakes import TOPIC, TOPIC_ID, batch, make_rig, partition_data, tp

A, B, C = tp(0), tp(1), tp(2)
OTHER_ID = uuid.UUID(int=0xDEF)


def part(offset: int, topic_id: uuid.UUID = TOPIC_ID, epoch: int = 5) -> SessionPartition:
    return SessionPartition(topic_id, offset, epoch, -1, 1024)


# -- the state machine ---------------------------------------------------------------------


def test_full_request_opens_a_session_and_then_only_changes_are_sent() -> None:
    s = FetchSession()
    first = s.plan({A: part(0), B: part(0)}, uses_ids=True)
    assert (first.session_id, first.epoch, first.full) == (0, 0, True)
    assert first.send == [A, B] and first.forget == []
    assert s.on_response(first, 0, session_id=77)
    # A got records (its offset moved), B did not: only A is listed
    second = s.plan({A: part(3), B: part(0)}, uses_ids=True)
    assert (second.session_id, second.epoch, second.full) == (77, 1, False)
    assert second.send == [A] and second.forget == []
    assert s.on_response(second, 0, session_id=77)
    # nothing changed: an empty incremental request (the broker answers what is new)
    third = s.plan({A: part(3), B: part(0)}, uses_ids=True)
    assert (third.epoch, third.send, third.forget) == (2, [], [])


def test_partitions_left_out_are_forgotten_and_come_back_as_new() -> None:
    s = FetchSession()
    s.on_response(s.plan({A: part(0), B: part(0)}, True), 0, 9)
    paused = s.plan({A: part(0)}, True)  # B paused, or holding buffered data
    assert paused.send == [] and paused.forget == [(B, TOPIC_ID)]
    s.on_response(paused, 0, 9)
    assert set(s.partitions) == {A}
    back = s.plan({A: part(0), B: part(4)}, True)
    assert back.send == [B] and back.forget == []


def test_a_recreated_topic_starts_a_new_session() -> None:
    # forgetting the old topic goes by name below Fetch v13, and a broker applies forgotten
    # partitions after listed ones: an incremental swap would drop the new topic too
    s = FetchSession()
    s.on_response(s.plan({A: part(0), B: part(0)}, True), 0, 9)
    plan = s.plan({A: part(0, topic_id=OTHER_ID), B: part(0, topic_id=OTHER_ID)}, True)
    assert (plan.session_id, plan.epoch, plan.send, plan.forget) == (9, 0, [A, B], [])


def test_a_broker_without_sessions_gets_full_requests() -> None:
    s = FetchSession()
    for _ in range(3):
        plan = s.plan({A: part(0), B: part(0)}, True)
        assert (plan.session_id, plan.epoch, plan.send) == (0, 0, [A, B])
        assert s.on_response(plan, 0, session_id=0)


def test_session_not_found_starts_over_and_other_errors_close_the_old_session() -> None:
    s = FetchSession()
    s.on_response(s.plan({A: part(0)}, True), 0, 9)
    plan = s.plan({A: part(1)}, True)
    assert not s.on_response(plan, INVALID_FETCH_SESSION_EPOCH, 0)
    retry = s.plan({A: part(1)}, True)
    # full again, naming the old session so that the broker closes it
    assert (retry.session_id, retry.epoch, retry.send) == (9, 0, [A])
    assert not s.on_response(retry, FETCH_SESSION_ID_NOT_FOUND, 0)
    again = s.plan({A: part(1)}, True)
    assert (again.session_id, again.epoch, again.send) == (0, 0, [A])


def test_no_answer_makes_the_next_request_full() -> None:
    s = FetchSession()
    s.on_response(s.plan({A: part(0), B: part(0)}, True), 0, 9)
    s.plan({A: part(2), B: part(0)}, True)
    s.on_failure()  # the broker may or may not have applied it
    plan = s.plan({A: part(2), B: part(0)}, True)
    assert (plan.session_id, plan.epoch, plan.send) == (9, 0, [A, B])


def test_switching_between_topic_names_and_ids_starts_a_new_session() -> None:
    s = FetchSession()
    s.on_response(s.plan({A: part(0)}, True), 0, 9)
    plan = s.plan({A: part(0, topic_id=uuid.UUID(int=0))}, uses_ids=False)
    assert plan.full and plan.send == [A]


def test_closing_plans_a_final_request_only_for_an_open_session() -> None:
    s = FetchSession()
    assert s.close() is None  # no session yet: nothing to close
    s.on_response(s.plan({A: part(0)}, True), 0, 9)
    final = s.close()
    assert final is not None
    assert (final.session_id, final.epoch, final.send, final.forget) == (9, FINAL_EPOCH, [], [])
    assert s.close() is None  # closed once
    again = s.plan({A: part(1)}, True)  # a later request opens a new session
    assert (again.session_id, again.epoch, again.send) == (0, 0, [A])


def test_the_epoch_wraps_to_one() -> None:
    s = FetchSession()
    s.on_response(s.plan({A: part(0)}, True), 0, 9)
    s.epoch = 2**31 - 1
    s.on_response(s.plan({A: part(0)}, True), 0, 9)
    assert s.epoch == 1


# -- a FetchManager against a broker that keeps sessions ------------------------------------


@dataclass
class _Cached:
    topic_id: uuid.UUID
    fetch_offset: int
    high_watermark_sent: int = -1


@dataclass
class SessionBroker:
    """One node of a simulated cluster that keeps fetch sessions as KIP-227 says: a full
    request (epoch 0) opens one (closing `session_id` if given); an incremental request must
    carry the next epoch, updates the listed partitions, drops the forgotten ones, and gets
    back only the partitions that have records or a new high watermark; a final request
    (epoch -1) closes `session_id` and is answered without a session. Each partition's log
    is a list of values (offset = index). `restart()` forgets every session."""

    logs: dict[TopicPartition, list[bytes]]
    sessions: dict[int, tuple[int, dict[TopicPartition, _Cached]]] = field(default_factory=dict)
    next_id: int = 100
    requests: list[m.FetchRequest] = field(default_factory=list)

    def restart(self) -> None:
        self.sessions.clear()

    def answer(self, unsent: UnsentRequest, now: float) -> None:
        request: m.FetchRequest = unsent.request
        self.requests.append(request)
        unsent.handler(now, self._respond(request), None)

    def _respond(self, request: m.FetchRequest) -> m.FetchResponse:
        listed = {
            TopicPartition(TOPIC, p.partition): _Cached(t.topic_id, p.fetch_offset)
            for t in request.topics
            for p in t.partitions
        }
        if request.session_epoch == FINAL_EPOCH:
            self.sessions.pop(request.session_id, None)
            return m.FetchResponse(session_id=0, responses=[])
        if request.session_epoch == 0:
            self.sessions.pop(request.session_id, None)
            session_id, self.next_id = self.next_id, self.next_id + 1
            cached = listed
            self.sessions[session_id] = (1, cached)
            full = True
        else:
            session_id = request.session_id
            if session_id not in self.sessions:
                return m.FetchResponse(error_code=FETCH_SESSION_ID_NOT_FOUND)
            epoch, cached = self.sessions[session_id]
            if request.session_epoch != epoch:
                return m.FetchResponse(error_code=INVALID_FETCH_SESSION_EPOCH)
            for key, entry in listed.items():  # as Kafka: listed first, then forgotten
                old = cached.get(key)
                if old is not None:
                    entry.high_watermark_sent = old.high_watermark_sent
                cached[key] = entry
            for gone in request.forgotten_topics_data:
                for p in gone.partitions:
                    cached.pop(TopicPartition(TOPIC, p), None)
            self.sessions[session_id] = (epoch + 1, cached)
            full = False
        parts = []
        for key, entry in cached.items():
            log = self.logs[key]
            new = log[entry.fetch_offset :]
            hw = len(log)
            if full or new or hw != entry.high_watermark_sent:
                blob = batch(entry.fetch_offset, new) if new else b""
                parts.append(partition_data(key.partition, blob, high_watermark=hw))
                entry.high_watermark_sent = hw
        return m.FetchResponse(
            session_id=session_id,
            responses=[m.FetchResponse.FetchableTopicResponse(topic_id=TOPIC_ID, partitions=parts)]
            if parts
            else [],
        )


def _single_node_rig(**options: object):  # type: ignore[no-untyped-def]
    from .fakes import make_metadata

    rig = make_rig(metadata=make_metadata(leaders={0: 1, 1: 1, 2: 1}), **options)
    rig.subscriptions.assign_from_user([A, B, C])
    for p in (A, B, C):
        rig.subscriptions.seek(p, 0)
    return rig


def _listed(request: m.FetchRequest) -> dict[int, int]:
    return {p.partition: p.fetch_offset for t in request.topics for p in t.partitions}


def _round(rig, broker: SessionBroker, now: float) -> dict[TopicPartition, list[bytes]]:  # type: ignore[no-untyped-def]
    for unsent in rig.fetcher.poll(now).requests:
        broker.answer(unsent, now)
    return {key: [r.value for r in records] for key, records in rig.collector.collect().items()}


def test_consumer_reads_everything_through_incremental_requests() -> None:
    logs = {A: [b"a0", b"a1"], B: [], C: [b"c0"]}
    broker = SessionBroker(logs)
    rig = _single_node_rig()
    got: dict[TopicPartition, list[bytes]] = {A: [], B: [], C: []}
    for key, values in _round(rig, broker, 0).items():
        got[key] += values
    first = broker.requests[-1]
    assert (first.session_epoch, _listed(first)) == (0, {0: 0, 1: 0, 2: 0})
    logs[B] += [b"b0", b"b1", b"b2"]
    for now in range(1, 6):
        for key, values in _round(rig, broker, now).items():
            got[key] += values
        if now == 2:
            logs[A].append(b"a2")
    assert got == {A: [b"a0", b"a1", b"a2"], B: [b"b0", b"b1", b"b2"], C: [b"c0"]}
    epochs = [r.session_epoch for r in broker.requests]
    assert epochs == list(range(len(epochs)))  # one session, every epoch in turn
    # after the first, requests list only the partitions whose offsets moved
    assert _listed(broker.requests[1]) == {0: 2, 2: 1}
    assert _listed(broker.requests[-1]) == {}


def test_seek_during_a_session_sends_the_new_offset_once() -> None:
    broker = SessionBroker({A: [b"a0", b"a1", b"a2"], B: [], C: []})
    rig = _single_node_rig()
    _round(rig, broker, 0)
    rig.subscriptions.seek(A, 1)
    assert _round(rig, broker, 1) == {A: [b"a1", b"a2"]}
    assert _listed(broker.requests[-1]) == {0: 1}
    _round(rig, broker, 2)
    assert _listed(broker.requests[-1]) == {0: 3}  # where A continues after the re-read


def test_paused_partition_is_forgotten_and_resumes_where_it_stopped() -> None:
    logs = {A: [b"a0"], B: [b"b0"], C: []}
    broker = SessionBroker(logs)
    rig = _single_node_rig()
    _round(rig, broker, 0)
    rig.subscriptions.pause([B])
    logs[B].append(b"b1")
    assert _round(rig, broker, 1) == {}
    request = broker.requests[-1]
    assert [(g.topic_id, g.partitions) for g in request.forgotten_topics_data] == [(TOPIC_ID, [1])]
    rig.subscriptions.resume([B])
    assert _round(rig, broker, 2) == {B: [b"b1"]}
    assert _listed(broker.requests[-1]) == {1: 1}


def test_broker_restart_loses_the_session_and_nothing_is_lost_or_repeated() -> None:
    logs = {A: [b"a0"], B: [], C: []}
    broker = SessionBroker(logs)
    rig = _single_node_rig()
    got = _round(rig, broker, 0)[A]
    broker.restart()
    logs[A].append(b"a1")
    assert _round(rig, broker, 1) == {}  # FETCH_SESSION_ID_NOT_FOUND: no data, no backoff
    assert rig.errors == []
    got += _round(rig, broker, 2)[A]  # a full request opens a new session
    assert got == [b"a0", b"a1"]
    assert broker.requests[-1].session_epoch == 0 and broker.requests[-1].session_id == 0
    assert _listed(broker.requests[-1]) == {0: 1, 1: 0, 2: 0}


def test_lost_connection_closes_the_session_with_the_next_full_request() -> None:
    broker = SessionBroker({A: [b"a0"], B: [], C: []})
    rig = _single_node_rig(retry_backoff_max_ms=100)
    _round(rig, broker, 0)
    (unsent,) = rig.fetcher.poll(1).requests
    unsent.handler(1, None, KafkaConnectionError("lost"))
    (retry,) = rig.fetcher.poll(1000).requests
    assert (retry.request.session_id, retry.request.session_epoch) == (100, 0)
    assert _listed(retry.request) == {0: 1, 1: 0, 2: 0}
    broker.answer(retry, 1000)
    assert 100 not in broker.sessions and 101 in broker.sessions


def test_closing_sends_each_open_session_a_final_request_and_reports_when_answered() -> None:
    logs = {A: [b"a0"], B: [], C: []}
    broker = SessionBroker(logs)
    rig = _single_node_rig()
    _round(rig, broker, 0)
    assert list(broker.sessions) == [100]
    (held,) = rig.fetcher.poll(1).requests  # a fetch the broker holds while we close
    closed: list[int] = []
    rig.fetcher.close_sessions(lambda: closed.append(1))
    assert not rig.fetcher.sessions_closed and closed == []
    (final,) = rig.fetcher.poll(2).requests
    request: m.FetchRequest = final.request
    assert (request.session_id, request.session_epoch) == (100, FINAL_EPOCH)
    assert request.topics == [] and request.forgotten_topics_data == []
    assert request.max_wait_ms == 0
    # it may go on another connection to the broker, not behind the fetch held on this one
    assert final.any_connection and not held.any_connection
    assert rig.fetcher.poll(3).requests == []  # nothing else is fetched while closing
    logs[A].append(b"a1")
    broker.answer(held, 4)  # the held fetch comes back first: dropped, session untouched
    assert not rig.buffer.has_data(A)
    broker.answer(final, 5)
    assert broker.sessions == {} and closed == [1] and rig.fetcher.sessions_closed


def test_closing_without_a_session_sends_nothing() -> None:
    rig = _single_node_rig()
    (first,) = rig.fetcher.poll(0).requests
    first.handler(0, m.FetchResponse(session_id=0, responses=[]), None)  # no sessions kept
    closed: list[int] = []
    rig.fetcher.close_sessions(lambda: closed.append(1))
    assert closed == [1] and rig.fetcher.sessions_closed
    assert rig.fetcher.poll(1).requests == []


def test_a_failed_final_request_still_ends_the_close() -> None:
    broker = SessionBroker({A: [b"a0"], B: [], C: []})
    rig = _single_node_rig()
    _round(rig, broker, 0)
    closed: list[int] = []
    rig.fetcher.close_sessions(lambda: closed.append(1))
    (final,) = rig.fetcher.poll(1).requests
    final.handler(1, None, KafkaConnectionError("gone"))
    assert closed == [1] and rig.fetcher.sessions_closed


def test_a_session_on_a_node_without_a_connection_is_left_to_expire() -> None:
    broker = SessionBroker({A: [b"a0"], B: [], C: []})
    rig = _single_node_rig()
    _round(rig, broker, 0)
    closed: list[int] = []
    rig.fetcher.close_sessions(lambda: closed.append(1), reachable=lambda node: False)
    assert closed == [1] and rig.fetcher.sessions_closed
    assert rig.fetcher.poll(1).requests == []  # no connection is made to close it
