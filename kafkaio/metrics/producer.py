"""The producer's sensors under the Java client's names (producer-metrics and the per-topic
producer-topic-metrics); recorded per batch and per request, never per record."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from kafkaio.metrics.registry import MetricsRegistry
from kafkaio.metrics.sensor import Sensor, Stat, latency_stats

PRODUCER_GROUP = "producer-metrics"
TOPIC_GROUP = "producer-topic-metrics"


class ProducerMetrics:
    """Sensors a producer records into (``sensor.record(value, now_ms)``)."""

    __slots__ = (
        "registry",
        "record_send",
        "record_error",
        "record_retry",
        "batch_size",
        "compression_rate",
        "records_per_request",
        "request_latency",
        "topic_send",
        "topic_error",
    )

    def __init__(self, registry: MetricsRegistry) -> None:
        self.registry = r = registry
        self.record_send = r.sensor(
            PRODUCER_GROUP,
            {"record-send-rate": Stat.RATE, "record-send-total": Stat.TOTAL},
            description="records acknowledged by the brokers",
        )
        self.record_error = r.sensor(
            PRODUCER_GROUP,
            {"record-error-rate": Stat.RATE, "record-error-total": Stat.TOTAL},
            description="records that failed for good",
        )
        self.record_retry = r.sensor(
            PRODUCER_GROUP,
            {"record-retry-rate": Stat.RATE, "record-retry-total": Stat.TOTAL},
            description="records sent again after a retriable error",
        )
        self.batch_size = r.sensor(
            PRODUCER_GROUP,
            {"batch-size-avg": Stat.AVG, "batch-size-max": Stat.MAX},
            description="encoded bytes per batch sent",
        )
        self.compression_rate = r.sensor(
            PRODUCER_GROUP,
            {"compression-rate-avg": Stat.AVG},
            description="encoded size / uncompressed size per batch sent",
        )
        self.records_per_request = r.sensor(
            PRODUCER_GROUP,
            {"records-per-request-avg": Stat.AVG},
            description="records per Produce request",
        )
        self.request_latency = r.sensor(
            PRODUCER_GROUP,
            latency_stats("request"),
            description="Produce request round trips (ms)",
        )
        self.topic_send = r.sensor_family(
            TOPIC_GROUP,
            {"record-send-rate": Stat.RATE, "record-send-total": Stat.TOTAL},
            ("topic",),
        )
        self.topic_error = r.sensor_family(
            TOPIC_GROUP,
            {"record-error-rate": Stat.RATE, "record-error-total": Stat.TOTAL},
            ("topic",),
        )

    def bind_gauges(
        self,
        *,
        buffer_total: Callable[[float], float],
        buffer_available: Callable[[float], float],
        waiting: Callable[[float], float],
    ) -> None:
        r = self.registry
        r.gauge("buffer-total-bytes", PRODUCER_GROUP, buffer_total)
        r.gauge("buffer-available-bytes", PRODUCER_GROUP, buffer_available)
        r.gauge(
            "waiting-threads",
            PRODUCER_GROUP,
            waiting,
            description="tasks blocked waiting for buffer memory",
        )


class _Batch(Protocol):
    """What the recorder reads of a ProducerBatch."""

    @property
    def record_count(self) -> int: ...

    attempts: int
    error: BaseException | None

    @property
    def tp(self) -> tuple[str, int]: ...


class ProducerRecorder:
    """Per-batch and per-request recording for the Sender (never per record).

    ``request_sent(batches, now)`` when a ProduceRequest is built (batch sizes, compression,
    records per request, retries); ``batch_done(batch, now)`` when a batch is delivered or
    fails for good (record-send / record-error, per producer and per topic).
    """

    __slots__ = ("m", "_topics")

    def __init__(self, metrics: ProducerMetrics) -> None:
        self.m = metrics
        self._topics: dict[str, tuple[Sensor, Sensor]] = {}

    def request_sent(self, batches: Iterable[tuple[_Batch, int, int]], now: float) -> None:
        """``batches``: (batch, encoded bytes, uncompressed bytes) of one request."""
        m = self.m
        records = 0
        for batch, encoded, uncompressed in batches:
            count = batch.record_count
            records += count
            m.batch_size.record(encoded, now)
            if uncompressed > 0:
                m.compression_rate.record(encoded / uncompressed, now)
            if batch.attempts > 0:
                m.record_retry.record(count, now)
        m.records_per_request.record(records, now)

    def batch_done(self, batch: _Batch, now: float) -> None:
        count = batch.record_count
        topic = batch.tp[0]
        sensors = self._topics.get(topic)
        if sensors is None:
            sensors = self._topics[topic] = (
                self.m.topic_send.get(topic),
                self.m.topic_error.get(topic),
            )
        if batch.error is None:
            self.m.record_send.record(count, now)
            sensors[0].record(count, now)
        else:
            self.m.record_error.record(count, now)
            sensors[1].record(count, now)
