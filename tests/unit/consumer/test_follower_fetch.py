"""Follower fetching (KIP-392) in the FetchManager: the rack in requests, switching to the
preferred read replica, and going back to the leader on expiry, failure or a lagging follower.
"""

from __future__ import annotations

from typing import Any

from kafkaio.consumer.subscription import FetchState
from kafkaio.errors import KafkaConnectionError
from kafkaio.protocol import messages as m
from kafkaio.runtime.requests import UnsentRequest

from .fakes import batch, fetch_response, make_rig, partition_data, tp, values

NOT_LEADER_OR_FOLLOWER = 6
OFFSET_OUT_OF_RANGE = 1
MAX_AGE = 60_000


def preferring(
    partition: int, replica: int, records: bytes = b"", **kwargs: Any
) -> m.FetchResponse.PartitionData:
    """Partition data whose leader names `replica` as the preferred read replica."""
    part = partition_data(partition, records, **kwargs)
    part.preferred_read_replica = replica
    return part


def nodes(requests: list[UnsentRequest]) -> dict[int, dict[int, int]]:
    """{node: {partition: fetch offset}} of a poll's Fetch requests."""
    out: dict[int, dict[int, int]] = {}
    for r in requests:
        fetch: m.FetchRequest = r.request
        out[r.node_id or -1] = {
            p.partition: p.fetch_offset for t in fetch.topics for p in t.partitions
        }
    return out


def rig_on_partition_0(**options: Any) -> Any:
    """Partition 0 (leader: node 1) assigned at offset 10, consumer in rack "rack-b"."""
    rig = make_rig(client_rack="rack-b", metadata_max_age_ms=MAX_AGE, **options)
    rig.subscriptions.assign_from_user([tp(0)])
    rig.subscriptions.seek(tp(0), 10)
    return rig


def switch_to_replica(rig: Any, replica: int = 3, now: float = 0) -> None:
    (request,) = rig.fetcher.poll(now).requests
    assert request.node_id == 1
    request.handler(now + 1, fetch_response(preferring(0, replica)), None)


def test_requests_carry_the_client_rack() -> None:
    rig = rig_on_partition_0()
    (request,) = rig.fetcher.poll(0).requests
    assert request.request.rack_id == "rack-b"
    no_rack = make_rig()
    no_rack.subscriptions.assign_from_user([tp(0)])
    no_rack.subscriptions.seek(tp(0), 0)
    (request,) = no_rack.fetcher.poll(0).requests
    assert request.request.rack_id == ""


def test_preferred_replica_serves_the_partition_and_its_records_are_read_once() -> None:
    rig = make_rig(client_rack="rack-b", metadata_max_age_ms=MAX_AGE)
    rig.subscriptions.assign_from_user([tp(0), tp(2)])  # both led by node 1
    rig.subscriptions.seek(tp(0), 10)
    rig.subscriptions.seek(tp(2), 30)
    (request,) = rig.fetcher.poll(0).requests
    # the leader names node 3 for partition 0 (no data, as brokers do) and serves 2 itself
    request.handler(
        1, fetch_response(preferring(0, 3), partition_data(2, batch(30, values(30, 2)))), None
    )
    assert not rig.buffer.has_data(tp(0))
    polled = rig.fetcher.poll(2).requests
    assert nodes(polled) == {3: {0: 10}, 1: {2: 32}}
    st = rig.subscriptions.state(tp(0))
    assert (st.preferred_read_replica, st.preferred_read_replica_expires_ms) == (3, 1 + MAX_AGE)
    assert rig.fetcher.poll(2).requests == []  # both nodes have a request in flight
    # each node answers; every record is collected once, in order
    by_node = {r.node_id: r for r in polled}
    by_node[3].handler(3, fetch_response(partition_data(0, batch(10, values(10, 3)))), None)
    by_node[1].handler(3, fetch_response(partition_data(2, batch(32, values(32, 2)))), None)
    records = rig.collector.collect()
    assert [r.offset for r in records[tp(0)]] == [10, 11, 12]
    assert [r.offset for r in records[tp(2)]] == [30, 31, 32, 33]


def test_follower_records_are_buffered_and_fetching_continues_there() -> None:
    rig = rig_on_partition_0()
    switch_to_replica(rig)
    (request,) = rig.fetcher.poll(2).requests
    assert request.node_id == 3 and nodes([request]) == {3: {0: 10}}
    request.handler(
        3, fetch_response(partition_data(0, batch(10, values(10, 3)), high_watermark=13)), None
    )
    records = rig.collector.collect()
    assert [r.offset for r in records[tp(0)]] == [10, 11, 12]
    (request,) = rig.fetcher.poll(4).requests
    assert nodes([request]) == {3: {0: 13}}


def test_preference_expires_after_metadata_max_age() -> None:
    rig = rig_on_partition_0()
    switch_to_replica(rig, now=0)
    (request,) = rig.fetcher.poll(MAX_AGE).requests  # expires at 1 + MAX_AGE
    assert request.node_id == 3
    request.handler(MAX_AGE + 0.5, fetch_response(partition_data(0)), None)
    (request,) = rig.fetcher.poll(MAX_AGE + 1).requests
    assert request.node_id == 1
    assert rig.subscriptions.state(tp(0)).preferred_read_replica is None


def test_connection_failure_to_the_replica_goes_back_to_the_leader() -> None:
    rig = rig_on_partition_0()
    switch_to_replica(rig)
    (request,) = rig.fetcher.poll(2).requests
    assert request.node_id == 3
    request.handler(3, None, KafkaConnectionError("broker 3 went away"))
    (request,) = rig.fetcher.poll(4).requests
    assert request.node_id == 1 and nodes([request]) == {1: {0: 10}}


def test_partition_error_on_the_replica_goes_back_to_the_leader() -> None:
    rig = rig_on_partition_0()
    switch_to_replica(rig)
    (request,) = rig.fetcher.poll(2).requests
    request.handler(3, fetch_response(partition_data(0, error_code=NOT_LEADER_OR_FOLLOWER)), None)
    assert rig.subscriptions.state(tp(0)).preferred_read_replica is None


def test_out_of_range_on_a_lagging_follower_refetches_from_the_leader_without_reset() -> None:
    rig = rig_on_partition_0()
    switch_to_replica(rig)
    (request,) = rig.fetcher.poll(2).requests
    assert request.node_id == 3
    request.handler(3, fetch_response(partition_data(0, error_code=OFFSET_OUT_OF_RANGE)), None)
    st = rig.subscriptions.state(tp(0))
    assert st.fetch_state is FetchState.FETCHING and st.position is not None
    assert st.position.offset == 10 and st.preferred_read_replica is None
    result = rig.fetcher.poll(4)
    assert result.requests == [] and result.next_poll_ms > 0  # a short pause first
    (request,) = rig.fetcher.poll(4 + result.next_poll_ms).requests
    assert nodes([request]) == {1: {0: 10}}
    # the same error from the leader itself resets the position, as before
    request.handler(5, fetch_response(partition_data(0, error_code=OFFSET_OUT_OF_RANGE)), None)
    assert rig.subscriptions.state(tp(0)).fetch_state is FetchState.AWAIT_RESET


def test_replica_unknown_to_metadata_is_not_used() -> None:
    rig = rig_on_partition_0()
    switch_to_replica(rig, replica=7)  # no broker 7 in the metadata
    (request,) = rig.fetcher.poll(2).requests
    assert request.node_id == 1
    # the preference stays: metadata may learn about broker 7 before it expires
    assert rig.subscriptions.state(tp(0)).preferred_read_replica == 7
