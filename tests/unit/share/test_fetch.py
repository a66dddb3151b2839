"""ShareFetchManager: share-session epochs, piggybacked and standalone acks, resets, close."""

from __future__ import annotations

import uuid
from typing import Any

from kafkaio.consumer.group.coordinator import CoordinatorManager
from kafkaio.errors import CorruptRecordError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.protocol import messages as m
from kafkaio.runtime.requests import UnsentRequest
from kafkaio.share.acknowledgements import Acknowledgements, AcknowledgeType, DeliveryState
from kafkaio.share.errors import ShareSessionResetError
from kafkaio.share.fetch import ShareFetchConfig, ShareFetchManager
from kafkaio.share.membership import ShareMembershipManager
from kafkaio.share.protocol import (
    AcquiredRange,
    ShareAcknowledgeRequestV1,
    ShareFetchPartitionData,
    ShareFetchRequestV1,
    ShareFetchResponseV1,
    ShareFetchTopicData,
)
from tests.unit.consumer.fakes import TOPIC, TOPIC_ID, batch, make_metadata

TP0, TP1, TP2 = (TopicPartition(TOPIC, p) for p in range(3))  # leaders: node 1, 2, 1
INVALID_RECORD_STATE, SHARE_SESSION_NOT_FOUND = 121, 122


class Rig:
    def __init__(self, partitions: set[int]) -> None:
        self.metadata = make_metadata()
        self.member = ShareMembershipManager("g", [TOPIC], CoordinatorManager("g"), member_id="me")
        self.member.assignment = {TOPIC_ID: frozenset(partitions)}
        self.acks = Acknowledgements()
        self.arrivals = 0
        self.fetcher = ShareFetchManager(
            "g",
            self.member,
            self.metadata,
            self.acks,
            ShareFetchConfig(max_wait_ms=500),
            on_records=self._arrived,
        )

    def _arrived(self) -> None:
        self.arrivals += 1

    def requests(self, now: float) -> dict[int, UnsentRequest]:
        return {r.node_id: r for r in self.fetcher.poll(now).requests}  # type: ignore[misc]


def wire(request: ShareFetchRequestV1) -> dict[int, list[tuple[int, int, list[int]]]]:
    """{partition: [(first, last, types)]} of a ShareFetch."""
    out: dict[int, list[tuple[int, int, list[int]]]] = {}
    for topic in request.topics:
        assert topic.topic_id == TOPIC_ID
        for p in topic.partitions:
            out[p.partition_index] = [
                (b.first_offset, b.last_offset, b.acknowledge_types) for b in p.batches
            ]
    return out


def part(
    index: int,
    *,
    records: bytes | None = None,
    acquired: list[tuple[int, int, int]] = (),
    error: int = 0,
    ack_error: int = 0,
) -> ShareFetchPartitionData:
    return ShareFetchPartitionData(
        index,
        error,
        None,
        ack_error,
        None,
        -1,
        -1,
        records,
        [AcquiredRange(*a) for a in acquired],
    )


def fetch_response(
    *parts: ShareFetchPartitionData, error: int = 0, lock_ms: int = 1000
) -> ShareFetchResponseV1:
    topics = [ShareFetchTopicData(TOPIC_ID, list(parts))] if parts else []
    return ShareFetchResponseV1(0, error, None, lock_ms, topics, [])


def values(n: int) -> list[bytes]:
    return [b"v%d" % i for i in range(n)]


def test_first_fetch_opens_a_session_per_leader_with_every_partition() -> None:
    rig = Rig({0, 1, 2})
    reqs = rig.requests(0.0)
    assert set(reqs) == {1, 2}
    one, two = reqs[1].request, reqs[2].request
    assert isinstance(one, ShareFetchRequestV1)
    assert (one.share_session_epoch, one.member_id, one.max_wait_ms) == (0, "me", 500)
    assert wire(one) == {0: [], 2: []} and wire(two) == {1: []}
    assert one.forgotten == []
    assert rig.fetcher.poll(1.0).requests == []  # one request per session at a time


def test_acquired_ranges_decide_what_is_delivered_and_gaps_are_acknowledged() -> None:
    rig = Rig({0})
    req = rig.requests(0.0)[1]
    # the batch holds offsets 10..14; only 11..12 and 14..15 are acquired (15 has no record)
    req.handler(
        5.0,
        fetch_response(part(0, records=batch(10, values(5)), acquired=[(11, 12, 1), (14, 15, 3)])),
        None,
    )
    assert rig.arrivals == 1
    records = rig.fetcher.drain(100, now=6.0)
    assert [(r.offset, r.delivery_count, r.value) for r in records] == [
        (11, 1, b"v1"),
        (12, 1, b"v2"),
        (14, 3, b"v4"),
    ]
    for r in records:
        rig.acks.acknowledge(TP0, r.offset, AcknowledgeType.ACCEPT, 6.0, r.delivery_count)
    nxt = rig.requests(7.0)[1].request
    assert nxt.share_session_epoch == 1
    # incremental: only the partition with acks is listed; 15 went as a gap (type 0)
    assert wire(nxt) == {0: [(11, 12, [1]), (14, 15, [1, 0])]}


def test_the_lock_deadline_comes_from_the_response() -> None:
    rig = Rig({0})
    rig.requests(0.0)[1].handler(
        100.0,
        fetch_response(part(0, records=batch(0, values(2)), acquired=[(0, 1, 1)]), lock_ms=250),
        None,
    )
    assert rig.fetcher.lock_timeout_ms == 250
    assert [r.offset for r in rig.fetcher.drain(1, now=349.0)] == [0]
    assert rig.fetcher.drain(1, now=350.0) == []  # expired while buffered: dropped


def test_no_fetch_while_records_wait_but_commit_sends_a_share_acknowledge() -> None:
    rig = Rig({0})
    rig.requests(0.0)[1].handler(
        1.0, fetch_response(part(0, records=batch(0, values(3)), acquired=[(0, 2, 1)])), None
    )
    [first] = rig.fetcher.drain(1, now=2.0)
    rig.acks.acknowledge(TP0, 0, AcknowledgeType.RELEASE, 2.0, 1)
    assert rig.fetcher.poll(3.0).requests == []  # two records still buffered
    results: list[dict[TopicPartition, Any]] = []
    rig.fetcher.commit(results.append)
    [req] = rig.fetcher.poll(3.0).requests
    assert isinstance(req.request, ShareAcknowledgeRequestV1)
    assert req.request.share_session_epoch == 1
    [topic] = req.request.topics
    assert [(b.first_offset, b.acknowledge_types) for b in topic.partitions[0].batches] == [
        (0, [2])
    ]
    response = m.ShareAcknowledgeResponse(
        responses=[
            m.ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse(
                TOPIC_ID,
                [m.ShareAcknowledgeResponse.PartitionData(0, INVALID_RECORD_STATE, "expired")],
            )
        ]
    )
    req.handler(4.0, response, None)
    assert len(results) == 1 and type(results[0][TP0]).__name__ == "InvalidRecordStateError"
    assert first.offset == 0
    [outcome] = rig.fetcher.drain_outcomes()
    assert outcome.offsets == (0,) and outcome.error is not None


def test_a_commit_made_while_a_fetch_is_in_flight_sends_its_acks_after_the_answer() -> None:
    rig = Rig({0})
    rig.requests(0.0)[1].handler(
        1.0, fetch_response(part(0, records=batch(0, values(3)), acquired=[(0, 2, 1)])), None
    )
    rig.fetcher.drain(3, now=2.0)
    [fetch] = rig.fetcher.poll(3.0).requests  # the next ShareFetch, in flight
    for offset in range(3):
        rig.acks.acknowledge(TP0, offset, AcknowledgeType.ACCEPT, 4.0, 1)
    results: list[dict[TopicPartition, Any]] = []
    rig.fetcher.commit(results.append)
    assert rig.fetcher.poll(5.0).requests == []  # the session is busy
    fetch.handler(
        6.0, fetch_response(part(0, records=batch(3, values(3)), acquired=[(3, 5, 1)])), None
    )
    [ack] = rig.fetcher.poll(7.0).requests  # records wait in the buffer: acks go alone
    assert isinstance(ack.request, ShareAcknowledgeRequestV1)
    [topic] = ack.request.topics
    assert [(b.first_offset, b.last_offset) for b in topic.partitions[0].batches] == [(0, 2)]
    assert results == []  # until the broker answers


def test_commit_with_nothing_pending_completes_at_once() -> None:
    rig = Rig({0})
    results: list[dict[TopicPartition, Any]] = []
    rig.fetcher.commit(results.append)
    assert results == [{}]


def test_session_not_found_resets_to_epoch_zero_and_fails_the_acks_it_carried() -> None:
    rig = Rig({0})
    rig.requests(0.0)[1].handler(
        1.0, fetch_response(part(0, records=batch(0, values(2)), acquired=[(0, 1, 1)])), None
    )
    for r in rig.fetcher.drain(10, now=2.0):
        rig.acks.acknowledge(TP0, r.offset, AcknowledgeType.ACCEPT, 2.0, r.delivery_count)
    req = rig.requests(3.0)[1]
    assert req.request.share_session_epoch == 1
    req.handler(4.0, fetch_response(error=SHARE_SESSION_NOT_FOUND), None)
    [outcome] = rig.fetcher.drain_outcomes()
    assert outcome.offsets == (0, 1) and isinstance(outcome.error, ShareSessionResetError)
    again = rig.requests(4.0)[1].request  # no backoff: the session is simply reopened
    assert again.share_session_epoch == 0 and wire(again) == {0: []}


def test_a_lost_session_drops_the_records_still_buffered() -> None:
    rig = Rig({0})
    rig.requests(0.0)[1].handler(
        1.0, fetch_response(part(0, records=batch(0, values(3)), acquired=[(0, 2, 1)])), None
    )
    [first] = rig.fetcher.drain(1, now=2.0)
    rig.acks.acknowledge(TP0, first.offset, AcknowledgeType.ACCEPT, 2.0, 1)
    results: list[dict[TopicPartition, Any]] = []
    rig.fetcher.commit(results.append)
    [req] = rig.fetcher.poll(3.0).requests
    req.handler(4.0, m.ShareAcknowledgeResponse(error_code=SHARE_SESSION_NOT_FOUND), None)
    assert isinstance(results[0][TP0], ShareSessionResetError)
    # the broker released offsets 1..2 with the session: they must not reach the app
    assert rig.fetcher.drain(10, now=5.0) == [] and len(rig.acks) == 0
    assert rig.requests(5.0)[1].request.share_session_epoch == 0


def test_partitions_leaving_the_assignment_are_forgotten_incrementally() -> None:
    rig = Rig({0, 2})
    rig.requests(0.0)[1].handler(1.0, fetch_response(), None)
    rig.member.assignment = {TOPIC_ID: frozenset({0})}
    nxt = rig.requests(200.0)[1].request
    assert nxt.share_session_epoch == 1
    assert wire(nxt) == {} and nxt.forgotten == [(TOPIC_ID, [2])]


def test_an_empty_answer_delays_the_next_fetch() -> None:
    rig = Rig({0})
    rig.requests(0.0)[1].handler(3.0, fetch_response(), None)
    result = rig.fetcher.poll(3.0)
    assert result.requests == [] and result.next_poll_ms == 97.0
    assert set(rig.requests(100.0)) == {1}


def test_a_repeated_delivery_is_not_handed_out_twice() -> None:
    rig = Rig({0})
    ranges = [(0, 1, 1)]
    rig.requests(0.0)[1].handler(
        1.0, fetch_response(part(0, records=batch(0, values(2)), acquired=ranges)), None
    )
    assert len(rig.fetcher.drain(10, now=2.0)) == 2
    rig.requests(2.0)[1].handler(
        3.0, fetch_response(part(0, records=batch(0, values(2)), acquired=ranges)), None
    )
    assert rig.fetcher.drain(10, now=4.0) == []


def test_close_sends_pending_acks_with_the_final_epoch() -> None:
    rig = Rig({0})
    rig.requests(0.0)[1].handler(
        1.0, fetch_response(part(0, records=batch(0, values(2)), acquired=[(0, 1, 1)])), None
    )
    [r0, _] = rig.fetcher.drain(10, now=2.0)
    rig.acks.acknowledge(TP0, r0.offset, AcknowledgeType.ACCEPT, 2.0, 1)
    rig.fetcher.close()
    [req] = rig.fetcher.poll(3.0).requests
    assert isinstance(req.request, ShareAcknowledgeRequestV1)
    assert req.request.share_session_epoch == -1
    assert not rig.fetcher.closed
    req.handler(4.0, m.ShareAcknowledgeResponse(), None)
    assert rig.fetcher.closed
    assert [o.offsets for o in rig.fetcher.drain_outcomes()] == [(0,)]


def test_close_without_a_session_needs_no_request() -> None:
    rig = Rig({0})
    rig.fetcher.close()
    assert rig.fetcher.poll(0.0).requests == [] and rig.fetcher.closed


def test_unknown_topic_id_asks_for_metadata() -> None:
    rig = Rig(set())
    rig.member.assignment = {uuid.UUID(int=99): frozenset({0})}
    before = rig.metadata.version
    assert rig.fetcher.poll(0.0).requests == []
    assert rig.metadata.poll(1_000.0).requests, "a metadata refresh was requested"
    assert rig.metadata.version == before


def test_a_corrupt_batch_is_reported_and_its_acquired_records_are_not_acknowledged() -> None:
    # a corrupt batch raised CorruptRecordError in the network task's handler (ending it)
    rig = Rig({0})
    raw = bytearray(batch(0, values(3)))
    raw[-2] ^= 0xFF  # the CRC no longer matches
    rig.requests(0.0)[1].handler(
        1.0, fetch_response(part(0, records=bytes(raw), acquired=[(0, 2, 1)])), None
    )
    assert rig.fetcher.drain(10, now=2.0) == []
    (error,) = rig.fetcher.drain_errors()
    assert isinstance(error, CorruptRecordError) and "CRC" in str(error)
    # no gap was acknowledged: the locks expire and the broker delivers the records again
    assert rig.acks.state(TP0, 0) is not None
    assert all(rig.acks.state(TP0, o) is not DeliveryState.PENDING for o in range(3))


def test_a_broker_acquiring_millions_of_records_is_refused_not_looped_over() -> None:
    # a hostile response acquiring offsets 0..2**62 made the network task track each one
    # (for ever); above 100,000 (or 10 x max_records) the response's acquisitions are ignored
    rig = Rig({0})
    rig.requests(0.0)[1].handler(
        1.0,
        fetch_response(part(0, records=batch(0, values(3)), acquired=[(0, 1_000_000, 1)])),
        None,
    )
    assert rig.fetcher.drain(10, now=2.0) == []
    (error,) = rig.fetcher.drain_errors()
    assert "acquired 1000001 records" in str(error) and "delivered again" in str(error)
    assert rig.acks.state(TP0, 0) is None
