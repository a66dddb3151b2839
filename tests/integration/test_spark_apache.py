"""format("kafkaio") on Apache Kafka, in a Spark cluster of two executor JVMs
(local-cluster[2,1,1024]): exact batch round trips, Spark's split of offset ranges
(minPartitions, maxRecordsPerPartition) compared with Spark's own connector, failOnDataLoss
after DeleteRecords and a recreated topic, and a streaming copy killed mid-batch and
restarted from its checkpoint with the exactly-once sink (judged by Java's read_committed
consumer)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip(
    "pyspark.sql.streaming.datasource",
    reason="pyspark >= 4.2 is not installed (pip install 'kafkaio[spark]')",
)
pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'kafkaio[spark]')")

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from kafkaio import Producer, TopicPartition  # noqa: E402
from kafkaio.admin import Admin, OffsetSpec  # noqa: E402
from kafkaio.testing import BrokerInfo  # noqa: E402
from kafkaio.testing.java import JavaClients  # noqa: E402
from tests.integration.spark_support import (  # noqa: E402
    connector_jars,
    start_spark,
    stream_to_parquet,
)

pytestmark = pytest.mark.integration

JOB = Path(__file__).with_name("spark_copy_job.py")
BATCH = 2_000  # records per micro-batch of the copy job
TASKS = 4  # its tasks per micro-batch (minPartitions)
MARKERS = TASKS * 2  # transaction markers per micro-batch: one per task and sink partition


@pytest.fixture(scope="module")
def cluster_spark() -> Iterator[tuple[SparkSession, bool]]:
    """A Spark application with two executor JVMs (one core, 1 GiB each) and, when Maven
    could fetch it, Spark's own Kafka connector (format("kafka")) for comparisons."""
    conf = {"spark.executor.memory": "1g", "spark.sql.shuffle.partitions": "4"}
    session = start_spark("local-cluster[2,1,1024]", "kafkaio-tests-cluster", **conf)
    yield session, bool(connector_jars())
    session.stop()


def _create(broker: BrokerInfo, topic: str, partitions: int) -> None:
    anyio.run(broker.create_topic, topic, partitions)


def _produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    async def main() -> None:
        async with Producer(bootstrap, linger_ms=5) as producer:
            for i in range(count):
                await producer.enqueue(topic, f"v{i}".encode(), partition=i % partitions)
            await producer.flush(timeout_ms=60_000)

    anyio.run(main)


def _read(spark: SparkSession, fmt: str, bootstrap: str, **options: str) -> DataFrame:
    reader = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _ranges(df: DataFrame) -> list[tuple[int, int, int, int]]:
    """(first offset, last offset, rows, topic-partition) per Spark partition and
    topic-partition, sorted."""

    def spans(rows: Iterator[Any]) -> list[tuple[int, int, int, int]]:
        by_partition: dict[int, list[int]] = {}
        for r in rows:
            by_partition.setdefault(r.partition, []).append(r.offset)
        return [(min(o), max(o), len(o), p) for p, o in by_partition.items()]

    return sorted(df.rdd.mapPartitions(spans).collect())


# -- batch on two executors ------------------------------------------------------------------


def test_cluster_round_trip_is_exact(
    cluster_spark: tuple[SparkSession, bool], apache_kafka: BrokerInfo, unique_topic: str
) -> None:
    """20,000 rows written from two executor JVMs and read back: every row once (on Apache
    Kafka, whose end offsets are exact)."""
    spark, _ = cluster_spark
    _create(apache_kafka, unique_topic, 6)
    rows = 20_000
    spark.range(0, rows, 1, 8).select(
        F.col("id").cast("string").alias("key"), F.col("id").cast("string").alias("value")
    ).write.format("kafkaio").option("kafka.bootstrap.servers", apache_kafka.bootstrap).option(
        "topic", unique_topic
    ).mode("append").save()
    df = _read(spark, "kafkaio", apache_kafka.bootstrap, subscribe=unique_topic)
    # 3,333 offsets a partition: packed into tasks of 10,000 offsets or more (3 ranges each)
    assert df.rdd.getNumPartitions() == 2
    got = Counter(int(bytes(r.value)) for r in df.select("value").collect())
    assert len(got) == rows and set(got.values()) == {1}
    assert set(got) == set(range(rows))


def test_default_save_mode_says_append(
    cluster_spark: tuple[SparkSession, bool], apache_kafka: BrokerInfo, unique_topic: str
) -> None:
    """Python data sources cannot be written in the default ErrorIfExists mode (Spark's
    Kafka sink can): Spark's error names the modes to use instead."""
    spark, _ = cluster_spark
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match=r"(?s)ErrorIfExists.*Append"):
        df.write.format("kafkaio").option("kafka.bootstrap.servers", apache_kafka.bootstrap).option(
            "topic", unique_topic
        ).save()


@pytest.mark.parametrize(
    "options",
    [{"minPartitions": "5"}, {"maxRecordsPerPartition": "70"}, {"minPartitions": "9",
     "maxRecordsPerPartition": "150"}],
    ids=["minPartitions", "maxRecordsPerPartition", "both"],
)
def test_partition_splits_match_spark_connector(
    cluster_spark: tuple[SparkSession, bool],
    apache_kafka: BrokerInfo,
    unique_topic: str,
    options: dict[str, str],
) -> None:
    """minPartitions / maxRecordsPerPartition split the offset ranges as Spark's Kafka source
    does: the same Spark partitions over the same offsets as format("kafka")."""
    spark, have_connector = cluster_spark
    _create(apache_kafka, unique_topic, 3)
    # 3 partitions of 200, 100 and 10 records: large and small ranges
    async def fill() -> None:
        async with Producer(apache_kafka.bootstrap, linger_ms=5) as producer:
            for partition, count in ((0, 200), (1, 100), (2, 10)):
                for _ in range(count):
                    await producer.enqueue(unique_topic, b"x", partition=partition)
            await producer.flush(timeout_ms=60_000)

    anyio.run(fill)
    # explicit offsets: Spark's batch planner sizes earliest..latest ranges as 1 offset
    # (symbolic -2..-1) and so never applies maxRecordsPerPartition to them; kafkaio does
    options = {
        **options,
        "startingOffsets": json.dumps({unique_topic: {"0": 0, "1": 0, "2": 0}}),
        "endingOffsets": json.dumps({unique_topic: {"0": 200, "1": 100, "2": 10}}),
    }
    ours = _ranges(
        _read(spark, "kafkaio", apache_kafka.bootstrap, subscribe=unique_topic, **options)
    )
    # Spark's KafkaOffsetRangeCalculator by hand: minPartitions=5 gives partition 0
    # round(200/310*5) = 3 parts, 2 one; 1 is then round(100/300*4) = 1 part
    expected = {
        "minPartitions": [
            (0, 9, 10, 2), (0, 65, 66, 0), (0, 99, 100, 1), (66, 132, 67, 0), (133, 199, 67, 0)
        ],
        "maxRecordsPerPartition": [
            (0, 9, 10, 2), (0, 49, 50, 1), (0, 65, 66, 0), (50, 99, 50, 1), (66, 132, 67, 0),
            (133, 199, 67, 0),
        ],
    }
    if "minPartitions" in options and "maxRecordsPerPartition" not in options:
        assert ours == expected["minPartitions"]
    if "maxRecordsPerPartition" in options and "minPartitions" not in options:
        assert ours == expected["maxRecordsPerPartition"]
    if not have_connector:
        pytest.skip("Spark's Kafka connector could not be fetched: compared with the "
                    "expected splits only")
    theirs = _ranges(
        _read(spark, "kafka", apache_kafka.bootstrap, subscribe=unique_topic, **options)
    )
    assert ours == theirs


# -- failOnDataLoss ----------------------------------------------------------------------------


def test_fail_on_data_loss_after_delete_records(
    cluster_spark: tuple[SparkSession, bool], apache_kafka: BrokerInfo, unique_topic: str
) -> None:
    """Offsets deleted by DeleteRecords: failOnDataLoss=true fails the read, false reads what
    is left (as Spark's connector, compared when available)."""
    spark, have_connector = cluster_spark
    _create(apache_kafka, unique_topic, 1)
    _produce(apache_kafka.bootstrap, unique_topic, 100, 1)

    async def delete() -> None:
        async with Admin(apache_kafka.bootstrap) as admin:
            await admin.delete_records({TopicPartition(unique_topic, 0): 40})

    anyio.run(delete)
    start = json.dumps({unique_topic: {"0": 10}})
    with pytest.raises(Exception, match="offsets 10..39 are no longer in the log"):
        _read(
            spark, "kafkaio", apache_kafka.bootstrap, subscribe=unique_topic, startingOffsets=start
        ).collect()
    formats = ["kafkaio", "kafka"] if have_connector else ["kafkaio"]
    for fmt in formats:
        rows = _read(
            spark,
            fmt,
            apache_kafka.bootstrap,
            subscribe=unique_topic,
            startingOffsets=start,
            failOnDataLoss="false",
        ).collect()
        assert sorted(r.offset for r in rows) == list(range(40, 100)), fmt


def _stream(
    spark: SparkSession, bootstrap: str, topic: str, out: Path, checkpoint: Path, **options: str
) -> tuple[int, Any]:
    query = stream_to_parquet(spark, bootstrap, topic, out, checkpoint, **options)
    return sum(p["numInputRows"] for p in query.recentProgress), query.exception()


def test_fail_on_data_loss_when_topic_recreated(
    cluster_spark: tuple[SparkSession, bool],
    apache_kafka: BrokerInfo,
    unique_topic: str,
    tmp_path: Path,
) -> None:
    """A stream at offset 50 whose topic is deleted and recreated with 10 records: the end
    offset (10) is below the checkpoint's (50): with failOnDataLoss the query fails; without,
    that micro-batch skips the partition and the stream goes on from 10 (Spark's rule)."""
    spark, _ = cluster_spark
    bootstrap = apache_kafka.bootstrap
    _create(apache_kafka, unique_topic, 1)
    _produce(bootstrap, unique_topic, 50, 1)
    out, strict, lenient = tmp_path / "out", tmp_path / "strict", tmp_path / "lenient"
    assert _stream(spark, bootstrap, unique_topic, out, strict) == (50, None)
    assert _stream(spark, bootstrap, unique_topic, out / "l", lenient)[0] == 50

    async def recreate() -> None:
        async with Admin(bootstrap) as admin:
            await admin.delete_topics([unique_topic])
            deadline = time.monotonic() + 30
            while unique_topic in await admin.list_topics():
                assert time.monotonic() < deadline, "the topic was not deleted"
                await anyio.sleep(0.2)

    anyio.run(recreate)
    _create(apache_kafka, unique_topic, 1)
    _produce(bootstrap, unique_topic, 10, 1)
    rows, error = _stream(spark, bootstrap, unique_topic, out, strict)
    assert error is not None and "offset was changed from 50 to 10" in str(error)
    rows, error = _stream(
        spark, bootstrap, unique_topic, out / "l", lenient, failOnDataLoss="false"
    )
    assert (rows, error) == (0, None)
    _produce(bootstrap, unique_topic, 5, 1)
    rows, error = _stream(
        spark, bootstrap, unique_topic, out / "l", lenient, failOnDataLoss="false"
    )
    assert (rows, error) == (5, None)
    offsets = sorted(r.offset for r in spark.read.parquet(str(out / "l")).collect())
    assert offsets == sorted(list(range(50)) + list(range(10, 15)))


# -- recovery: killed mid-batch, exactly-once sink -----------------------------------------


def _start_job(spec: dict[str, Any], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, str(JOB), json.dumps(spec)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(os.environ, PYSPARK_PYTHON=sys.executable),
        )


def _sink_end(bootstrap: str, topic: str, isolation: str = "read_committed") -> int:
    """The sink's end offsets summed (read_committed: the last stable offsets)."""

    async def main() -> int:
        async with Admin(bootstrap) as admin:
            specs = {TopicPartition(topic, p): OffsetSpec.LATEST for p in range(2)}
            answers = await admin.list_offsets(specs, isolation_level=isolation)
        return sum(a.offset or 0 for a in answers.values())

    return anyio.run(main)


def _kill_mid_batch(
    job: subprocess.Popen[bytes], checkpoint: Path, bootstrap: str, sink: str, log: Path
) -> tuple[int, int]:
    """Kill -9 the job (driver and Python workers) once a micro-batch after the first
    committed one has written (and with transactions committed) 500 records or more of its
    own, i.e. some of its tasks are done and Spark has not committed it; returns that
    batch's id and the sink's committed end offsets then."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        assert job.poll() is None, f"the job ended before it was killed:\n{log.read_text()}"
        commits = {int(p.name) for p in (checkpoint / "commits").glob("[0-9]*")}
        planned = {int(p.name) for p in (checkpoint / "offsets").glob("[0-9]*")}
        running = sorted(planned - commits)
        if commits and running:
            done = (max(commits) + 1) * BATCH
            end = _sink_end(bootstrap, sink)
            if end >= done + MARKERS * (max(commits) + 2) + 500:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait(30)
                return running[0], end
        time.sleep(0.1)
    os.killpg(job.pid, signal.SIGKILL)
    raise AssertionError(f"no micro-batch was caught mid-write:\n{log.read_text()[-3000:]}")


def test_killed_mid_batch_and_restarted(
    apache_kafka: BrokerInfo, java_clients: JavaClients, unique_topic: str, tmp_path: Path
) -> None:
    """A streaming copy (micro-batches of 2,000 records in 4 tasks) killed -9 while a
    micro-batch is being written (some of its tasks done), then restarted from its
    checkpoint. The source reads each offset once
    from the checkpoint (no gap, nothing before it again), and with the exactly-once sink
    Java's read_committed consumer sees every source offset exactly once: the interrupted
    batch's committed transactions are not written again, its open ones were aborted. (The
    same kill with the default at-least-once sink, like Spark's, writes the finished tasks'
    records of the interrupted batch again: 1,000 of 6,000 in a run of this scenario.)"""
    bootstrap = apache_kafka.bootstrap
    source, sink = unique_topic, unique_topic + "-copy"
    records = 3 * BATCH
    _create(apache_kafka, source, 2)
    _create(apache_kafka, sink, 2)
    _produce(bootstrap, source, records, 2)
    checkpoint, log = tmp_path / "checkpoint", tmp_path / "job.log"
    spec = {
        "bootstrap": bootstrap,
        "source": source,
        "sink": sink,
        "checkpoint": str(checkpoint),
        "guarantee": "exactly-once",
        "max_offsets": BATCH,
        "min_partitions": TASKS,
        "row_sleep_ms": 1,
    }
    killed_batch, at_kill = _kill_mid_batch(
        _start_job(spec, log), checkpoint, bootstrap, sink, log
    )
    job = _start_job(spec, log)
    assert job.wait(300) == 0, log.read_text()[-3000:]
    assert "done" in log.read_text()
    assert (checkpoint / "commits" / str(killed_batch)).exists()
    end = json.loads((checkpoint / "offsets" / str(max(
        int(p.name) for p in (checkpoint / "offsets").glob("[0-9]*")
    ))).read_text().splitlines()[-1])
    assert end == {source: {"0": records // 2, "1": records // 2}}

    got = java_clients.read_all(bootstrap, sink, isolation="read_committed", idle_ms=3000)
    keys = Counter(r.key for r in got)
    assert set(keys) == {f"{i % 2}:{i // 2}".encode() for i in range(records)}  # no gap
    duplicated = sum(n - 1 for n in keys.values())
    print(
        f"killed in micro-batch {killed_batch} with {at_kill} sink offsets committed; after "
        f"the restart {len(got)} records read (read_committed), {duplicated} duplicated"
    )
    assert duplicated == 0, f"{duplicated} source offsets written twice"
    assert len(got) == records


def test_sink_raises_a_delivery_error(apache_kafka: BrokerInfo, unique_topic: str) -> None:
    """A record the broker refuses (no key, to a compacted topic: INVALID_RECORD) fails the
    task with its delivery error, and the rows of the other partitions are written: the
    sink checks every record's outcome (run in this process, as a Python worker runs it)."""
    import pyarrow as pa

    from kafkaio.admin import NewTopic
    from kafkaio.errors import KafkaError
    from kafkaio.spark.options import SinkOptions
    from kafkaio.spark.produce import write_batches

    partitions = 3

    async def create() -> None:
        async with Admin(apache_kafka.bootstrap) as admin:
            done = await admin.create_topics(
                [NewTopic(unique_topic, partitions, 1, {"cleanup.policy": "compact"})]
            )
            assert done[unique_topic].error is None

    anyio.run(create)
    rows = 3_000
    keys: list[bytes | None] = [f"k{i}".encode() for i in range(rows)]
    keys[1_500] = None
    batches = [
        pa.record_batch(
            [pa.array(keys[lo : lo + 1_000], pa.binary()),
             pa.array([f"v{i}".encode() for i in range(lo, lo + 1_000)], pa.binary())],
            names=["key", "value"],
        )
        for lo in range(0, rows, 1_000)
    ]
    opts = SinkOptions.parse(
        {"kafka.bootstrap.servers": apache_kafka.bootstrap, "topic": unique_topic}
    )
    with pytest.raises(KafkaError, match="(?i)invalid.?record|key"):
        write_batches(opts.client, opts.topic, iter(batches))

    async def written() -> int:
        async with Admin(apache_kafka.bootstrap) as admin:
            offsets = await admin.list_offsets(
                {TopicPartition(unique_topic, p): OffsetSpec.LATEST for p in range(partitions)}
            )
        return sum(o.offset for o in offsets.values())

    # the failed batch held the keyless record and the keyed ones of its partition
    assert rows // partitions <= anyio.run(written) < rows
