"""The consumer's sensors under the Java client's names (fetch manager and coordinator groups).

The Consumer records into them; gauges (lag, assigned partitions, last poll) read its state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kafkaio.metrics.registry import MetricsRegistry
from kafkaio.metrics.sensor import Stat, event_stats, latency_stats

FETCH_GROUP = "consumer-fetch-manager-metrics"
COORDINATOR_GROUP = "consumer-coordinator-metrics"
CONSUMER_GROUP = "consumer-metrics"

PartitionValues = Callable[[float], Mapping[tuple[str, ...], float]]


class ConsumerMetrics:
    """Sensors a consumer records into (``sensor.record(value, now_ms)``)."""

    __slots__ = (
        "registry",
        "records_consumed",
        "bytes_consumed",
        "fetch_latency",
        "commit_latency",
        "rebalance_latency",
        "failed_rebalance",
        "poll",
        "partition_lag",
    )

    def __init__(self, registry: MetricsRegistry) -> None:
        self.registry = r = registry
        self.records_consumed = r.sensor(
            FETCH_GROUP,
            {"records-consumed-rate": Stat.RATE, "records-consumed-total": Stat.TOTAL},
            description="records handed to the application",
        )
        self.bytes_consumed = r.sensor(
            FETCH_GROUP,
            {"bytes-consumed-rate": Stat.RATE, "bytes-consumed-total": Stat.TOTAL},
            description="bytes of the record batches handed to the application",
        )
        self.fetch_latency = r.sensor(
            FETCH_GROUP,
            latency_stats("fetch"),
            description="Fetch request round trips (ms)",
        )
        self.commit_latency = r.sensor(
            COORDINATOR_GROUP,
            latency_stats("commit"),
            description="offset commits, from request to outcome (ms)",
        )
        self.rebalance_latency = r.sensor(
            COORDINATOR_GROUP,
            {
                "rebalance-latency-avg": Stat.AVG,
                "rebalance-latency-max": Stat.MAX,
                "rebalance-latency-total": Stat.TOTAL,
                "rebalance-total": Stat.COUNT,
            },
            description="rebalances, from joining to a stable assignment (ms)",
        )
        self.failed_rebalance = r.sensor(
            COORDINATOR_GROUP,
            {"failed-rebalance-total": Stat.COUNT},
            description="rebalances that ended without a stable assignment",
        )
        self.poll = r.sensor(
            CONSUMER_GROUP,
            event_stats("poll"),
            description="application polls (getmany, getone batches, iteration batches)",
        )
        self.partition_lag = r.sensor_family(
            FETCH_GROUP,
            {"records-lag-avg": Stat.AVG, "records-lag-max": Stat.MAX},
            ("topic", "partition"),
            description="high watermark minus position, seen at each poll",
        )

    def bind_gauges(
        self,
        *,
        lags: PartitionValues,
        assigned_partitions: Callable[[float], float],
        last_poll_seconds_ago: Callable[[float], float],
    ) -> None:
        """Register the gauges computed from the consumer's state when read."""
        r = self.registry
        r.gauge_family("records-lag", FETCH_GROUP, ("topic", "partition"), lags)
        r.gauge(
            "records-lag-max",
            FETCH_GROUP,
            lambda now: max(lags(now).values(), default=0.0),
            description="the largest records-lag of the assigned partitions (now)",
        )
        r.gauge("assigned-partitions", COORDINATOR_GROUP, assigned_partitions)
        r.gauge("last-poll-seconds-ago", CONSUMER_GROUP, last_poll_seconds_ago)


# membership states (classic and KIP-848 names) around a rebalance
_SETTLED = frozenset({"stable", "unjoined", "unsubscribed"})
_GIVEN_UP = frozenset({"fatal", "fenced", "stale", "preparing_leave", "prepare_leaving", "leaving"})


class RebalanceTimer:
    """Times rebalances from membership state changes (``timer(old, new)``): from leaving a
    settled state (stable, or not in the group) to the next "stable". One that ends in a
    fatal, fenced, expired or leaving state counts as failed. Reads the registry clock only
    on state changes."""

    __slots__ = ("_metrics", "_started")

    def __init__(self, metrics: ConsumerMetrics) -> None:
        self._metrics = metrics
        self._started: float | None = None

    def __call__(self, old: str, new: str) -> None:
        if self._started is None:
            if old in _SETTLED and new not in _SETTLED and new not in _GIVEN_UP:
                self._started = self._metrics.registry.clock()
            return
        if new == "stable":
            now = self._metrics.registry.clock()
            self._metrics.rebalance_latency.record(now - self._started, now)
            self._started = None
        elif new in _GIVEN_UP:
            self._metrics.failed_rebalance.record(1.0, self._metrics.registry.clock())
            self._started = None


class ShareConsumerMetrics:
    """A share consumer's sensors (KIP-932 names follow the consumer's where they exist)."""

    __slots__ = ("registry", "records_consumed", "fetch_latency", "poll")

    def __init__(self, registry: MetricsRegistry) -> None:
        self.registry = r = registry
        self.records_consumed = r.sensor(
            FETCH_GROUP,
            {"records-consumed-rate": Stat.RATE, "records-consumed-total": Stat.TOTAL},
            description="acquired records handed to the application",
        )
        self.fetch_latency = r.sensor(
            FETCH_GROUP,
            latency_stats("fetch"),
            description="ShareFetch request round trips (ms)",
        )
        self.poll = r.sensor(
            CONSUMER_GROUP,
            event_stats("poll"),
            description="application polls",
        )

    def bind_gauges(
        self,
        *,
        assigned_partitions: Callable[[float], float],
        last_poll_seconds_ago: Callable[[float], float],
    ) -> None:
        r = self.registry
        r.gauge("assigned-partitions", COORDINATOR_GROUP, assigned_partitions)
        r.gauge("last-poll-seconds-ago", CONSUMER_GROUP, last_poll_seconds_ago)
