"""FetchManager: one Fetch per leader, in-flight and buffered partitions skipped, responses
filed into the buffer, and per-partition errors turned into resets or metadata refreshes."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest

from kafkaio.consumer.errors import LogTruncationError
from kafkaio.consumer.subscription import FetchPosition, FetchState, OffsetResetStrategy
from kafkaio.errors import KafkaConnectionError, OffsetOutOfRangeError
from kafkaio.protocol import messages as m
from kafkaio.runtime.requests import UnsentRequest

from .fakes import (
    TOPIC,
    TOPIC_ID,
    batch,
    fetch_response,
    make_metadata,
    make_rig,
    partition_data,
    tp,
    values,
)


def _requested(request: UnsentRequest) -> dict[int, int]:
    """{partition: fetch_offset} of a Fetch request."""
    fetch: m.FetchRequest = request.request
    return {p.partition: p.fetch_offset for t in fetch.topics for p in t.partitions}


def _assigned_rig(**kwargs: Any) -> Any:
    rig = make_rig(**kwargs)
    rig.subscriptions.assign_from_user([tp(0), tp(1), tp(2)])
    for p, offset in ((0, 10), (1, 20), (2, 30)):
        rig.subscriptions.seek(tp(p), offset)
    return rig


def test_one_request_per_leader_with_positions_and_limits() -> None:
    rig = _assigned_rig(fetch_max_wait_ms=250, fetch_min_bytes=7, max_partition_fetch_bytes=4096)
    result = rig.fetcher.poll(0)
    by_node = {r.node_id: r for r in result.requests}
    assert set(by_node) == {1, 2}
    assert _requested(by_node[1]) == {0: 10, 2: 30}
    assert _requested(by_node[2]) == {1: 20}
    request: m.FetchRequest = by_node[1].request
    assert (request.max_wait_ms, request.min_bytes, request.isolation_level) == (250, 7, 0)
    assert request.session_epoch == 0 and request.session_id == 0  # full: may open a session
    topic = request.topics[0]
    assert topic.topic == TOPIC and topic.topic_id == TOPIC_ID
    assert all(p.partition_max_bytes == 4096 for p in topic.partitions)
    assert all(p.current_leader_epoch == 5 for p in topic.partitions)
    assert by_node[1].max_version is None  # topic ids known: any version


def test_topic_without_id_caps_fetch_at_v12() -> None:
    rig = make_rig(metadata=make_metadata(topic_id=None))
    rig.subscriptions.assign_from_user([tp(0)])
    rig.subscriptions.seek(tp(0), 0)
    (request,) = rig.fetcher.poll(0).requests
    assert request.max_version == 12


def test_paused_unpositioned_and_in_flight_partitions_are_not_fetched() -> None:
    rig = _assigned_rig()
    rig.subscriptions.pause([tp(1)])
    rig.subscriptions.request_offset_reset(tp(2))
    (request,) = rig.fetcher.poll(0).requests
    assert request.node_id == 1 and _requested(request) == {0: 10}
    # node 1 has a request in flight: nothing new for it, even after resume of others
    rig.subscriptions.seek(tp(2), 30)
    rig.subscriptions.resume([tp(1)])
    again = rig.fetcher.poll(1).requests
    assert [r.node_id for r in again] == [2]
    assert rig.fetcher.in_flight_nodes == {1, 2}


def test_response_fills_buffer_and_buffered_partition_is_prefetched_from_its_end() -> None:
    rig = _assigned_rig()
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    blob = batch(10, values(10, 3))
    requests[1].handler(
        5,
        fetch_response(
            partition_data(0, blob, high_watermark=13, last_stable_offset=12), partition_data(2)
        ),
        None,
    )
    assert rig.buffer.has_data(tp(0)) and not rig.buffer.has_data(tp(2))
    st = rig.subscriptions.state(tp(0))
    assert (st.high_watermark, st.last_stable_offset) == (13, 12)
    assert rig.subscriptions.position(tp(0)).offset == 10  # nothing handed out yet
    # partition 0 holds offsets 10-12 not handed out yet: its next chunk is fetched from 13
    (request,) = [r for r in rig.fetcher.poll(6).requests if r.node_id == 1]
    assert _requested(request) == {0: 13, 2: 30}
    request.handler(7, fetch_response(partition_data(0, batch(13, values(13, 2)))), None)
    assert rig.buffer.next_offset(tp(0)) == 15
    # the application gets both chunks in order, and the position follows
    records = rig.collector.collect()
    assert [r.offset for r in records[tp(0)]] == [10, 11, 12, 13, 14]
    assert rig.subscriptions.position(tp(0)).offset == 15
    assert len(rig.buffer) == 0 and rig.buffer.buffered_bytes == 0
    (request,) = [r for r in rig.fetcher.poll(8).requests if r.node_id == 1]
    assert _requested(request) == {0: 15, 2: 30}


def test_prefetch_stops_at_the_partition_limit_and_drops_stale_prefetches() -> None:
    rig = _assigned_rig(max_partition_fetch_bytes=64)
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    requests[1].handler(1, fetch_response(partition_data(0, batch(10, values(10, 5)))), None)
    assert rig.buffer.bytes_for(tp(0)) >= 64
    (request,) = [r for r in rig.fetcher.poll(2).requests if r.node_id == 1]
    assert _requested(request) == {2: 30}  # partition 0 holds its share: no prefetch
    # a prefetch answered after the application sought elsewhere is dropped
    rig2 = _assigned_rig()
    first = {r.node_id: r for r in rig2.fetcher.poll(0).requests}
    first[1].handler(1, fetch_response(partition_data(0, batch(10, values(10, 3)))), None)
    (prefetch,) = [r for r in rig2.fetcher.poll(2).requests if r.node_id == 1]
    assert _requested(prefetch)[0] == 13
    rig2.subscriptions.seek(tp(0), 100)
    rig2.buffer.remove(tp(0))  # what Consumer.seek does
    prefetch.handler(3, fetch_response(partition_data(0, batch(13, values(13, 2)))), None)
    assert not rig2.buffer.has_data(tp(0))


def test_names_in_responses_below_v13_are_understood() -> None:
    rig = _assigned_rig()
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    requests[2].handler(
        1, fetch_response(partition_data(1, batch(20, values(0, 2))), by_id=False), None
    )
    assert rig.buffer.has_data(tp(1))


def test_stale_response_after_seek_is_dropped() -> None:
    rig = _assigned_rig()
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    rig.subscriptions.seek(tp(1), 500)
    requests[2].handler(1, fetch_response(partition_data(1, batch(20, values(0, 2)))), None)
    assert not rig.buffer.has_data(tp(1))


def test_offset_out_of_range_resets_with_default_strategy() -> None:
    rig = _assigned_rig(reset="latest")
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    requests[2].handler(1, fetch_response(partition_data(1, error_code=1)), None)
    st = rig.subscriptions.state(tp(1))
    assert st.fetch_state is FetchState.AWAIT_RESET
    assert st.reset_strategy is OffsetResetStrategy.LATEST
    assert rig.errors == []


def test_offset_out_of_range_on_a_prefetch_keeps_the_buffered_records() -> None:
    rig = _assigned_rig(reset="latest")
    first = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    first[1].handler(1, fetch_response(partition_data(0, batch(10, values(10, 3)))), None)
    (prefetch,) = [r for r in rig.fetcher.poll(2).requests if r.node_id == 1]
    assert _requested(prefetch)[0] == 13
    prefetch.handler(3, fetch_response(partition_data(0, error_code=1)), None)  # out of range
    assert [r.offset for r in rig.collector.collect()[tp(0)]] == [10, 11, 12]  # not dropped
    assert rig.subscriptions.position(tp(0)).offset == 13
    (fetch,) = [r for r in rig.fetcher.poll(5_000).requests if r.node_id == 1]
    assert _requested(fetch)[0] == 13  # from the position now: out of range resets it
    fetch.handler(5_001, fetch_response(partition_data(0, error_code=1)), None)
    st = rig.subscriptions.state(tp(0))
    assert st.fetch_state is FetchState.AWAIT_RESET
    assert st.reset_strategy is OffsetResetStrategy.LATEST


def test_offset_out_of_range_with_reset_none_reports_error() -> None:
    rig = _assigned_rig(reset="none")
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    requests[2].handler(1, fetch_response(partition_data(1, error_code=1)), None)
    (error,) = rig.errors
    assert isinstance(error, OffsetOutOfRangeError)
    assert error.context["partition"] == 1 and error.context["offset"] == 20
    # it is not fetched again until the application seeks
    assert all(1 not in _requested(r) for r in rig.fetcher.poll(2).requests)


def test_not_leader_waits_for_newer_metadata() -> None:
    rig = _assigned_rig()
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    version = rig.metadata.version
    requests[2].handler(1, fetch_response(partition_data(1, error_code=6)), None)  # NOT_LEADER
    assert rig.metadata.time_to_next_update(200) == 0  # a refresh is due
    assert all(1 not in _requested(r) for r in rig.fetcher.poll(200).requests)
    # new metadata: partition 1 moved to node 3
    rig.metadata.poll(300)
    rig.metadata.on_response(300, _moved())
    assert rig.metadata.version > version
    (request,) = [r for r in rig.fetcher.poll(301).requests if 1 in _requested(r)]
    assert request.node_id == 3


def _answered_not_leader(leader_epoch: int) -> Any:
    """A rig whose fetch of partition 1 (led by node 2 at epoch 5) was answered
    NOT_LEADER_OR_FOLLOWER naming node 3 at `leader_epoch` (KIP-951)."""
    rig = _assigned_rig()
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    part = partition_data(1, error_code=6)
    part.current_leader = m.FetchResponse.LeaderIdAndEpoch(leader_id=3, leader_epoch=leader_epoch)
    requests[2].handler(1, fetch_response(part), None)
    return rig


def test_a_newer_leader_in_the_fetch_answer_is_fetched_from_at_once() -> None:
    # KIP-951: NOT_LEADER_OR_FOLLOWER names partition 1's new leader (node 3, epoch 6 > 5):
    # the next fetch goes there without waiting for the Metadata refresh (still requested).
    rig = _answered_not_leader(leader_epoch=6)
    assert rig.metadata.cluster.leader_for(tp(1)) == 3
    assert rig.metadata.time_to_next_update(200) == 0  # a refresh is still due
    (request,) = [r for r in rig.fetcher.poll(200).requests if 1 in _requested(r)]
    assert request.node_id == 3


def test_a_leader_in_the_fetch_answer_with_an_epoch_not_newer_is_ignored() -> None:
    rig = _answered_not_leader(leader_epoch=5)
    assert rig.metadata.cluster.leader_for(tp(1)) == 2
    assert all(1 not in _requested(r) for r in rig.fetcher.poll(200).requests)


def test_fenced_leader_epoch_also_refreshes_metadata() -> None:
    rig = _assigned_rig()
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    requests[1].handler(
        1, fetch_response(partition_data(0, error_code=74), partition_data(2)), None
    )
    assert rig.metadata.time_to_next_update(200) == 0
    nodes = {r.node_id: _requested(r) for r in rig.fetcher.poll(200).requests}
    assert nodes[1] == {2: 30}


def test_connection_failure_backs_off_the_node() -> None:
    rig = _assigned_rig()
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    requests[1].handler(10, None, KafkaConnectionError("lost"))
    result = rig.fetcher.poll(20)
    assert [r.node_id for r in result.requests] == []  # node 2 still in flight, node 1 backing off
    assert 0 < result.next_poll_ms <= 100
    assert [r.node_id for r in rig.fetcher.poll(10 + 100).requests] == [1]


def test_full_buffer_stops_fetching() -> None:
    rig = _assigned_rig(fetch_buffer_max_bytes=100)
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    requests[1].handler(1, fetch_response(partition_data(0, batch(10, values(10, 20)))), None)
    assert rig.buffer.buffered_bytes >= 100
    requests[2].handler(1, fetch_response(), None)
    assert rig.fetcher.poll(2).requests == []
    rig.collector.collect()
    assert rig.buffer.buffered_bytes == 0
    assert {r.node_id for r in rig.fetcher.poll(3).requests} == {1, 2}


def _moved() -> m.MetadataResponse:
    from .fakes import metadata_response

    return metadata_response({0: 1, 1: 3, 2: 1}, topic_id=uuid.UUID(int=0xABC), epoch=6)


def test_caught_up_partitions_wait_for_held_partitions_of_the_same_node() -> None:
    rig = _assigned_rig(max_partition_fetch_bytes=64)
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    # partition 0 gets more than its prefetch share; partition 2 is at the log end
    requests[1].handler(
        1,
        fetch_response(
            partition_data(0, batch(10, values(10, 5)), high_watermark=100),
            partition_data(2, high_watermark=30),
        ),
        None,
    )
    # a request for partition 2 alone would be held by the broker for fetch_max_wait_ms
    assert [r.node_id for r in rig.fetcher.poll(2).requests if r.node_id == 1] == []
    rig.collector.collect()  # partition 0 drained: both go out together
    (request,) = [r for r in rig.fetcher.poll(3).requests if r.node_id == 1]
    assert _requested(request) == {0: 15, 2: 30}


def test_draining_needs_a_poll_only_for_what_the_last_poll_held_back() -> None:
    rig = _assigned_rig(max_partition_fetch_bytes=64)
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    assert not rig.fetcher.waits_for_drain()  # nothing buffered, nothing held
    requests[1].handler(
        1,
        fetch_response(
            partition_data(0, batch(10, values(10, 5)), high_watermark=100),
            partition_data(2, high_watermark=30),
        ),
        None,
    )
    # partition 0 holds its share and partition 2 is caught up: node 1 gets no request
    assert [r.node_id for r in rig.fetcher.poll(2).requests] == []
    assert rig.fetcher.waits_for_drain()  # draining partition 0 lets node 1 be fetched
    rig.collector.collect()
    (request,) = rig.fetcher.poll(3).requests
    assert request.node_id == 1
    assert not rig.fetcher.waits_for_drain()  # node 1's fetch is in flight again


def test_a_prefetch_in_flight_makes_a_drain_poll_unneeded() -> None:
    rig = _assigned_rig()
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    requests[1].handler(1, fetch_response(partition_data(0, batch(10, values(10, 3)))), None)
    (prefetch,) = rig.fetcher.poll(2).requests
    assert _requested(prefetch) == {0: 13, 2: 30}
    # the application takes the buffered records while the prefetch is out: the prefetch's
    # response polls the manager, so the consumer need not wake the driver
    rig.collector.collect()
    assert not rig.fetcher.waits_for_drain()


def test_a_full_buffer_holds_every_fetch_until_drained() -> None:
    rig = _assigned_rig(fetch_buffer_max_bytes=64)
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    requests[1].handler(1, fetch_response(partition_data(0, batch(10, values(10, 5)))), None)
    requests[2].handler(1, fetch_response(partition_data(1, batch(20, values(20, 5)))), None)
    assert rig.buffer.buffered_bytes >= rig.config.buffer_max_bytes
    assert rig.fetcher.poll(2).requests == []
    assert rig.fetcher.waits_for_drain()
    rig.collector.collect()
    assert {r.node_id for r in rig.fetcher.poll(3).requests} == {1, 2}
    assert not rig.fetcher.waits_for_drain()


# -- leader epochs (KIP-320) ----------------------------------------------------------------


def _epochs(request: UnsentRequest) -> dict[int, tuple[int, int, int]]:
    """{partition: (fetch_offset, current_leader_epoch, last_fetched_epoch)}."""
    fetch: m.FetchRequest = request.request
    return {
        p.partition: (p.fetch_offset, p.current_leader_epoch, p.last_fetched_epoch)
        for t in fetch.topics
        for p in t.partitions
    }


def _with_epoch(blob: bytes, epoch: int) -> bytes:
    """A magic-2 batch with its partition leader epoch set (bytes 12-15, outside the CRC)."""
    raw = bytearray(blob)
    struct.pack_into(">i", raw, 12, epoch)
    return bytes(raw)


def _diverging(partition: int, epoch: int, end_offset: int, records: bytes = b"") -> Any:
    part = partition_data(partition, records)
    part.diverging_epoch = m.FetchResponse.EpochEndOffset(epoch=epoch, end_offset=end_offset)
    return part


def test_fetch_sends_the_position_epochs_else_the_metadata_epoch() -> None:
    rig = _assigned_rig()
    # validated against leader epoch 4 (metadata now says 5); the record before 10 has epoch 3
    rig.subscriptions.seek_validated(tp(0), FetchPosition(10, 3, leader_id=1, leader_epoch=4))
    rig.subscriptions.seek(tp(1), 20, 2)
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    assert _epochs(requests[1]) == {0: (10, 4, 3), 2: (30, 5, -1)}
    assert _epochs(requests[2]) == {1: (20, 5, 2)}


def test_unknown_epochs_are_sent_as_minus_one() -> None:
    rig = make_rig(metadata=make_metadata(epoch=-1))
    rig.subscriptions.assign_from_user([tp(0)])
    rig.subscriptions.seek(tp(0), 7)
    (request,) = rig.fetcher.poll(0).requests
    assert _epochs(request) == {0: (7, -1, -1)}


def test_prefetch_sends_the_epoch_of_the_last_buffered_batch() -> None:
    rig = _assigned_rig()
    rig.subscriptions.seek(tp(0), 10, 2)
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    blob = batch(10, values(10, 2)) + _with_epoch(batch(12, values(12, 2)), 7)
    requests[1].handler(1, fetch_response(partition_data(0, blob)), None)
    (request,) = [r for r in rig.fetcher.poll(2).requests if r.node_id == 1]
    assert _epochs(request) == {0: (14, 5, 7), 2: (30, 5, -1)}
    # a last batch without a leader epoch makes it unknown
    request.handler(3, fetch_response(partition_data(0, batch(14, values(14, 1)))), None)
    (request,) = [r for r in rig.fetcher.poll(4).requests if r.node_id == 1]
    assert _epochs(request)[0] == (15, 5, -1)
    # once the buffer is drained, the position (and its epoch from the records) is used
    rig.collector.collect()
    assert rig.subscriptions.position(tp(0)).offset_epoch == 7
    request.handler(5, fetch_response(), None)
    (request,) = [r for r in rig.fetcher.poll(6).requests if r.node_id == 1]
    assert _epochs(request)[0] == (15, 5, 7)


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_diverging_epoch_truncates_the_position(reset: str) -> None:
    rig = _assigned_rig(reset=reset)
    rig.subscriptions.seek(tp(1), 20, 4)
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    # the leader's epoch 3 ends at 15: offsets 15-19 fetched under epoch 4 were truncated
    records = _with_epoch(batch(15, values(15, 10)), 5)
    requests[2].handler(1, fetch_response(_diverging(1, 3, 15, records)), None)
    assert not rig.buffer.has_data(tp(1))
    st = rig.subscriptions.state(tp(1))
    assert st.fetch_state is FetchState.FETCHING
    assert (st.position.offset, st.position.offset_epoch) == (15, 3)
    assert rig.errors == []
    (request,) = rig.fetcher.poll(2).requests
    assert _epochs(request) == {1: (15, 5, 3)}


def test_diverging_epoch_with_reset_none_reports_log_truncation() -> None:
    rig = _assigned_rig(reset="none")
    rig.subscriptions.seek(tp(1), 20, 4)
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    requests[2].handler(1, fetch_response(_diverging(1, 3, 15, batch(15, values(15, 2)))), None)
    (error,) = rig.errors
    assert isinstance(error, LogTruncationError)
    assert error.positions == {tp(1): 20}
    divergent = error.divergent_offsets[tp(1)]
    assert divergent is not None and (divergent.offset, divergent.leader_epoch) == (15, 3)
    assert not rig.buffer.has_data(tp(1))
    assert rig.subscriptions.position(tp(1)).offset == 20
    assert rig.subscriptions.state(tp(1)).fetch_state is not FetchState.FETCHING
    assert rig.fetcher.poll(2).requests == []  # not fetched until the application seeks


def test_diverging_epoch_on_a_prefetch_drops_the_buffered_data() -> None:
    rig = _assigned_rig()
    rig.subscriptions.seek(tp(0), 10, 4)
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    blob = _with_epoch(batch(10, values(10, 5)), 4)
    requests[1].handler(1, fetch_response(partition_data(0, blob)), None)
    (prefetch,) = [r for r in rig.fetcher.poll(2).requests if r.node_id == 1]
    assert _epochs(prefetch)[0] == (15, 5, 4)
    # epoch 4 ends at 12 on the new leader: buffered offsets 12-14 diverge
    prefetch.handler(3, fetch_response(_diverging(0, 4, 12, batch(15, values(15, 2)))), None)
    assert not rig.buffer.has_data(tp(0))
    assert rig.subscriptions.position(tp(0)).offset == 10  # nothing was handed out
    (request,) = [r for r in rig.fetcher.poll(4).requests if r.node_id == 1]
    assert _epochs(request)[0] == (10, 5, 4)  # from the position: checked by the broker anew


def test_response_for_a_partition_no_longer_fetching_is_dropped() -> None:
    rig = _assigned_rig()
    requests = {r.node_id: r for r in rig.fetcher.poll(0).requests}
    # the leader changed while the request was in flight: the position awaits validation
    rig.subscriptions.seek_unvalidated(tp(1), FetchPosition(20, 4))
    requests[2].handler(1, fetch_response(partition_data(1, batch(20, values(20, 2)))), None)
    assert not rig.buffer.has_data(tp(1))
    assert rig.subscriptions.position(tp(1)).offset == 20
