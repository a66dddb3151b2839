"""The source's output schema (Spark's Kafka schema) and ConsumerRecords as Arrow batches.

Only the pure conversion lives here; reading is in kafkaio.spark.fetch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafkaio.consumer.record import ConsumerRecord
from kafkaio.errors import KafkaConfigError

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
_BASE_FIELDS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]


def source_schema(include_headers: bool) -> StructType:
    """key, value, topic, partition, offset, timestamp, timestampType (+ headers)."""
    fields = list(_BASE_FIELDS)
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects for `schema` (it checks batches against it)."""
    known = set(source_schema(True).fieldNames())
    unknown = [name for name in schema.fieldNames() if name not in known]
    if unknown:
        raise KafkaConfigError(
            f"the kafkaio source has no column(s) {', '.join(unknown)}; its columns are "
            f"{', '.join(source_schema(True).fieldNames())} (headers with includeHeaders=true)"
        )
    return to_arrow_schema(schema, timezone="UTC")


def to_record_batch(
    records: Sequence[ConsumerRecord[Any, Any]], schema: pa.Schema
) -> pa.RecordBatch:
    """One Arrow batch with the columns of `schema` (any subset of the source's columns)."""
    columns = []
    for arrow_field in schema:
        name = arrow_field.name
        if name == "timestamp":
            data: list[Any] = [r.timestamp * 1000 for r in records]  # ms -> us
        elif name == "timestampType":
            data = [r.timestamp_type for r in records]
        elif name == "headers":
            data = [
                [{"key": k, "value": v} for k, v in r.headers] if r.headers else None
                for r in records
            ]
        else:
            data = [getattr(r, name) for r in records]
        columns.append(pa.array(data, type=arrow_field.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
