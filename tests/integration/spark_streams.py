"""A streaming read of format("kafkaio") into parquet with Trigger.AvailableNow, shared by the
Spark tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession


def stream_to_parquet(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    out: Path,
    checkpoint: Path,
    *,
    pattern: bool = False,
    **options: str,
) -> Any:
    """Run `topic` (a regex with `pattern`) from the earliest offsets into parquet (partition,
    offset, value as a string) until availableNow ends; returns the finished query (its
    exception() says whether it failed)."""
    stream = (
        spark.readStream.format("kafkaio")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribePattern" if pattern else "subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for name, value in options.items():
        stream = stream.option(name, value)
    query = (
        stream.load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(180)
    except Exception:
        pass  # the query failed: query.exception() has it
    return query
