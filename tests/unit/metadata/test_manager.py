"""Tests of MetadataManager with a fake clock (plain numbers, milliseconds): when it asks, for
what, how it backs off, and what topic errors and stale epochs do."""

from __future__ import annotations

import math

import pytest

from kafkaio.errors import (
    InvalidTopicError,
    KafkaConfigError,
    KafkaConnectionError,
    TopicAuthorizationFailedError,
)
from kafkaio.metadata import MetadataManager, TopicPartition
from kafkaio.protocol.messages import MetadataRequest, MetadataResponse
from tests.unit.metadata.responses import (
    INVALID_TOPIC_EXCEPTION,
    LEADER_NOT_AVAILABLE,
    TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_OR_PARTITION,
    partition,
    response,
    topic,
)

TP = TopicPartition
MAX_AGE = 300_000


def manager(topics: tuple[str, ...] = (), **kw: object) -> MetadataManager:
    kw.setdefault("backoff_jitter", 0.0)
    m = MetadataManager(**kw)  # type: ignore[arg-type]
    m.set_topics(topics)
    return m


def send(m: MetadataManager, now: float) -> MetadataRequest:
    """Poll at `now` and return the single request it must send."""
    result = m.poll(now)
    assert len(result.requests) == 1, f"expected a request at {now}, got {result}"
    node, request = result.requests[0].node_id, result.requests[0].request
    assert node is None
    assert result.next_poll_ms == math.inf
    return request


def idle(m: MetadataManager, now: float) -> float:
    """Poll at `now`, expect nothing to send, return the wait."""
    result = m.poll(now)
    assert result.requests == [], f"unexpected request at {now}"
    return result.next_poll_ms


def names(request: MetadataRequest) -> list[str] | None:
    if request.topics is None:
        return None
    return [t.name for t in request.topics if t.name is not None]


def ok(*topic_names: str) -> MetadataResponse:
    return response(*(topic(n, partition(0, leader=1, epoch=1)) for n in topic_names))


def test_rejects_negative_config() -> None:
    with pytest.raises(KafkaConfigError, match="retry_backoff_ms"):
        MetadataManager(retry_backoff_ms=-1)
    with pytest.raises(KafkaConfigError, match="metadata_max_age_ms"):
        MetadataManager(metadata_max_age_ms=-5)


def test_first_poll_asks_for_the_topics_of_interest() -> None:
    m = manager(("b", "a"))
    request = send(m, 0)
    assert names(request) == ["a", "b"]
    assert request.allow_auto_topic_creation is False
    assert m.in_flight
    assert manager(allow_auto_topic_creation=True).poll(0).requests[0].request.allow_auto_topic_creation


def test_no_topics_asks_for_brokers_only() -> None:
    # An empty list (not None) returns brokers and no topics in v1+.
    assert names(send(manager(), 0)) == []


def test_one_request_in_flight() -> None:
    m = manager(("a",))
    send(m, 0)
    assert idle(m, 1) == math.inf
    m.request_update()
    m.add_topics(["b"])
    assert idle(m, 5000) == math.inf
    m.on_response(6000, ok("a"))
    assert not m.in_flight
    # The update requested and the topic added while in flight come next, in one request
    # (at once: "b" is new, see test_new_topics_skip_the_backoff_after_a_clean_response).
    assert names(send(m, 6000)) == ["a", "b"]


def test_periodic_refresh_every_max_age() -> None:
    m = manager(("a",), metadata_max_age_ms=MAX_AGE)
    send(m, 0)
    m.on_response(1000, ok("a"))
    assert m.version == 1
    assert idle(m, 1000) == MAX_AGE
    assert idle(m, 200_000) == MAX_AGE - 199_000
    assert names(send(m, 1000 + MAX_AGE)) == ["a"]
    m.on_response(1000 + MAX_AGE + 5, ok("a"))
    assert m.version == 2
    assert idle(m, 1000 + MAX_AGE + 5) == MAX_AGE


def test_urgent_update_is_rate_limited_by_backoff() -> None:
    m = manager(("a", "b"))
    send(m, 0)
    m.on_response(1000, ok("a", "b"))
    m.request_update()
    assert idle(m, 1030) == 70
    assert names(send(m, 1100)) == ["a", "b"]  # urgent updates are full
    m.on_response(1200, ok("a", "b"))
    # The update is done: back to the periodic schedule.
    assert idle(m, 1300) == 1200 + MAX_AGE - 1300


def test_exponential_backoff_after_failures_then_reset_after_success() -> None:
    m = manager(("a",), retry_backoff_ms=100, retry_backoff_max_ms=1000)
    now = 0.0
    waits = []
    for _ in range(6):
        send(m, now)
        m.on_failure(now, KafkaConnectionError("connection refused"))
        wait = idle(m, now)
        waits.append(wait)
        now += wait
    assert waits == [100, 200, 400, 800, 1000, 1000]
    assert isinstance(m.last_error, KafkaConnectionError)
    assert m.version == 0
    send(m, now)
    m.on_response(now, ok("a"))
    assert m.last_error is None
    m.request_update()
    assert idle(m, now) == 100  # reset: one base backoff again
    send(m, now + 100)
    m.on_failure(now + 100, KafkaConnectionError("connection reset"))
    assert idle(m, now + 100) == 100  # first failure after a success: base backoff


def test_jitter_spreads_backoff_within_twenty_percent() -> None:
    low = manager(("a",), backoff_jitter=0.2, rng=lambda: 0.0)
    high = manager(("a",), backoff_jitter=0.2, rng=lambda: 0.999999)
    for m in (low, high):
        send(m, 0)
        m.on_failure(0, KafkaConnectionError("x"))
    assert idle(low, 0) == pytest.approx(80)
    assert idle(high, 0) == pytest.approx(120, abs=0.01)


def test_failed_periodic_refresh_is_retried_after_backoff() -> None:
    m = manager(("a",))
    send(m, 0)
    m.on_response(0, ok("a"))
    send(m, MAX_AGE)
    m.on_failure(MAX_AGE + 10, KafkaConnectionError("timed out"))
    assert idle(m, MAX_AGE + 10) == 100
    assert names(send(m, MAX_AGE + 110)) == ["a"]


def test_empty_broker_list_counts_as_failure() -> None:
    m = manager(("a",))
    send(m, 0)
    m.on_response(10, response(brokers=()))
    assert m.version == 0
    assert m.last_error is not None and "no brokers" in str(m.last_error)
    assert idle(m, 10) == 100


def test_new_topics_are_fetched_alone_and_kept_with_the_others() -> None:
    m = manager(("a",))
    send(m, 0)
    m.on_response(0, ok("a"))
    assert m.add_topics(["b", "a"])
    assert not m.add_topics(["b"])
    request = send(m, 50)
    assert names(request) == ["b"]  # a partial request
    m.on_response(100, ok("b"))
    assert set(m.cluster.topics) == {"a", "b"}  # "a" kept
    assert m.cluster.leader_for(TP("b", 0)) == 1
    assert idle(m, 100) == MAX_AGE - 100  # the periodic schedule is unchanged


def test_new_topics_skip_the_backoff_after_a_clean_response() -> None:
    # as the Java client (Metadata.requestUpdateForNewTopics): a producer meeting topics one
    # after the other must not wait retry_backoff_ms for each
    m = manager(("a",))
    send(m, 0)
    m.on_response(10, ok("a"))
    for i, name in enumerate(("b", "c", "d")):
        now = 11.0 + i
        m.add_topics([name])
        assert names(send(m, now)) == [name]
        m.on_response(now, ok(name))
    m.request_update()
    assert idle(m, 14) == 99  # anything else still waits for the backoff
    m.add_topics(["c"])  # known: nothing to fetch
    assert idle(m, 14) == 99


def test_new_topics_wait_for_the_backoff_after_a_failure() -> None:
    m = manager(("a",))
    send(m, 0)
    m.on_failure(10, KafkaConnectionError("connection refused"))
    m.add_topics(["b"])
    assert idle(m, 10) == 100
    assert names(send(m, 110)) == ["a", "b"]
    # a topic the broker does not know yet is retried after the backoff, not at once
    unknown_b = topic("b", error=UNKNOWN_TOPIC_OR_PARTITION)
    m.on_response(120, response(topic("a", partition(0, leader=1)), unknown_b))
    assert idle(m, 120) == 200  # still backing off: the retries keep growing it


def test_full_refresh_drops_topics_no_longer_of_interest() -> None:
    m = manager(("a", "b"))
    send(m, 0)
    m.on_response(0, ok("a", "b"))
    assert m.remove_topics(["b", "zzz"])
    assert not m.remove_topics(["b"])
    assert m.topics == {"a"}
    assert "b" in m.cluster.topics  # until the next full response
    m.request_update()
    assert names(send(m, 100)) == ["a"]
    m.on_response(100, ok("a"))
    assert set(m.cluster.topics) == {"a"}


def test_set_topics_replaces_the_interest() -> None:
    m = manager(("a", "b"))
    assert not m.set_topics(["b", "a"])
    assert m.set_topics(["c"])
    assert m.topics == {"c"}
    assert names(send(m, 0)) == ["c"]


def test_all_topics_mode_for_pattern_subscriptions() -> None:
    m = manager(("a",))
    send(m, 0)
    m.on_response(0, ok("a"))
    m.request_all_topics()
    assert m.all_topics
    request = send(m, 100)  # switching on asks right away (after backoff)
    assert request.topics is None
    m.on_response(100, ok("a", "x", "y"))
    assert set(m.cluster.topics) == {"a", "x", "y"}
    assert idle(m, 100) == MAX_AGE
    assert send(m, 100 + MAX_AGE).topics is None
    m.on_response(100 + MAX_AGE, ok("a", "y"))  # "x" deleted
    assert set(m.cluster.topics) == {"a", "y"}
    m.request_all_topics(False)
    m.request_update()
    assert names(send(m, 200 + MAX_AGE)) == ["a"]


@pytest.mark.parametrize("code", [UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE])
def test_retriable_topic_error_keeps_the_topic_and_retries_with_backoff(code: int) -> None:
    m = manager(("a", "new"))
    send(m, 0)
    m.on_response(0, response(topic("a", partition(0)), topic("new", error=code)))
    assert m.topic_errors() == {}
    assert m.cluster.topics["new"].error == code
    assert m.topics == {"a", "new"}
    assert idle(m, 0) == 100
    assert names(send(m, 100)) == ["new"]  # only the topic in error
    m.on_response(100, response(topic("new", error=code)))
    assert idle(m, 100) == 200  # still failing: exponential backoff
    assert names(send(m, 300)) == ["new"]
    m.on_response(300, ok("new"))
    assert m.cluster.partitions_for("new") == [0]
    assert set(m.cluster.topics) == {"a", "new"}
    assert idle(m, 300) == MAX_AGE - 300  # resolved: back to the periodic schedule


def test_partition_without_leader_is_retried() -> None:
    m = manager(("a",))
    send(m, 0)
    m.on_response(
        0, response(topic("a", partition(0), partition(1, -1, -1, error=LEADER_NOT_AVAILABLE)))
    )
    assert m.cluster.available_partitions_for("a") == [0]
    assert names(send(m, 100)) == ["a"]
    m.on_response(100, response(topic("a", partition(0), partition(1, leader=2))))
    assert m.cluster.available_partitions_for("a") == [0, 1]
    assert idle(m, 100) == MAX_AGE - 100  # partial retries leave the periodic schedule alone


@pytest.mark.parametrize(
    ("code", "error_class"),
    [
        (TOPIC_AUTHORIZATION_FAILED, TopicAuthorizationFailedError),
        (INVALID_TOPIC_EXCEPTION, InvalidTopicError),
    ],
)
def test_fatal_topic_error_is_surfaced_not_retried(code: int, error_class: type) -> None:
    m = manager(("ok", "bad"))
    send(m, 0)
    m.on_response(0, response(topic("ok", partition(0)), topic("bad", error=code)))
    errors = m.topic_errors()
    assert list(errors) == ["bad"]
    assert isinstance(errors["bad"], error_class)
    assert "bad" in str(errors["bad"])
    assert idle(m, 0) == MAX_AGE  # no hot loop: the next attempt is the periodic one
    assert m.topics == {"ok", "bad"}
    # The error goes away once the topic is fine (e.g. an ACL was added)...
    send(m, MAX_AGE)
    m.on_response(MAX_AGE, ok("ok", "bad"))
    assert m.topic_errors() == {}
    # ...or when it stops being of interest.
    m.request_update()
    send(m, MAX_AGE + 100)
    m.on_response(MAX_AGE + 100, response(topic("ok", partition(0)), topic("bad", error=code)))
    assert list(m.topic_errors()) == ["bad"]
    m.remove_topics(["bad"])
    assert m.topic_errors() == {}


def test_errors_of_topics_not_of_interest_are_ignored() -> None:
    m = manager(("a",))
    m.request_all_topics()
    send(m, 0)
    m.on_response(
        0, response(topic("a", partition(0)), topic("other", error=LEADER_NOT_AVAILABLE))
    )
    assert m.topic_errors() == {}
    assert idle(m, 0) == MAX_AGE


def test_urgent_update_requested_while_in_flight_is_not_cleared_by_that_response() -> None:
    m = manager(("a",))
    send(m, 0)
    m.on_response(0, ok("a"))
    m.request_update()
    send(m, 100)
    wait_past = m.request_update()  # the request in flight predates this call
    m.on_response(150, ok("a"))
    assert m.version == wait_past  # this snapshot does not satisfy the waiter
    assert names(send(m, 250)) == ["a"]
    m.on_response(260, ok("a"))
    assert m.version > wait_past
    assert idle(m, 260) == MAX_AGE


def test_request_update_returns_a_version_to_wait_past() -> None:
    m = manager(("a",))
    v = m.request_update()
    assert v == m.version == 0
    send(m, 0)
    m.on_failure(0, KafkaConnectionError("refused"))
    v = m.request_update()
    send(m, 100)
    m.on_response(100, ok("a"))
    assert m.version > v


def test_versions_increase_with_every_snapshot() -> None:
    m = manager(("a",))
    seen = [m.version]
    now = 0.0
    for i in range(5):
        m.request_update()
        send(m, now)
        if i == 2:
            m.on_failure(now, KafkaConnectionError("lost"))
        else:
            m.on_response(now, ok("a"))
        seen.append(m.version)
        now += 1000
    assert seen == sorted(seen)
    assert len(set(seen)) == 5  # the failure published nothing
    assert m.cluster.version == m.version


def test_stale_leader_epoch_from_a_lagging_broker_is_ignored() -> None:
    m = manager(("a",))
    send(m, 0)
    m.on_response(0, response(topic("a", partition(0, leader=1, epoch=5))))
    m.request_update()
    send(m, 100)
    m.on_response(100, response(topic("a", partition(0, leader=2, epoch=4))))
    assert m.cluster.leader_for(TP("a", 0)) == 1
    assert m.cluster.leader_epoch(TP("a", 0)) == 5
    assert m.version == 2  # a new snapshot all the same (brokers may have changed)


def test_observed_leader_epoch_forces_a_refresh_until_caught_up() -> None:
    m = manager(("a",))
    send(m, 0)
    m.on_response(0, response(topic("a", partition(0, leader=1, epoch=5))))
    assert not m.observe_leader_epoch(TP("a", 0), 5)  # not newer
    assert m.observe_leader_epoch(TP("a", 0), 7)
    assert not m.observe_leader_epoch(TP("a", 0), 6)  # already asked for newer
    assert names(send(m, 100)) == ["a"]
    # A broker that only knows epoch 6 lags behind what the fetch response showed.
    m.on_response(100, response(topic("a", partition(0, leader=2, epoch=6))))
    assert m.cluster.leader_epoch(TP("a", 0)) == 5
    assert idle(m, 100) == 100  # retried after backoff
    send(m, 200)
    m.on_response(200, response(topic("a", partition(0, leader=2, epoch=6))))
    assert idle(m, 200) == 200  # still behind: the backoff grows
    send(m, 400)
    m.on_response(400, response(topic("a", partition(0, leader=3, epoch=7))))
    assert (m.cluster.leader_for(TP("a", 0)), m.cluster.leader_epoch(TP("a", 0))) == (3, 7)
    assert idle(m, 400) == MAX_AGE - 400


def test_round_trip_through_wire_bytes() -> None:
    m = manager(("orders",))
    request = send(m, 0)
    wire_request = MetadataRequest.decode(request.encode(12), 12)
    assert [t.name for t in wire_request.topics or []] == ["orders"]
    answer = response(
        topic("orders", partition(0, leader=1, epoch=2), partition(1, leader=2, epoch=2)),
        topic("secret", error=TOPIC_AUTHORIZATION_FAILED),
    )
    m.add_topics(["secret"])
    m.on_response(10, MetadataResponse.decode(answer.encode(12), 12))
    c = m.cluster
    assert c.partitions_by_leader() == {1: (TP("orders", 0),), 2: (TP("orders", 1),)}
    orders_id = c.topic_id("orders")
    assert orders_id is not None and c.topic_name(orders_id) == "orders"
    assert isinstance(m.topic_errors()["secret"], TopicAuthorizationFailedError)


def _equivalent_chain(m: MetadataManager, now: float, count: int) -> tuple[list[float], float]:
    """Ask for `count` retry updates in a row, each answered like the last; return the waits."""
    waits = []
    for _ in range(count):
        m.request_update(reset_backoff=False)
        wait = idle(m, now)
        waits.append(wait)
        now += wait
        send(m, now)
        m.on_response(now, ok("a"))
    return waits, now


def test_equivalent_responses_back_off_exponentially_to_the_max() -> None:
    # A broker keeps answering NOT_LEADER_OR_FOLLOWER while the metadata shows no change:
    # as Java's Metadata, refreshes back off from retry_backoff_ms to retry_backoff_max_ms.
    m = manager(("a",), retry_backoff_ms=100, retry_backoff_max_ms=1000)
    send(m, 0)
    m.on_response(0, ok("a"))  # the first answer is news: no equivalent backoff yet
    waits, _ = _equivalent_chain(m, 0, 7)
    assert waits == [100, 100, 200, 400, 800, 1000, 1000]


def test_a_newer_leader_epoch_resets_the_equivalent_backoff() -> None:
    m = manager(("a",), retry_backoff_ms=100, retry_backoff_max_ms=1000)
    send(m, 0)
    m.on_response(0, ok("a"))
    _, now = _equivalent_chain(m, 0, 4)
    m.request_update(reset_backoff=False)
    assert idle(m, now) == 800
    now += 800
    send(m, now)
    m.on_response(now, response(topic("a", partition(0, leader=2, epoch=2))))  # moved
    m.request_update(reset_backoff=False)
    assert idle(m, now) == 100  # the first refresh after a real change is not slowed down
    send(m, now + 100)
    m.on_response(now + 100, response(topic("a", partition(0, leader=2, epoch=2))))
    m.request_update(reset_backoff=False)
    assert idle(m, now + 100) == 100  # equivalent again: the count starts over


def test_a_request_for_new_metadata_resets_the_equivalent_backoff() -> None:
    m = manager(("a",), retry_backoff_ms=100, retry_backoff_max_ms=1000)
    send(m, 0)
    m.on_response(0, ok("a"))
    _, now = _equivalent_chain(m, 0, 5)
    m.request_update()  # reset_backoff=True: new metadata is wanted
    assert idle(m, now) == 100
    _, now = _equivalent_chain(m, now, 5)
    m.add_topics(["b"])  # a new topic is fetched at once
    assert names(send(m, now)) == ["b"]


def test_a_failure_or_an_expired_snapshot_resets_the_equivalent_backoff() -> None:
    m = manager(("a",), retry_backoff_ms=100, retry_backoff_max_ms=1000, metadata_max_age_ms=5000)
    send(m, 0)
    m.on_response(0, ok("a"))
    _, now = _equivalent_chain(m, 0, 4)  # waits of 100, 100, 200, 400 ms
    m.request_update(reset_backoff=False)
    assert idle(m, now) == 800
    send(m, now + 800)
    m.on_failure(now + 800, KafkaConnectionError("connection reset"))
    m.request_update(reset_backoff=False)
    assert idle(m, now + 800) == 100  # failures count on their own, from the base
    m = manager(("a",), retry_backoff_ms=100, retry_backoff_max_ms=10_000, metadata_max_age_ms=1000)
    send(m, 0)
    m.on_response(0, ok("a"))
    _, now = _equivalent_chain(m, 0, 5)  # the next equivalent backoff is 1,600 ms
    m.request_update(reset_backoff=False)
    assert idle(m, now) == 1000  # the snapshot expires first (max age 1,000 ms)
    assert names(send(m, now + 1000)) == ["a"]
    m.on_response(now + 1000, ok("a"))
    m.request_update(reset_backoff=False)
    assert idle(m, now + 1000) == 100  # a periodic refresh starts the count over


def test_a_leader_update_while_a_request_is_in_flight_keeps_versions_increasing() -> None:
    m = manager(("a",))
    send(m, 0)
    m.on_response(0, ok("a"))  # leader 1, epoch 1
    m.request_update()
    send(m, 100)  # in flight
    assert m.update_leaders(110, {TP("a", 0): (2, 1)}) == set()  # epoch not newer: ignored
    assert m.update_leaders(110, {TP("a", 0): (2, 2)}) == {TP("a", 0)}
    moved = m.version
    assert m.cluster.leader_for(TP("a", 0)) == 2
    m.on_response(120, ok("a"))  # answered by a lagging broker: epoch 1
    assert m.version > moved
    assert m.cluster.leader_for(TP("a", 0)) == 2  # the newer epoch stays
