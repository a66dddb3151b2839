"""MetricsRegistry: declaring sensors and gauges under Java names, the snapshot's shape, the
null registry, and the per-client metric sets."""

from __future__ import annotations

from kafkaio.metrics import MetricsRegistry, NullRegistry, Stat, make_registry
from kafkaio.metrics.connection import ConnectionMetrics
from kafkaio.metrics.consumer import ConsumerMetrics
from kafkaio.metrics.producer import ProducerMetrics


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_snapshot_lists_client_level_and_tagged_metrics() -> None:
    clock = Clock()
    r = MetricsRegistry("c1", "consumer", window_ms=1000, clock=clock)
    s = r.sensor("g", {"x-total": Stat.TOTAL, "x-max": Stat.MAX})
    family = r.sensor_family("g", {"lag-max": Stat.MAX}, ("topic", "partition"))
    r.gauge("assigned", "g", lambda now: 2.0)
    r.gauge_family("lag", "g", ("topic", "partition"), lambda now: {("t", "0"): 4.0})
    s.record(3.0, 0.0)
    s.record(5.0, 1.0)
    family.get("t", "0").record(9.0, 1.0)
    family.get("t", "1").record(1.0, 1.0)
    clock.now = 2.0
    snap = r.snapshot()
    assert snap["x-total"] == 8.0
    assert snap["x-max"] == 5.0
    assert snap["assigned"] == 2.0
    assert snap["partitions"] == {"t-0": {"lag-max": 9.0, "lag": 4.0}, "t-1": {"lag-max": 1.0}}


def test_family_remove_forgets_an_instance() -> None:
    r = MetricsRegistry("c", "consumer", clock=lambda: 0.0)
    family = r.sensor_family("g", {"lag-max": Stat.MAX}, ("topic", "partition"))
    family.get("t", "0").record(1.0, 0.0)
    family.remove("t", "0")
    assert "partitions" not in r.snapshot()


def test_metric_names_are_declared_before_any_instance() -> None:
    r = MetricsRegistry("c", "consumer")
    r.sensor_family("g", {"lag-max": Stat.MAX}, ("topic", "partition"))
    names = {(m.name, m.tag_names) for m in r.metric_names}
    assert names == {("lag-max", ("topic", "partition"))}


def test_null_registry_reads_empty_and_ignores_recordings() -> None:
    r = make_registry("c", "consumer", enabled=False)
    assert isinstance(r, NullRegistry) and not r.enabled
    ConsumerMetrics(r).records_consumed.record(5, 0.0)
    ProducerMetrics(r).record_send.record(5, 0.0)
    assert r.snapshot() == {}
    assert r.metric_names == []


def test_client_metric_sets_use_java_names() -> None:
    r = MetricsRegistry("c", "consumer")
    ConsumerMetrics(r).bind_gauges(
        lags=lambda now: {}, assigned_partitions=lambda now: 0, last_poll_seconds_ago=lambda now: 0
    )
    ConnectionMetrics(r).bind_connection_count(lambda now: 0)
    names = {m.name for m in r.metric_names}
    for expected in (
        "records-consumed-rate",
        "records-consumed-total",
        "bytes-consumed-rate",
        "records-lag",
        "records-lag-max",
        "fetch-latency-avg",
        "fetch-latency-max",
        "commit-latency-avg",
        "rebalance-latency-avg",
        "last-poll-seconds-ago",
        "assigned-partitions",
        "connection-count",
        "connection-creation-rate",
        "io-wait-ratio",
    ):
        assert expected in names
    p = MetricsRegistry("p", "producer")
    ProducerMetrics(p).bind_gauges(
        buffer_total=lambda now: 1, buffer_available=lambda now: 1, waiting=lambda now: 0
    )
    pnames = {m.name for m in p.metric_names}
    for expected in (
        "record-send-rate",
        "record-error-rate",
        "record-retry-rate",
        "batch-size-avg",
        "compression-rate-avg",
        "request-latency-avg",
        "buffer-available-bytes",
        "waiting-threads",
    ):
        assert expected in pnames
    snap = p.snapshot()
    assert snap["buffer-available-bytes"] == 1.0 and snap["record-send-total"] == 0.0
