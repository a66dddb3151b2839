"""The connection manager's sensors (Java "*-metrics" group of every client): connections
opened and closed, and how long the network task waits for I/O."""

from __future__ import annotations

from collections.abc import Callable

from kafkaio.metrics.registry import MetricsRegistry
from kafkaio.metrics.sensor import Stat, event_stats


class ConnectionMetrics:
    """Sensors a ConnectionManager (and the network task) records into."""

    __slots__ = ("registry", "group", "created", "closed", "io_wait")

    def __init__(self, registry: MetricsRegistry) -> None:
        self.registry = r = registry
        self.group = group = f"{registry.client_kind or 'client'}-metrics"
        self.created = r.sensor(
            group,
            event_stats("connection-creation"),
            description="broker connections opened",
        )
        self.closed = r.sensor(
            group,
            event_stats("connection-close"),
            description="broker connections closed or lost",
        )
        # seconds waited per wait: the RATE of seconds per second is the fraction of time
        self.io_wait = r.sensor(
            group,
            {"io-wait-ratio": Stat.RATE, "io-wait-time-avg": Stat.AVG},
            description="time the network task waited for I/O or work (s)",
        )

    def bind_connection_count(self, count: Callable[[float], float]) -> None:
        self.registry.gauge(
            "connection-count", self.group, count, description="open broker connections"
        )
