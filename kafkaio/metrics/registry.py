"""MetricsRegistry: a client's sensors and gauges under the Java client's metric names.

``snapshot()`` is the plain dict behind ``client.metrics()``; ``samples()`` feeds exporters.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkaio.metrics.sensor import Sensor, Stat

Clock = Callable[[], float]
Tags = tuple[tuple[str, str], ...]
"""A metric instance's tags, e.g. (("topic", "t"), ("partition", "0")); () for client-level."""

MetricsSnapshot = dict[str, Any]
"""``{name: value}`` for client-level metrics, and ``{scope: {label: {name: value}}}`` for
tagged ones: scope "partitions" (label "topic-partition"), "topics" or "nodes"."""

DEFAULT_WINDOW_MS = 30_000.0

# tag names -> the snapshot scope their metrics are listed under
_SCOPES = {("topic", "partition"): "partitions", ("topic",): "topics", ("node_id",): "nodes"}


def monotonic_ms() -> float:
    """The registry's default clock (the same monotonic clock as anyio's on asyncio)."""
    return time.monotonic() * 1000.0


@dataclass(frozen=True, slots=True)
class MetricName:
    """One metric family: its Java name, group and description, and the tags it carries."""

    name: str
    group: str
    description: str = ""
    tag_names: tuple[str, ...] = ()
    cumulative: bool = False


@dataclass(frozen=True, slots=True)
class MetricSample:
    """One metric instance's value at snapshot time (what exporters read)."""

    metric: MetricName
    tags: Tags
    value: float


GaugeFn = Callable[[float], float]
GaugeFamilyFn = Callable[[float], Mapping[tuple[str, ...], float]]


class SensorFamily:
    """Sensors of one kind, one per tag-value tuple (e.g. per partition), made on first use."""

    __slots__ = ("_registry", "_stats", "_tag_names", "_sensors")

    def __init__(
        self,
        registry: MetricsRegistry,
        stats: tuple[tuple[MetricName, Stat], ...],
        tag_names: tuple[str, ...],
    ) -> None:
        self._registry = registry
        self._stats = stats
        self._tag_names = tag_names
        self._sensors: dict[tuple[str, ...], Sensor] = {}

    def get(self, *values: str) -> Sensor:
        sensor = self._sensors.get(values)
        if sensor is None:
            sensor = self._sensors[values] = self._registry._new_sensor(
                self._stats, tuple(zip(self._tag_names, values, strict=True))
            )
        return sensor

    def remove(self, *values: str) -> None:
        """Forget one instance (e.g. a revoked partition)."""
        sensor = self._sensors.pop(values, None)
        if sensor is not None:
            self._registry._drop_sensor(sensor)


class MetricsRegistry:
    """A client's metrics. Single event loop: no locks; recording never reads the clock.

    ``sensor(...)`` declares a sensor and the metrics read from it (Java names, e.g.
    ``{"fetch-latency-avg": Stat.AVG, "fetch-latency-max": Stat.MAX}``); ``gauge(...)``
    a value computed when read (e.g. assigned-partitions); ``gauge_family(...)`` tagged
    values computed when read (e.g. records-lag per partition).
    """

    enabled = True

    def __init__(
        self,
        client_id: str,
        client_kind: str,
        *,
        window_ms: float = DEFAULT_WINDOW_MS,
        clock: Clock = monotonic_ms,
    ) -> None:
        self.client_id = client_id
        self.client_kind = client_kind  # "producer", "consumer", "share-consumer"
        self.window_ms = window_ms
        self.clock = clock
        self._names: dict[str, MetricName] = {}
        # (sensor, ((metric, stat), ...), tags) in declaration order
        self._sensors: list[tuple[Sensor, tuple[tuple[MetricName, Stat], ...], Tags]] = []
        self._gauges: list[tuple[MetricName, GaugeFn]] = []
        self._families: list[tuple[MetricName, GaugeFamilyFn]] = []

    # -- declaring ----------------------------------------------------------------------

    def sensor(
        self,
        group: str,
        stats: Mapping[str, Stat],
        *,
        tags: Mapping[str, str] | None = None,
        description: str = "",
    ) -> Sensor:
        """A sensor whose recordings are read as the metrics named in ``stats``."""
        tag_items: Tags = tuple((tags or {}).items())
        declared = self._declare_stats(group, stats, tuple(k for k, _ in tag_items), description)
        return self._new_sensor(declared, tag_items)

    def sensor_family(
        self,
        group: str,
        stats: Mapping[str, Stat],
        tag_names: tuple[str, ...],
        *,
        description: str = "",
    ) -> SensorFamily:
        """Sensors per tag values (``family.get("topic", "0")``), declared once."""
        declared = self._declare_stats(group, stats, tag_names, description)
        return SensorFamily(self, declared, tag_names)

    def gauge(self, name: str, group: str, fn: GaugeFn, *, description: str = "") -> None:
        """A client-level value computed by ``fn(now_ms)`` when read."""
        self._gauges.append((self._declare(name, group, description, (), False), fn))

    def gauge_family(
        self,
        name: str,
        group: str,
        tag_names: tuple[str, ...],
        fn: GaugeFamilyFn,
        *,
        description: str = "",
    ) -> None:
        """Tagged values: ``fn(now_ms)`` returns ``{tag_values: value}`` when read."""
        self._families.append((self._declare(name, group, description, tag_names, False), fn))

    def _declare_stats(
        self,
        group: str,
        stats: Mapping[str, Stat],
        tag_names: tuple[str, ...],
        description: str,
    ) -> tuple[tuple[MetricName, Stat], ...]:
        return tuple(
            (self._declare(name, group, description, tag_names, stat.cumulative), stat)
            for name, stat in stats.items()
        )

    def _declare(
        self, name: str, group: str, description: str, tag_names: tuple[str, ...], cumulative: bool
    ) -> MetricName:
        key = name if not tag_names else f"{_scope(tag_names)}/{name}"
        metric = self._names.get(key)
        if metric is None:
            metric = self._names[key] = MetricName(name, group, description, tag_names, cumulative)
        return metric

    def _new_sensor(self, stats: tuple[tuple[MetricName, Stat], ...], tags: Tags) -> Sensor:
        sensor = Sensor(self.window_ms, self.clock())
        self._sensors.append((sensor, stats, tags))
        return sensor

    def _drop_sensor(self, sensor: Sensor) -> None:
        self._sensors = [entry for entry in self._sensors if entry[0] is not sensor]

    # -- reading ------------------------------------------------------------------------

    @property
    def metric_names(self) -> list[MetricName]:
        """Every declared metric family (instances may appear later, e.g. per partition)."""
        return list(self._names.values())

    def samples(self, now: float | None = None) -> list[MetricSample]:
        """Every metric instance's current value."""
        now = self.clock() if now is None else now
        out: list[MetricSample] = []
        for sensor, stats, tags in self._sensors:
            for metric, stat in stats:
                out.append(MetricSample(metric, tags, sensor.read(stat, now)))
        for metric, fn in self._gauges:
            out.append(MetricSample(metric, (), float(fn(now))))
        for metric, family in self._families:
            for values, value in family(now).items():
                out.append(
                    MetricSample(metric, tuple(zip(metric.tag_names, values, strict=True)), value)
                )
        return out

    def snapshot(self, now: float | None = None) -> MetricsSnapshot:
        """A plain dict: ``{"records-consumed-total": 10.0, ..., "partitions": {"t-0":
        {"records-lag": 5.0, ...}}}`` (see MetricsSnapshot)."""
        return snapshot_of(self.samples(now))


class NullRegistry(MetricsRegistry):
    """The registry of a client made with ``metrics_enabled=False``: declares nothing,
    reads empty; its sensors are shared throwaway objects."""

    enabled = False

    def __init__(self, client_id: str = "", client_kind: str = "") -> None:
        super().__init__(client_id, client_kind)
        self._null = Sensor(self.window_ms, 0.0)

    def sensor(
        self,
        group: str,
        stats: Mapping[str, Stat],
        *,
        tags: Mapping[str, str] | None = None,
        description: str = "",
    ) -> Sensor:
        return self._null

    def _new_sensor(self, stats: tuple[tuple[MetricName, Stat], ...], tags: Tags) -> Sensor:
        return self._null

    def _drop_sensor(self, sensor: Sensor) -> None:
        pass

    def gauge(self, name: str, group: str, fn: GaugeFn, *, description: str = "") -> None:
        pass

    def gauge_family(
        self,
        name: str,
        group: str,
        tag_names: tuple[str, ...],
        fn: GaugeFamilyFn,
        *,
        description: str = "",
    ) -> None:
        pass

    def _declare(
        self, name: str, group: str, description: str, tag_names: tuple[str, ...], cumulative: bool
    ) -> MetricName:
        return MetricName(name, group, description, tag_names, cumulative)

    def samples(self, now: float | None = None) -> list[MetricSample]:
        return []


def snapshot_of(samples: Iterable[MetricSample]) -> MetricsSnapshot:
    """Group samples into the plain-dict shape of ``client.metrics()``."""
    out: MetricsSnapshot = {}
    for sample in samples:
        metric = sample.metric
        if not sample.tags:
            out[metric.name] = sample.value
            continue
        label = "-".join(value for _, value in sample.tags)
        scope = out.setdefault(_scope(metric.tag_names), {})
        scope.setdefault(label, {})[metric.name] = sample.value
    return out


def _scope(tag_names: tuple[str, ...]) -> str:
    return _SCOPES.get(tag_names) or "-".join(tag_names)
