"""Opt-in OpenTelemetry tracing (extra ``otel``): a span per produced record whose W3C trace
context travels in the record's headers, and spans per consumed record that continue it.

Producer: ``Producer(..., interceptors=[TracingInterceptor()])`` (a ``send`` span per record).
Consumer: ``Consumer(..., interceptors=[TracingInterceptor()])`` (a ``receive`` span per record
a poll returns), and ``with process_span(record): ...`` or ``ConsumerRunner(consumer,
traced(handler))`` around handling it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from kafkaio.errors import KafkaConfigError

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from kafkaio.consumer.record import ConsumerRecord
    from kafkaio.producer.client import ProducerRecord

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
_TRACE_HEADERS = (TRACEPARENT, TRACESTATE)
INSTRUMENTATION_NAME = "kafkaio"

Headers = Sequence[tuple[str, "bytes | None"]] | Mapping[str, "bytes | None"] | None


def _tracer(provider: TracerProvider | None) -> Tracer:
    try:
        from opentelemetry import trace
    except ImportError:  # pragma: no cover - depends on the environment
        raise KafkaConfigError(
            "OpenTelemetry is not installed: pip install 'kafkaio[otel]'"
        ) from None
    return trace.get_tracer(INSTRUMENTATION_NAME, tracer_provider=provider)


def _propagator() -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


def inject_headers(
    headers: Headers, context: Context | None = None
) -> list[tuple[str, bytes | None]]:
    """``headers`` (any accepted form) with ``traceparent``/``tracestate`` of ``context``
    (default: the current one) replacing any such headers already there."""
    carrier: dict[str, str] = {}
    _propagator().inject(carrier, context=context)
    items = headers.items() if isinstance(headers, Mapping) else (headers or ())
    out = [(name, value) for name, value in items if name not in _TRACE_HEADERS]
    out += [(name, carrier[name].encode()) for name in _TRACE_HEADERS if name in carrier]
    return out


def extract_context(headers: Sequence[tuple[str, bytes | None]]) -> Context:
    """The trace context a producer put in ``headers`` (an empty context if none)."""
    carrier: dict[str, str] = {}
    for name, value in headers:
        if name in _TRACE_HEADERS and value is not None:
            try:
                carrier[name] = value.decode("ascii")
            except UnicodeDecodeError:
                continue  # not a W3C header: ignore it
    result: Context = _propagator().extract(carrier)
    return result


def _messaging_attributes(
    topic: str, partition: int | None, operation: str
) -> dict[str, str | int]:
    attributes: dict[str, str | int] = {
        "messaging.system": "kafka",
        "messaging.operation.name": operation,
        "messaging.operation.type": operation,
        "messaging.destination.name": topic,
    }
    if partition is not None:
        attributes["messaging.destination.partition.id"] = str(partition)
    return attributes


class TracingInterceptor:
    """An interceptor for both clients.

    Producer (``on_send``): each record gets a ``send <topic>`` span (kind PRODUCER, a child
    of the current span) and its W3C ``traceparent`` header. The span covers handing the
    record to the producer (it ends in ``on_send``; delivery is asynchronous and reported by
    the record's future). Records with it leave the producer's plain-bytes fast path, so
    enable it only where tracing is wanted.

    Consumer (``on_consume``): each record a poll returns gets a ``receive <topic>`` span
    (kind CONSUMER) continuing the producer's trace from its ``traceparent`` header (a new
    trace without one), ended at once; ``process_span`` / ``traced`` cover the handling.
    """

    def __init__(
        self, tracer_provider: TracerProvider | None = None, *, group_id: str | None = None
    ) -> None:
        self._tracer = _tracer(tracer_provider)
        self._group_id = group_id

    def on_consume(
        self, records: Mapping[Any, Sequence[ConsumerRecord[Any, Any]]]
    ) -> None:
        from opentelemetry.trace import SpanKind

        for batch in records.values():
            for record in batch:
                attributes = _messaging_attributes(record.topic, record.partition, "receive")
                attributes["messaging.kafka.offset"] = record.offset
                if self._group_id is not None:
                    attributes["messaging.consumer.group.name"] = self._group_id
                self._tracer.start_span(
                    f"receive {record.topic}",
                    context=extract_context(record.headers),
                    kind=SpanKind.CONSUMER,
                    attributes=attributes,
                ).end()

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        from opentelemetry.trace import SpanKind, set_span_in_context

        span = self._tracer.start_span(
            f"send {record.topic}",
            kind=SpanKind.PRODUCER,
            attributes=_messaging_attributes(record.topic, record.partition, "send"),
        )
        try:
            record.headers = inject_headers(record.headers, set_span_in_context(span))
        finally:
            span.end()
        return record


@contextmanager
def process_span(
    record: ConsumerRecord[Any, Any],
    *,
    tracer_provider: TracerProvider | None = None,
    group_id: str | None = None,
) -> Iterator[Span]:
    """A ``process <topic>`` span (kind CONSUMER) around handling ``record``, continuing
    the producer's trace from its ``traceparent`` header (a new trace without one)."""
    from opentelemetry.trace import SpanKind

    attributes = _messaging_attributes(record.topic, record.partition, "process")
    attributes["messaging.kafka.offset"] = record.offset
    if group_id is not None:
        attributes["messaging.consumer.group.name"] = group_id
    tracer = _tracer(tracer_provider)
    with tracer.start_as_current_span(
        f"process {record.topic}",
        context=extract_context(record.headers),
        kind=SpanKind.CONSUMER,
        attributes=attributes,
    ) as span:
        yield span


Handler = Callable[["ConsumerRecord[Any, Any]"], "Awaitable[object] | object"]


def traced(
    handler: Handler,
    *,
    tracer_provider: TracerProvider | None = None,
    group_id: str | None = None,
) -> Callable[[ConsumerRecord[Any, Any]], Awaitable[object]]:
    """``handler`` (sync or async) run inside ``process_span(record)``, e.g. for
    ``ConsumerRunner(consumer, traced(handler))``. An error is recorded on the span."""

    @functools.wraps(handler)
    async def run(record: ConsumerRecord[Any, Any]) -> object:
        with process_span(record, tracer_provider=tracer_provider, group_id=group_id):
            result = handler(record)
            if inspect.isawaitable(result):
                result = await result
            return result

    return run
