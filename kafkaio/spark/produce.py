"""Writing a Spark task's rows: Arrow batches -> records of one kafkaio Producer per task.

The producer runs on the process's event loop thread and is borrowed from its pool
(kafkaio.spark.pool); every record is acknowledged (or its error raised) before the task
reports success. Columns are
turned into Python lists once per Arrow batch (strings cast to binary by Arrow), and the
common shape (one topic, no partition or headers column) maps ``Producer.produce`` over
them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice, repeat, takewhile
from typing import Any

import anyio.lowlevel
import pyarrow as pa
import pyarrow.compute as pc

from kafkaio.errors import KafkaConfigError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.producer import DeliveryFuture, Producer, WouldBlockError
from kafkaio.spark import pool
from kafkaio.spark.settings import ClientSettings
from kafkaio.structs import OffsetAndMetadata

log = logging.getLogger("kafkaio.spark")

# (topic, partition, key, value, headers)
Row = tuple[
    str, "int | None", "bytes | None", "bytes | None", "list[tuple[str, bytes | None]] | None"
]

SINK_COLUMNS = ("key", "value", "topic", "partition", "headers")
# The sink's producer defaults where the kafka.* options leave them unset: batches of 64 KiB
# (Kafka's 16 KiB holds 15 records of 1 KiB, and a batch costs Python far more than Java).
SINK_DEFAULTS: dict[str, Any] = {"batch_size": 65536}
# Exactly-once: a task's transaction may last as long as its writing (Kafka's default 60 s
# would abort a large micro-batch's); the brokers' transaction.max.timeout.ms is 15 min.
TRANSACTION_DEFAULTS: dict[str, Any] = {"transaction_timeout_ms": 900_000}
_MARKER = "kafkaio-spark batch {}"
# records produce()d between the sink's awaits (the network task sends what filled up)
_TURN = 1024


@dataclass(slots=True)
class Columns:
    """One Arrow batch's rows as Python lists: keys and values as bytes (or None); `topic`
    set when every row goes to it, else `topics` per row; `partitions`/`headers` only when
    the batch has those columns."""

    keys: list[bytes | None]
    values: list[bytes | None]
    topic: str | None
    topics: list[str | None] | None
    partitions: list[int | None] | None
    headers: list[Any] | None

    def rows(self) -> Iterator[Row]:
        """(topic, partition, key, value, headers) per row (the general path)."""
        n = len(self.values)
        topics = self.topics if self.topics is not None else [self.topic] * n
        partitions = self.partitions if self.partitions is not None else [None] * n
        headers = self.headers if self.headers is not None else [None] * n
        for i in range(n):
            topic = topics[i]
            if not topic:
                raise KafkaConfigError(
                    "a row has no topic: set the `topic` option or write a non-null `topic` "
                    "column"
                )
            row_headers = headers[i]
            yield (
                topic,
                partitions[i],
                self.keys[i],
                self.values[i],
                None if not row_headers else [(h["key"], h["value"]) for h in row_headers],
            )


def write_batches(
    settings: ClientSettings, default_topic: str | None, batches: Iterable[pa.RecordBatch]
) -> int:
    """Produce every row of `batches`; returns how many records the brokers acknowledged."""
    portal = pool.runtime().portal
    with portal.wrap_async_context_manager(
        pool.producer(settings, _defaults(settings, SINK_DEFAULTS))
    ) as producer:
        sink = _Sink(producer)
        for batch in batches:
            if batch.num_rows:
                portal.call(sink.send, columns_of(batch, default_topic))
        portal.call(sink.finish)
        return sink.acked


def _defaults(settings: ClientSettings, defaults: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in defaults.items() if k not in settings.options}


def write_batches_exactly_once(
    settings: ClientSettings,
    default_topic: str | None,
    batches: Iterable[pa.RecordBatch],
    *,
    transactional_id: str,
    batch_id: int,
) -> int:
    """Produce every row of `batches` in one transaction of `transactional_id` (one per
    Spark task partition of the query), committed together with a marker: the group
    `transactional_id`'s offset batch_id + 1. A task that finds the marker at or past
    its batch (a micro-batch run again after a failure or a restart) writes nothing. A
    new producer fences any older one of the same id (a zombie task attempt) and aborts
    the transaction it left open. Returns the records written (0 when skipped)."""
    options: dict[str, Any] = {
        "client_id": "kafkaio-spark",
        **_defaults(settings, SINK_DEFAULTS | TRANSACTION_DEFAULTS),
        **settings.producer_options(),
        "transactional_id": transactional_id,
    }
    portal = pool.runtime().portal
    producer = portal.call(_make_producer, settings.bootstrap_servers, options)
    with portal.wrap_async_context_manager(producer):  # start() runs init_transactions
        done = portal.call(_last_batch, settings, transactional_id)
        if done >= batch_id:
            skipped = sum(b.num_rows for b in batches)
            log.info(
                "micro-batch %d: %s committed its %d rows before (batch %d); not written "
                "again",
                batch_id,
                transactional_id,
                skipped,
                done,
            )
            return 0
        sink = _Sink(producer)
        portal.call(producer.begin_transaction)
        marker: TopicPartition | None = None
        for batch in batches:
            if batch.num_rows:
                columns = columns_of(batch, default_topic)
                portal.call(sink.send, columns)
                if marker is None:
                    first = columns.topic or next(t for t in columns.topics or () if t)
                    marker = TopicPartition(first, 0)
        if marker is None:
            portal.call(producer.abort_transaction)  # nothing to write, nothing to mark
            return 0
        portal.call(sink.commit, marker, transactional_id, batch_id)
        return sink.acked


def _make_producer(bootstrap: str, options: dict[str, Any]) -> Producer:
    return Producer(bootstrap, **options)


async def _last_batch(settings: ClientSettings, group: str) -> int:
    """The last micro-batch a transactional id committed (-1: none), from its marker."""
    async with pool.admin(settings) as admin:
        offsets = await admin.list_group_offsets(group, require_stable=True)
    found = [c.offset for c in offsets.values() if c.offset is not None and c.error is None]
    return max(found, default=0) - 1


def columns_of(batch: pa.RecordBatch, default_topic: str | None) -> Columns:
    """The batch's sink columns as lists; the `topic` option wins over a topic column, as in
    Spark's Kafka sink."""
    names = batch.schema.names

    def column(name: str) -> pa.Array | None:
        return batch.column(names.index(name)) if name in names else None

    def as_bytes(name: str) -> list[bytes | None]:
        data = column(name)
        if data is None:
            return [None] * batch.num_rows
        if pa.types.is_string(data.type) or pa.types.is_large_string(data.type):
            data = pc.cast(data, pa.binary() if pa.types.is_string(data.type) else pa.large_binary())
        return data.to_pylist()  # type: ignore[no-any-return]

    topics = None if default_topic else column("topic")
    partitions = column("partition")
    headers = column("headers")
    topic_list: list[str | None] | None = None
    if topics is not None:
        topic_list = topics.to_pylist()
        distinct = set(topic_list)
        if len(distinct) == 1 and None not in distinct and "" not in distinct:
            default_topic, topic_list = topic_list[0], None
    if default_topic is None and topic_list is None:
        raise KafkaConfigError(
            "a row has no topic: set the `topic` option or write a non-null `topic` column"
        )
    return Columns(
        keys=as_bytes("key"),
        values=as_bytes("value"),
        topic=default_topic,
        topics=topic_list,
        partitions=None if partitions is None or partitions.null_count == len(partitions)
        else partitions.to_pylist(),
        headers=None if headers is None or headers.null_count == len(headers)
        else headers.to_pylist(),
    )


class _Sink:
    """Enqueues rows and checks their delivery (called through the portal)."""

    def __init__(self, producer: Producer) -> None:
        self._producer = producer
        self._pending: list[DeliveryFuture] = []
        self._checked = 0  # futures before this index in _pending were delivered
        self.acked = 0

    async def send(self, columns: Columns) -> None:
        """Buffer the batch's rows with ``produce()`` (no await per record); a record it
        cannot buffer now (WouldBlockError: buffer_memory full, partitions unknown) goes
        through ``await enqueue()``, which waits for room. The network task gets a turn
        every _TURN records."""
        producer = self._producer
        produce, enqueue = producer.produce, producer.enqueue
        pending = self._pending
        topic = columns.topic
        if topic is not None and columns.partitions is None and columns.headers is None:
            keys, values = columns.keys, columns.values
            n = len(values)
            for lo in range(0, n, _TURN):
                i, hi = lo, min(lo + _TURN, n)
                while i < hi:
                    before = len(pending)
                    try:  # map(): produce() is called per record without a Python loop
                        pending.extend(map(produce, repeat(topic), values[i:hi], keys[i:hi]))
                        i = hi
                    except WouldBlockError:
                        i += len(pending) - before  # the record produce() refused
                        pending.append(await enqueue(topic, values[i], keys[i]))
                        i += 1
                await anyio.lowlevel.checkpoint()
        else:
            for n, (row_topic, partition, key, value, headers) in enumerate(columns.rows()):
                try:
                    pending.append(produce(row_topic, value, key, partition, headers))
                except WouldBlockError:
                    pending.append(await enqueue(row_topic, value, key, partition, headers))
                if not n % _TURN:
                    await anyio.lowlevel.checkpoint()
        self._check(done_only=True)

    async def finish(self) -> None:
        await self._producer.flush()
        self._check(done_only=False)

    async def commit(self, marker: TopicPartition, group: str, batch_id: int) -> None:
        """Commit the transaction with the batch marker (the group's offset batch_id + 1)."""
        producer = self._producer
        offset = OffsetAndMetadata(batch_id + 1, _MARKER.format(batch_id))
        await producer.send_offsets_to_transaction({marker: offset}, group)
        await producer.commit_transaction()
        self._check(done_only=False)

    def _check(self, *, done_only: bool) -> None:
        """Raise the first delivery error; forget delivered futures. With `done_only`, stop
        at the first record not delivered yet (records are mostly delivered in order).
        The futures are walked by C iterators (takewhile, map): a Python loop over them
        cost as much as a tenth of the producer's work per record."""
        pending = self._pending
        start = self._checked
        end = len(pending)
        if done_only:
            end = start + len(list(takewhile(DeliveryFuture.done, islice(pending, start, end))))
        for error in filter(None, map(DeliveryFuture.exception, islice(pending, start, end))):
            raise error
        self.acked += end - start
        if end > len(pending) // 2 or not done_only:
            del pending[:end]
            end = 0
        self._checked = end
