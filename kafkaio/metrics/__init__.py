"""kafkaio.metrics: the clients' metrics registry (Java metric names), health snapshots,
and (optional extra ``otel``) OpenTelemetry metrics and tracing in ``kafkaio.metrics.otel``."""

from __future__ import annotations

from kafkaio.metrics.health import ConnectionHealth, GroupHealth, HealthSnapshot
from kafkaio.metrics.registry import (
    MetricName,
    MetricSample,
    MetricsRegistry,
    MetricsSnapshot,
    NullRegistry,
    SensorFamily,
    monotonic_ms,
    snapshot_of,
)
from kafkaio.metrics.sensor import Sensor, Stat


def make_registry(client_id: str, client_kind: str, enabled: bool = True) -> MetricsRegistry:
    """The registry of a client: a real one, or a NullRegistry when metrics are disabled."""
    if enabled:
        return MetricsRegistry(client_id, client_kind)
    return NullRegistry(client_id, client_kind)


__all__ = [
    "ConnectionHealth",
    "GroupHealth",
    "HealthSnapshot",
    "MetricName",
    "MetricSample",
    "MetricsRegistry",
    "MetricsSnapshot",
    "NullRegistry",
    "Sensor",
    "SensorFamily",
    "Stat",
    "make_registry",
    "monotonic_ms",
    "snapshot_of",
]
