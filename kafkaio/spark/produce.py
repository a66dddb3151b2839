"""Writing a Spark task's rows: Arrow batches -> records of one kafkaio Producer per task.

The producer runs on an anyio event loop in a helper thread (a blocking portal); every
record is acknowledged (or its error raised) before the task reports success.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
from anyio.from_thread import start_blocking_portal

from kafkaio.errors import KafkaConfigError
from kafkaio.producer import DeliveryFuture, Producer
from kafkaio.spark.settings import ClientSettings

# (topic, partition, key, value, headers)
Row = tuple[
    str, "int | None", "bytes | None", "bytes | None", "list[tuple[str, bytes | None]] | None"
]

SINK_COLUMNS = ("key", "value", "topic", "partition", "headers")


def write_batches(
    settings: ClientSettings, default_topic: str | None, batches: Iterable[pa.RecordBatch]
) -> int:
    """Produce every row of `batches`; returns how many records the brokers acknowledged."""
    options: dict[str, Any] = {"client_id": "kafkaio-spark", **settings.producer_options()}
    with start_blocking_portal() as portal:
        producer = portal.call(_make_producer, settings.bootstrap_servers, options)
        with portal.wrap_async_context_manager(producer):
            sink = _Sink(producer)
            for batch in batches:
                if batch.num_rows:
                    portal.call(sink.send, list(rows_of(batch, default_topic)))
            portal.call(sink.finish)
            return sink.acked


def _make_producer(bootstrap: str, options: dict[str, Any]) -> Producer:
    return Producer(bootstrap, **options)


def rows_of(batch: pa.RecordBatch, default_topic: str | None) -> Iterator[Row]:
    """(topic, partition, key, value, headers) per row; the `topic` option wins over a
    topic column, as in Spark's Kafka sink."""
    names = batch.schema.names
    n = batch.num_rows

    def column(name: str) -> list[Any]:
        return batch.column(names.index(name)).to_pylist() if name in names else [None] * n

    values = column("value")
    keys = column("key")
    topics = [default_topic] * n if default_topic else column("topic")
    partitions = column("partition")
    headers = column("headers")
    for i in range(n):
        topic = topics[i]
        if not topic:
            raise KafkaConfigError(
                "a row has no topic: set the `topic` option or write a non-null `topic` column"
            )
        row_headers = headers[i]
        yield (
            topic,
            partitions[i],
            _to_bytes(keys[i]),
            _to_bytes(values[i]),
            None if not row_headers else [(h["key"], h["value"]) for h in row_headers],
        )


def _to_bytes(data: Any) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode()
    return bytes(data)


class _Sink:
    """Enqueues rows and checks their delivery (called through the portal)."""

    def __init__(self, producer: Producer) -> None:
        self._producer = producer
        self._pending: list[DeliveryFuture] = []
        self.acked = 0

    async def send(self, rows: list[Row]) -> None:
        enqueue = self._producer.enqueue
        for topic, partition, key, value, headers in rows:
            self._pending.append(await enqueue(topic, value, key, partition, headers))
        self._check(done_only=True)

    async def finish(self) -> None:
        await self._producer.flush()
        self._check(done_only=False)

    def _check(self, *, done_only: bool) -> None:
        """Raise the first delivery error; forget acknowledged futures."""
        waiting = []
        for future in self._pending:
            if done_only and not future.done():
                waiting.append(future)
                continue
            error = future.exception()
            if error is not None:
                raise error
            self.acked += 1
        self._pending = waiting
