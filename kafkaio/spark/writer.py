"""Spark writers of format("kafkaio"): batch (DataSourceArrowWriter) and streaming
(DataSourceStreamArrowWriter), one kafkaio Producer per task, at-least-once like Spark's sink.

Columns: value (string or binary, required), key, topic, partition, headers (optional).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from kafkaio.errors import KafkaConfigError
from kafkaio.spark.options import EXACTLY_ONCE, SinkOptions
from kafkaio.spark.produce import write_batches, write_batches_exactly_once
from kafkaio.spark.rows import HEADERS_TYPE

log = logging.getLogger("kafkaio.spark")

# compared with _nullable(column type): every nullability flag here must be set
_COLUMN_TYPES: dict[str, tuple[DataType, ...]] = {
    "key": (StringType(), BinaryType()),
    "value": (StringType(), BinaryType()),
    "topic": (StringType(),),
    "partition": (IntegerType(),),
    "headers": (HEADERS_TYPE,),
}


@dataclass
class KafkaioCommitMessage(WriterCommitMessage):
    """What one task wrote: the number of records the brokers acknowledged."""

    records: int


def _nullable(t: DataType) -> DataType:
    """`t` with every nullability flag set, so types compare ignoring nullability (Spark's
    sink compares with DataTypeUtils.sameType: array(struct(...)) columns are not null)."""
    if isinstance(t, ArrayType):
        return ArrayType(_nullable(t.elementType), containsNull=True)
    if isinstance(t, MapType):
        return MapType(_nullable(t.keyType), _nullable(t.valueType), valueContainsNull=True)
    if isinstance(t, StructType):
        return StructType([StructField(f.name, _nullable(f.dataType)) for f in t.fields])
    return t


def check_sink_schema(schema: StructType, topic: str | None) -> None:
    """Spark's Kafka sink rules: a value column, a topic (option or column), known types."""
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise KafkaConfigError(
            f"writing to Kafka needs a `value` column (string or binary); got columns "
            f"{', '.join(fields) or 'none'}"
        )
    if topic is None and "topic" not in fields:
        raise KafkaConfigError(
            "writing to Kafka needs a topic: set .option('topic', ...) or add a `topic` column"
        )
    for name, allowed in _COLUMN_TYPES.items():
        if name in fields and _nullable(fields[name]) not in allowed:
            want = " or ".join(t.simpleString() for t in allowed)
            raise KafkaConfigError(
                f"column `{name}` is {fields[name].simpleString()}; it must be {want}"
            )


class _SinkBase:
    def __init__(self, raw: Mapping[str, str], schema: StructType) -> None:
        self._raw = dict(raw)
        self._opts = SinkOptions.parse(self._raw)
        check_sink_schema(schema, self._opts.topic)

    def __getstate__(self) -> dict[str, Any]:
        return {"raw": self._raw}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._raw = state["raw"]
        self._opts = SinkOptions.parse(self._raw)

    def _write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaioCommitMessage:
        return KafkaioCommitMessage(write_batches(self._opts.client, self._opts.topic, iterator))


def _total(messages: list[WriterCommitMessage | None]) -> int:
    return sum(m.records for m in messages if isinstance(m, KafkaioCommitMessage))


class KafkaioBatchWriter(_SinkBase, DataSourceArrowWriter):
    """df.write.format("kafkaio"): every row becomes one record (append; "overwrite" appends
    too, as in Spark's Kafka sink)."""

    def __init__(self, raw: Mapping[str, str], schema: StructType) -> None:
        super().__init__(raw, schema)
        if self._opts.delivery_guarantee == EXACTLY_ONCE:
            raise KafkaConfigError(
                "deliveryGuarantee=exactly-once is for streaming writes (writeStream): each "
                "micro-batch's tasks commit transactions marked with the batch id; a batch "
                "write (df.write) has no batch id to resume by and is at-least-once"
            )

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return self._write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("wrote %d records to Kafka", _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log.warning(
            "the Spark write failed; %d records acknowledged by successful tasks stay in "
            "Kafka (the sink is at-least-once)",
            _total(messages),
        )


class KafkaioStreamWriter(_SinkBase, DataSourceStreamArrowWriter):
    """df.writeStream.format("kafkaio"): each micro-batch's rows become records.

    At-least-once by default (a retried batch may write its records again), as Spark's
    Kafka sink. With deliveryGuarantee=exactly-once each task writes in a transaction of
    its own transactional id (transactionalIdPrefix, default kafkaio-spark-<query id>, and
    the task's partition), committed with a marker of the micro-batch id: a batch run
    again (a failed task, a restarted query) skips what was committed, and a zombie
    attempt is fenced. read_committed consumers see every row once. It needs a
    deterministic query (a batch run again must give each task the same rows), as
    Spark's own exactly-once sinks do."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if self._opts.delivery_guarantee != EXACTLY_ONCE:
            return self._write(iterator)
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
        query = ctx.getLocalProperty("sql.streaming.queryId") if ctx is not None else None
        if ctx is None or batch is None or query is None:
            raise KafkaConfigError(
                "deliveryGuarantee=exactly-once needs the micro-batch id and query id Spark "
                "gives micro-batch tasks; this task has none (continuous processing?)"
            )
        prefix = self._opts.transactional_id_prefix or f"kafkaio-spark-{query}"
        written = write_batches_exactly_once(
            self._opts.client,
            self._opts.topic,
            iterator,
            transactional_id=f"{prefix}-{ctx.partitionId()}",
            batch_id=int(batch),
        )
        return KafkaioCommitMessage(written)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.info("micro-batch %d: wrote %d records to Kafka", batchId, _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self._opts.delivery_guarantee == EXACTLY_ONCE:
            log.warning(
                "micro-batch %d failed; the transactions its tasks committed (%d records) are "
                "skipped when the batch runs again",
                batchId,
                _total(messages),
            )
            return
        log.warning(
            "micro-batch %d failed; %d acknowledged records stay in Kafka",
            batchId,
            _total(messages),
        )
