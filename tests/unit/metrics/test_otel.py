"""OpenTelemetry: registry metrics read through an in-memory metric reader; W3C trace context
through record headers, from a producer interceptor span to a consumer process span."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind  # noqa: E402

from kafkaio.consumer.record import ConsumerRecord  # noqa: E402
from kafkaio.metrics import MetricsRegistry, Stat  # noqa: E402
from kafkaio.metrics.otel import KafkaMetricsExporter  # noqa: E402
from kafkaio.metrics.tracing import (  # noqa: E402
    TracingInterceptor,
    extract_context,
    inject_headers,
    process_span,
    traced,
)
from kafkaio.producer.client import ProducerRecord  # noqa: E402


def _points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    out: dict[str, list[Any]] = {}
    assert data is not None
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                out[metric.name] = list(metric.data.data_points)
    return out


def test_registry_metrics_become_observable_instruments() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    registry = MetricsRegistry("app-1", "consumer", clock=lambda: 10.0)
    sensor = registry.sensor(
        "g", {"records-consumed-total": Stat.TOTAL, "fetch-latency-max": Stat.MAX}
    )
    lag = registry.sensor_family("g", {"records-lag-max": Stat.MAX}, ("topic", "partition"))
    registry.gauge("assigned-partitions", "g", lambda now: 3.0)
    exporter = KafkaMetricsExporter(provider)
    exporter.register(registry)
    sensor.record(7.0, 1.0)
    sensor.record(2.0, 2.0)
    lag.get("orders", "1").record(12.0, 2.0)
    points = _points(reader)
    total = points["kafka.consumer.records-consumed-total"]
    assert [(p.value, dict(p.attributes)) for p in total] == [(9.0, {"client.id": "app-1"})]
    assert points["kafka.consumer.fetch-latency-max"][0].value == 7.0
    assert points["kafka.consumer.assigned-partitions"][0].value == 3.0
    (lag_point,) = points["kafka.consumer.records-lag-max"]
    assert dict(lag_point.attributes) == {"client.id": "app-1", "topic": "orders", "partition": "1"}
    assert lag_point.value == 12.0
    provider.shutdown()


def test_register_refuses_a_disabled_registry() -> None:
    from kafkaio.errors import KafkaConfigError
    from kafkaio.metrics import NullRegistry

    with pytest.raises(KafkaConfigError, match="metrics_enabled=False"):
        KafkaMetricsExporter(MeterProvider()).register(NullRegistry("c", "consumer"))


def _tracing() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _record(headers: Any) -> ConsumerRecord[Any, Any]:
    return ConsumerRecord("orders", 2, 41, 0, 0, None, b"v", headers, None, -1, 1)


async def test_trace_context_travels_from_producer_span_to_consumer_span() -> None:
    provider, spans = _tracing()
    interceptor = TracingInterceptor(provider)
    record = ProducerRecord("orders", b"v", headers=[("app", b"1"), ("traceparent", b"stale")])
    sent = interceptor.on_send(record)
    headers = list(sent.headers or ())
    assert [n for n, _ in headers] == ["app", "traceparent"]
    (send_span,) = spans.get_finished_spans()
    assert send_span.kind is SpanKind.PRODUCER and send_span.name == "send orders"
    traceparent = dict(headers)["traceparent"]
    assert traceparent is not None
    version, trace_id, span_id, flags = traceparent.decode().split("-")
    assert version == "00" and int(flags, 16) & 1  # sampled
    assert int(trace_id, 16) == send_span.context.trace_id
    assert int(span_id, 16) == send_span.context.span_id

    seen: list[int] = []

    async def handler(rec: ConsumerRecord[Any, Any]) -> None:
        seen.append(rec.offset)

    await traced(handler, tracer_provider=provider, group_id="g")(_record(headers))
    assert seen == [41]
    process = spans.get_finished_spans()[-1]
    assert process.kind is SpanKind.CONSUMER and process.name == "process orders"
    assert process.context.trace_id == send_span.context.trace_id
    assert process.parent is not None and process.parent.span_id == send_span.context.span_id
    attrs = dict(process.attributes or {})
    assert attrs["messaging.kafka.offset"] == 41
    assert attrs["messaging.consumer.group.name"] == "g"
    assert attrs["messaging.destination.partition.id"] == "2"


def test_a_record_without_trace_headers_starts_a_new_trace() -> None:
    provider, spans = _tracing()
    with process_span(_record(()), tracer_provider=provider) as span:
        assert span.get_span_context().is_valid
    (finished,) = spans.get_finished_spans()
    assert finished.parent is None


def test_inject_and_extract_round_trip_and_ignore_garbage() -> None:
    provider, _ = _tracing()
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("outer") as outer:
        headers = inject_headers({"k": b"v"})
    from opentelemetry import trace

    ctx = trace.get_current_span(extract_context(headers)).get_span_context()
    assert ctx.trace_id == outer.get_span_context().trace_id
    bad = trace.get_current_span(extract_context([("traceparent", b"\xff\xfe")]))
    assert not bad.get_span_context().is_valid


def test_error_in_traced_handler_is_recorded_and_raised() -> None:
    import anyio

    provider, spans = _tracing()

    def handler(rec: ConsumerRecord[Any, Any]) -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        anyio.run(traced(handler, tracer_provider=provider), _record(()))
    (span,) = spans.get_finished_spans()
    assert not span.status.is_ok
    assert span.events and span.events[0].name == "exception"


def test_the_tracing_interceptor_opens_a_receive_span_per_consumed_record() -> None:
    provider, spans = _tracing()
    interceptor = TracingInterceptor(provider, group_id="g")
    sent = interceptor.on_send(ProducerRecord("orders", b"v"))
    (send_span,) = spans.get_finished_spans()
    record = _record(list(sent.headers or ()))
    assert interceptor.on_consume({("orders", 2): [record, _record(())]}) is None  # unchanged
    receive, fresh = spans.get_finished_spans()[1:]
    assert receive.kind is SpanKind.CONSUMER and receive.name == "receive orders"
    assert receive.context.trace_id == send_span.context.trace_id
    assert receive.parent is not None and receive.parent.span_id == send_span.context.span_id
    assert dict(receive.attributes or {})["messaging.consumer.group.name"] == "g"
    assert fresh.context.trace_id != send_span.context.trace_id  # no header: a new trace
