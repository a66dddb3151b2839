"""ProducerRecorder: per-request and per-batch recording into the producer's Java names."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kafkaio.metrics import MetricsRegistry
from kafkaio.metrics.producer import ProducerMetrics, ProducerRecorder


@dataclass
class Batch:
    tp: tuple[str, int]
    record_count: int
    attempts: int = 0
    error: BaseException | None = None


def test_sends_errors_retries_sizes_and_per_topic_counts() -> None:
    registry = MetricsRegistry("p", "producer", clock=lambda: 10.0)
    recorder = ProducerRecorder(ProducerMetrics(registry))
    a, b = Batch(("t", 0), 10), Batch(("u", 1), 4, attempts=1)
    recorder.request_sent([(a, 500, 1000), (b, 300, 300)], 1.0)
    recorder.batch_done(a, 2.0)
    b.error = RuntimeError("failed for good")
    recorder.batch_done(b, 3.0)
    snap = registry.snapshot()
    assert snap["record-send-total"] == 10
    assert snap["record-error-total"] == 4
    assert snap["record-retry-total"] == 4
    assert snap["batch-size-avg"] == 400 and snap["batch-size-max"] == 500
    assert snap["compression-rate-avg"] == pytest.approx(0.75)
    assert snap["records-per-request-avg"] == 14
    assert snap["topics"]["t"]["record-send-total"] == 10
    assert snap["topics"]["u"]["record-error-total"] == 4
    assert snap["topics"]["u"]["record-send-total"] == 0
