"""What the Spark tests share: a Spark session with format("kafkaio") registered, and a
streaming read into parquet with Trigger.AvailableNow. (spark_copy_job.py, run as a script,
imports it as a top-level module.)"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession


def connector_jars() -> list[str]:
    """Spark's own Kafka connector's jars for spark.jars, [] when Maven could not fetch it."""
    from kafkaio.testing import spark_kafka

    if spark_kafka.unavailable_reason() is not None:
        return []
    try:
        return [str(j) for j in spark_kafka.connector_jars()]
    except Exception:  # Maven could not fetch it: the comparisons skip
        return []


def start_spark(master: str, app: str, **conf: str) -> SparkSession:
    """A Spark session whose Python workers run this interpreter (the venv with kafkaio),
    UI off, UTC, errors-only logging, format("kafkaio") registered, and Spark's Kafka
    connector on the classpath when it could be fetched (every session gets it: Spark's
    JVM finds data sources only through the jars of the first session in the process);
    `conf` adds settings."""
    from kafkaio.spark import register

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    jars = connector_jars()
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session


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
