"""OpenTelemetry metrics for kafkaio clients (extra ``otel``): observable instruments that
read the clients' registries at collection time, so recording costs nothing more.

``KafkaMetricsExporter(meter_provider).register(client)``; tracing is in ``tracing``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from kafkaio.errors import KafkaConfigError
from kafkaio.metrics.registry import MetricName, MetricSample, MetricsRegistry

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, Observation

INSTRUMENTATION_NAME = "kafkaio"
# one collection reads every instrument within this many ms: samples are computed once
_CACHE_MS = 100.0


class HasMetrics(Protocol):
    @property
    def metrics_registry(self) -> MetricsRegistry: ...


def _import_otel() -> Any:
    try:
        from opentelemetry import metrics
    except ImportError:  # pragma: no cover - depends on the environment
        raise KafkaConfigError(
            "OpenTelemetry is not installed: pip install 'kafkaio[otel]' "
            "(opentelemetry-api and opentelemetry-sdk)"
        ) from None
    return metrics


def instrument_name(kind: str, metric: MetricName) -> str:
    """``kafka.<client kind>.<Java name>``, e.g. ``kafka.consumer.records-consumed-total``
    (tagged families keep their Java name; their tags become attributes)."""
    return f"kafka.{kind or 'client'}.{metric.name}"


class KafkaMetricsExporter:
    """Exposes registered clients' metrics as OpenTelemetry observable instruments.

    Cumulative metrics (``*-total``) are observable counters, the rest observable gauges;
    attributes are ``client.id`` plus the metric's tags (topic, partition, node_id). One
    instrument serves every registered client of a kind. Register clients before the
    first collection (instruments for names seen later are added at ``register``).
    """

    def __init__(self, meter_provider: MeterProvider | None = None) -> None:
        otel_metrics = _import_otel()
        provider = meter_provider or otel_metrics.get_meter_provider()
        self._meter: Meter = provider.get_meter(INSTRUMENTATION_NAME)
        self._registries: list[MetricsRegistry] = []
        self._instruments: set[str] = set()
        self._cache: dict[int, tuple[float, list[MetricSample]]] = {}

    def register(self, client: HasMetrics | MetricsRegistry) -> None:
        """Export ``client``'s metrics (a Producer, Consumer, ShareConsumer or registry)."""
        registry = client if isinstance(client, MetricsRegistry) else client.metrics_registry
        if not registry.enabled:
            raise KafkaConfigError(
                "this client was made with metrics_enabled=False: there is nothing to export"
            )
        if registry not in self._registries:
            self._registries.append(registry)
        for metric in registry.metric_names:
            self._ensure(registry.client_kind, metric)

    def unregister(self, client: HasMetrics | MetricsRegistry) -> None:
        registry = client if isinstance(client, MetricsRegistry) else client.metrics_registry
        if registry in self._registries:
            self._registries.remove(registry)
            self._cache.pop(id(registry), None)

    def _ensure(self, kind: str, metric: MetricName) -> None:
        name = instrument_name(kind, metric)
        if name in self._instruments:
            return
        self._instruments.add(name)
        callback = self._callback(kind, metric.name)
        unit = "ms" if "latency" in metric.name else "1"
        if metric.cumulative:
            self._meter.create_observable_counter(
                name, callbacks=[callback], unit=unit, description=metric.description
            )
        else:
            self._meter.create_observable_gauge(
                name, callbacks=[callback], unit=unit, description=metric.description
            )

    def _samples(self, registry: MetricsRegistry) -> list[MetricSample]:
        """The registry's samples, computed once per collection (instruments share them)."""
        now = registry.clock()
        cached = self._cache.get(id(registry))
        if cached is not None and now - cached[0] < _CACHE_MS:
            return cached[1]
        samples = registry.samples(now)
        self._cache[id(registry)] = (now, samples)
        return samples

    def _callback(self, kind: str, name: str) -> Any:
        from opentelemetry.metrics import Observation

        def observe(options: CallbackOptions) -> Iterable[Observation]:
            out: list[Observation] = []
            for registry in self._registries:
                if registry.client_kind != kind:
                    continue
                for sample in self._samples(registry):
                    if sample.metric.name == name:
                        attributes = {"client.id": registry.client_id, **dict(sample.tags)}
                        out.append(Observation(sample.value, attributes))
            return out

        return observe
