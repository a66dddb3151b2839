"""format("kafkaio") in a real local Spark (PySpark 4.2+) against Apache Kafka: batch reads (all
partitions, explicit offset ranges, headers), batch and streaming writes, streaming reads
with Trigger.AvailableNow and a checkpoint, and the option checks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip(
    "pyspark.sql.streaming.datasource",
    reason="pyspark >= 4.2 is not installed (pip install 'kafkaio[spark]'); it is ~300 MB, "
    "so the Spark data source tests are opt-in",
)
pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'kafkaio[spark]')")

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from kafkaio import Consumer, Producer, TopicPartition  # noqa: E402
from kafkaio.errors import KafkaConfigError  # noqa: E402
from kafkaio.producer import RecordMetadata  # noqa: E402
from kafkaio.spark import offsets_json  # noqa: E402
from kafkaio.spark.offsets import (  # noqa: E402
    OffsetRange,
    pack_ranges,
    rate_limit,
    split_ranges,
)
from kafkaio.spark.options import SinkOptions, SourceOptions  # noqa: E402
from kafkaio.spark.reader import KafkaioStreamReader  # noqa: E402
from kafkaio.spark.rows import source_schema  # noqa: E402
from kafkaio.spark.settings import client_settings  # noqa: E402
from kafkaio.spark.writer import (  # noqa: E402
    KafkaioBatchWriter,
    KafkaioStreamWriter,
    check_sink_schema,
)
from kafkaio.testing import BrokerInfo  # noqa: E402
from tests.integration.spark_support import start_spark, stream_to_parquet  # noqa: E402

pytestmark = pytest.mark.integration

PARTITIONS = 3
TS0 = 1_700_000_000_000  # record timestamps (ms) start here


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = start_spark("local[2]", "kafkaio-tests", **{"spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


Rec = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]] | None]


def _produce(bootstrap: str, topic: str, records: list[Rec]) -> list[RecordMetadata]:
    """Produce (partition, key, value, headers) records with kafkaio, in batches of several
    records; their metadata in order."""

    async def main() -> list[RecordMetadata]:
        async with Producer(bootstrap, linger_ms=5) as producer:
            futures = [
                await producer.enqueue(
                    topic, v, key=k, partition=p, headers=h, timestamp_ms=TS0 + i
                )
                for i, (p, k, v, h) in enumerate(records)
            ]
            await producer.flush(timeout_ms=30_000)
            return [f.result() for f in futures]

    return anyio.run(main)


def _records(n: int, start: int = 0) -> list[Rec]:
    return [(i % PARTITIONS, f"k{i}".encode(), f"v{i}".encode(), None) for i in range(start, n)]


def _ends(metas: list[RecordMetadata]) -> dict[TopicPartition, int]:
    ends: dict[TopicPartition, int] = {}
    for md in metas:
        tp = TopicPartition(md.topic, md.partition)
        ends[tp] = max(ends.get(tp, 0), md.offset + 1)
    return ends


def _create(broker: BrokerInfo, topic: str, partitions: int = PARTITIONS) -> None:
    anyio.run(broker.create_topic, topic, partitions)


def _consume_all(bootstrap: str, topic: str, count: int) -> list[Any]:
    async def main() -> list[Any]:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        out: list[Any] = []
        async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
            c.assign(tps)
            with anyio.fail_after(30):
                while len(out) < count:
                    batch = await c.getmany(timeout_ms=500)
                    out.extend(r for recs in batch.values() for r in recs)
            out.extend(r for recs in (await c.getmany(timeout_ms=300)).values() for r in recs)
        return out

    return anyio.run(main)


# -- batch reads ---------------------------------------------------------------------------


def test_batch_read_every_partition(
    spark: SparkSession, broker: BrokerInfo, unique_topic: str
) -> None:
    _create(broker, unique_topic)
    metas = _produce(broker.bootstrap, unique_topic, _records(300))
    ends = _ends(metas)
    df = (
        spark.read.format("kafkaio")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", unique_topic)
        .option("endingOffsets", json.dumps(offsets_json(ends)))
        .load()
    )
    fields = {f.name: f.dataType for f in df.schema.fields}
    assert list(fields) == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
    ]
    assert (fields["key"], fields["partition"], fields["offset"]) == (
        BinaryType(),
        IntegerType(),
        LongType(),
    )
    assert fields["topic"] == StringType()
    # ranges this small are read in one task (one per topic-partition from 10,000 offsets on)
    assert df.rdd.getNumPartitions() == 1
    rows = df.collect()
    assert len(rows) == 300
    got = {(r.partition, r.offset): r for r in rows}
    for i, md in enumerate(metas):
        row = got[(md.partition, md.offset)]
        assert (bytes(row.key), bytes(row.value)) == (f"k{i}".encode(), f"v{i}".encode())
        assert row.topic == unique_topic
        assert row.timestampType == 0
        assert int(row.timestamp.timestamp() * 1000) == TS0 + i


def test_batch_read_offset_ranges(
    spark: SparkSession, broker: BrokerInfo, unique_topic: str
) -> None:
    _create(broker, unique_topic)
    metas = _produce(broker.bootstrap, unique_topic, _records(90))  # 30 per partition
    by_offset = {(md.partition, md.offset): i for i, md in enumerate(metas)}
    starting = {unique_topic: {"0": 5, "1": -2, "2": 10}}
    ending = {unique_topic: {"0": 15, "1": 3, "2": 10}}
    rows = (
        spark.read.format("kafkaio")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", unique_topic)
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .load()
        .collect()
    )
    got = sorted((r.partition, r.offset) for r in rows)
    assert got == [(0, o) for o in range(5, 15)] + [(1, o) for o in range(3)]
    for r in rows:
        assert bytes(r.value) == f"v{by_offset[(r.partition, r.offset)]}".encode()

    # assign: one partition only
    rows = (
        spark.read.format("kafkaio")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("assign", json.dumps({unique_topic: [2]}))
        .option("startingOffsets", json.dumps({unique_topic: {"2": 28}}))
        .option("endingOffsets", json.dumps({unique_topic: {"2": 30}}))
        .load()
        .collect()
    )
    assert sorted((r.partition, r.offset) for r in rows) == [(2, 28), (2, 29)]


def test_batch_read_between_timestamps(
    spark: SparkSession, broker: BrokerInfo, unique_topic: str
) -> None:
    """startingTimestamp and endingTimestamp: each partition from its first record stamped at
    or after the start up to (not including) its first stamped at or after the end, as the
    broker's ListOffsets by time answers."""
    _create(broker, unique_topic)
    metas = _produce(broker.bootstrap, unique_topic, _records(90))  # record i at TS0 + i
    rows = (
        spark.read.format("kafkaio")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", unique_topic)
        .option("startingTimestamp", str(TS0 + 30))
        .option("endingTimestamp", str(TS0 + 60))
        .load()
        .collect()
    )
    assert sorted((r.partition, r.offset, bytes(r.value)) for r in rows) == sorted(
        (md.partition, md.offset, f"v{i}".encode()) for i, md in enumerate(metas) if 30 <= i < 60
    )


def test_batch_read_headers(spark: SparkSession, broker: BrokerInfo, unique_topic: str) -> None:
    _create(broker, unique_topic, 1)
    records: list[Rec] = [
        (0, None, b"no-headers", None),
        (0, b"k", b"two", [("h1", b"a"), ("h2", None)]),
        (0, b"k", None, [("trace", b"\x00\x01")]),
    ]
    metas = _produce(broker.bootstrap, unique_topic, records)
    rows = (
        spark.read.format("kafkaio")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", unique_topic)
        .option("includeHeaders", "true")
        .option("endingOffsets", json.dumps(offsets_json(_ends(metas))))
        .load()
        .orderBy("offset")
        .collect()
    )
    assert [r.offset for r in rows] == [0, 1, 2]
    assert rows[0].headers is None and rows[0].key is None
    assert [(h.key, None if h.value is None else bytes(h.value)) for h in rows[1].headers] == [
        ("h1", b"a"),
        ("h2", None),
    ]
    assert rows[2].value is None
    assert [(h.key, bytes(h.value)) for h in rows[2].headers] == [("trace", b"\x00\x01")]


def test_batch_read_with_nothing_to_read_is_empty(
    spark: SparkSession, broker: BrokerInfo, unique_topic: str
) -> None:
    """No range to read (empty topic, missing topic, start == end): an empty DataFrame with
    the source's schema, as Spark's Kafka source gives (PySpark reads an empty partition
    list as one InputPartition(None))."""
    _create(broker, unique_topic)
    reader = spark.read.format("kafkaio").option("kafka.bootstrap.servers", broker.bootstrap)
    empty = reader.option("subscribe", unique_topic).load()
    assert empty.collect() == []
    assert empty.schema.fieldNames()[-1] == "timestampType"
    missing = (
        reader.option("subscribe", unique_topic + "-missing").option("includeHeaders", "true")
    ).load()
    assert missing.count() == 0
    assert missing.schema.fieldNames()[-1] == "headers"

    metas = _produce(broker.bootstrap, unique_topic, _records(6))
    ends = json.dumps(offsets_json(_ends(metas)))
    same = reader.option("subscribe", unique_topic).option("startingOffsets", ends)
    assert same.option("endingOffsets", ends).load().count() == 0


def test_batch_read_rejects_bad_options(spark: SparkSession, broker: BrokerInfo) -> None:
    reader = spark.read.format("kafkaio").option("kafka.bootstrap.servers", broker.bootstrap)
    with pytest.raises(Exception, match="exactly one of the options subscribe"):
        reader.load().collect()
    with pytest.raises(Exception, match="'latest' .* not allowed in a batch query"):
        reader.option("subscribe", "t").option("startingOffsets", "latest").load().collect()


# -- writes --------------------------------------------------------------------------------


def test_batch_write_then_read_back(
    spark: SparkSession, broker: BrokerInfo, unique_topic: str
) -> None:
    _create(broker, unique_topic)
    data = [
        (
            f"key-{i}",
            f"value-{i}".encode(),
            i % PARTITIONS,
            [(f"h{i}", b"x")] if i % 5 == 0 else None,
        )
        for i in range(120)
    ]
    df = spark.createDataFrame(
        data,
        "key string, value binary, partition int, headers array<struct<key:string,value:binary>>",
    ).repartition(2)
    (
        df.write.format("kafkaio")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", unique_topic)
        .mode("append")
        .save()
    )
    records = _consume_all(broker.bootstrap, unique_topic, len(data))
    assert len(records) == len(data)
    got = {r.key: r for r in records}
    for key, value, partition, headers in data:
        r = got[key.encode()]
        assert (r.value, r.partition, r.topic) == (value, partition, unique_topic)
        assert list(r.headers) == (headers or [])


def test_write_headers_built_with_array_struct(
    spark: SparkSession, broker: BrokerInfo, unique_topic: str
) -> None:
    """array(struct(...)) gives array<struct<key:string,value:binary>> with non-nullable
    parts; the sink ignores nullability, as Spark's (DataTypeUtils.sameType)."""
    _create(broker, unique_topic)
    df = spark.range(6).select(
        F.col("id").cast("string").alias("value"),
        (F.col("id") % PARTITIONS).cast("int").alias("partition"),
        F.array(F.struct(F.lit("trace").alias("key"), F.lit(b"t1").alias("value"))).alias(
            "headers"
        ),
    )
    headers_type = df.schema["headers"].dataType
    assert isinstance(headers_type, ArrayType) and not headers_type.containsNull
    (
        df.write.format("kafkaio")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", unique_topic)
        .mode("append")
        .save()
    )
    records = _consume_all(broker.bootstrap, unique_topic, 6)
    assert sorted(r.value for r in records) == [str(i).encode() for i in range(6)]
    assert all(list(r.headers) == [("trace", b"t1")] for r in records)


def test_write_with_topic_column_and_errors(
    spark: SparkSession, broker: BrokerInfo, unique_topic: str
) -> None:
    _create(broker, unique_topic)
    df = spark.createDataFrame(
        [(unique_topic, f"v{i}") for i in range(10)], "topic string, value string"
    )
    # Python data sources have no ErrorIfExists mode: append (or overwrite, which appends)
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        df.write.format("kafkaio").option("kafka.bootstrap.servers", broker.bootstrap).save()
    df.write.format("kafkaio").option("kafka.bootstrap.servers", broker.bootstrap).mode(
        "overwrite"
    ).save()
    records = _consume_all(broker.bootstrap, unique_topic, 10)
    assert sorted(r.value for r in records) == sorted(f"v{i}".encode() for i in range(10))
    assert all(r.key is None for r in records)

    no_value = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="needs a `value` column"):
        no_value.write.format("kafkaio").option("kafka.bootstrap.servers", broker.bootstrap).option(
            "topic", unique_topic
        ).mode("append").save()
    no_topic = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="needs a topic"):
        no_topic.write.format("kafkaio").option("kafka.bootstrap.servers", broker.bootstrap).mode(
            "append"
        ).save()


# -- streaming -----------------------------------------------------------------------------


def _stream_once(
    spark: SparkSession,
    broker: BrokerInfo,
    topic: str,
    out: Path,
    checkpoint: Path,
    *,
    pattern: bool = False,
    **options: str,
) -> list[dict[str, Any]]:
    """One availableNow run of topic (a regex with `pattern`) -> parquet; returns the run's
    progress reports."""
    query = stream_to_parquet(
        spark, broker.bootstrap, topic, out, checkpoint, pattern=pattern, **options
    )
    assert query.exception() is None, query.exception()
    return [p for p in query.recentProgress if p["numInputRows"] > 0]


def test_streaming_available_now_resumes_from_checkpoint(
    spark: SparkSession, broker: BrokerInfo, unique_topic: str, tmp_path: Path
) -> None:
    _create(broker, unique_topic)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    first = _produce(broker.bootstrap, unique_topic, _records(30))
    _stream_once(spark, broker, unique_topic, out, checkpoint)
    rows = spark.read.parquet(str(out)).collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        (md.partition, md.offset) for md in first
    )

    second = _produce(broker.bootstrap, unique_topic, _records(45, start=30))
    progress = _stream_once(spark, broker, unique_topic, out, checkpoint)
    assert sum(p["numInputRows"] for p in progress) == 15  # only the new records
    rows = spark.read.parquet(str(out)).collect()
    assert len(rows) == 45
    expected = {(md.partition, md.offset): f"v{i}" for i, md in enumerate(first + second)}
    assert {(r.partition, r.offset): r.value for r in rows} == expected
    end = json.loads(progress[-1]["sources"][0]["endOffset"])  # the checkpointed offsets
    assert end == {unique_topic: {str(tp.partition): o for tp, o in _ends(first + second).items()}}


def test_streaming_max_offsets_per_trigger(
    spark: SparkSession, broker: BrokerInfo, unique_topic: str, tmp_path: Path
) -> None:
    _create(broker, unique_topic)
    metas = _produce(broker.bootstrap, unique_topic, _records(60))
    progress = _stream_once(
        spark, broker, unique_topic, tmp_path / "out", tmp_path / "cp", maxOffsetsPerTrigger="25"
    )
    # 25 spread over 3 equally lagging partitions: 8 each, then 8 each, then the rest
    assert [p["numInputRows"] for p in progress] == [24, 24, 12]
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        (md.partition, md.offset) for md in metas
    )


def test_streaming_micro_batch_with_nothing_to_read(
    spark: SparkSession, broker: BrokerInfo, unique_topic: str, tmp_path: Path
) -> None:
    """A new empty topic moves the offsets with no record to read: that micro-batch has no
    input partitions and reads nothing."""
    first, second = f"{unique_topic}-a", f"{unique_topic}-b"
    _create(broker, first)
    metas = _produce(broker.bootstrap, first, _records(6))
    out, checkpoint = tmp_path / "out", tmp_path / "cp"
    _stream_once(spark, broker, f"{unique_topic}-[ab]", out, checkpoint, pattern=True)
    _create(broker, second)
    progress = _stream_once(spark, broker, f"{unique_topic}-[ab]", out, checkpoint, pattern=True)
    assert progress == []  # no rows in the second run
    assert second in (checkpoint / "offsets" / "1").read_text()  # its micro-batch ran
    rows = spark.read.parquet(str(out)).collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        (md.partition, md.offset) for md in metas
    )


def test_streaming_copy_between_topics(
    spark: SparkSession, broker: BrokerInfo, unique_topic: str, tmp_path: Path
) -> None:
    source, sink = unique_topic, unique_topic + "-copy"
    _create(broker, source)
    _create(broker, sink)
    _produce(broker.bootstrap, source, _records(20))
    query = (
        spark.readStream.format("kafkaio")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "upper(CAST(value AS STRING)) AS value", "partition")
        .writeStream.format("kafkaio")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    records = _consume_all(broker.bootstrap, sink, 20)
    assert sorted((r.partition, r.key, r.value) for r in records) == sorted(
        (i % PARTITIONS, f"k{i}".encode(), f"V{i}".encode()) for i in range(20)
    )


# -- option parsing (no broker) ------------------------------------------------------------


def test_source_option_parsing() -> None:
    opts = SourceOptions.parse(
        {
            "kafka.bootstrap.servers": "h:1",
            "subscribePattern": "orders-.*",
            "startingOffsets": '{"a": {"0": -2}}',
            "maxOffsetsPerTrigger": "100",
            "failOnDataLoss": "false",
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="u" password="p\\"w";',
            "kafka.request.timeout.ms": "5000",
        }
    )
    assert opts.selection.pattern == "orders-.*"
    assert opts.starting is not None and opts.starting.partition_map == {TopicPartition("a", 0): -2}
    assert (opts.max_offsets_per_trigger, opts.fail_on_data_loss) == (100, False)
    assert opts.client.consumer_options() == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "u",
        "sasl_plain_password": 'p"w',
        "request_timeout_ms": 5000,
    }
    with pytest.raises(KafkaConfigError, match="did you mean 'startingoffsets'"):
        SourceOptions.parse(
            {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "startingOffset": "earliest"}
        )
    # accepted as Spark's source accepts it: the source joins no group and commits nothing
    assert client_settings({"kafka.bootstrap.servers": "h:1", "kafka.group.id": "g"}).options == {}
    with pytest.raises(KafkaConfigError, match="kafka.auto.offset.reset is not supported"):
        client_settings({"kafka.bootstrap.servers": "h:1", "kafka.auto.offset.reset": "latest"})
    with pytest.raises(KafkaConfigError, match="did you mean 'kafka.linger.ms'"):
        client_settings({"kafka.bootstrap.servers": "h:1", "kafka.linger.msec": "5"})


def test_sink_schema_check_ignores_nullability() -> None:
    strict = StructType(
        [
            StructField("key", BinaryType(), nullable=False),
            StructField("value", StringType(), nullable=False),
            StructField("topic", StringType(), nullable=False),
            StructField("partition", IntegerType(), nullable=False),
            StructField(
                "headers",
                ArrayType(
                    StructType(
                        [
                            StructField("key", StringType(), nullable=False),
                            StructField("value", BinaryType(), nullable=False),
                        ]
                    ),
                    containsNull=False,
                ),
                nullable=False,
            ),
        ]
    )
    check_sink_schema(strict, None)
    wrong = StructType(
        [
            StructField("value", StringType()),
            StructField("headers", ArrayType(StructType([StructField("key", StringType())]))),
        ]
    )
    with pytest.raises(KafkaConfigError, match="column `headers` is array<struct<key:string>>"):
        check_sink_schema(wrong, "t")


def test_split_ranges_as_spark() -> None:
    """Spark's KafkaOffsetRangeCalculator: minPartitions splits large ranges in proportion
    (small ones stay whole), maxRecordsPerPartition caps each piece, empty ones go."""
    a, b, c = (OffsetRange("t", p, 0, n) for p, n in ((0, 200), (1, 100), (2, 10)))
    empty = OffsetRange("t", 3, 5, 5)

    def spans(ranges: list[OffsetRange]) -> list[tuple[int, int, int]]:
        return [(r.partition, r.start, r.end) for r in ranges]

    assert split_ranges([a, b, c, empty], min_partitions=3, max_records=None) == [a, b, c]
    assert spans(split_ranges([a, b, c], min_partitions=5, max_records=None)) == [
        (0, 0, 66), (0, 66, 133), (0, 133, 200), (1, 0, 100), (2, 0, 10)
    ]
    assert spans(split_ranges([a, b, c], min_partitions=None, max_records=70)) == [
        (0, 0, 66), (0, 66, 133), (0, 133, 200), (1, 0, 50), (1, 50, 100), (2, 0, 10)
    ]
    assert spans(split_ranges([c], min_partitions=4, max_records=None)) == [
        (2, 0, 2), (2, 2, 4), (2, 4, 7), (2, 7, 10)
    ]


def test_pack_ranges_groups_small_ones() -> None:
    big, small = OffsetRange("t", 0, 0, 50), [OffsetRange("t", p, 0, 4) for p in (1, 2, 3, 4)]
    assert pack_ranges([big, *small], 10) == [[big], small[:3], small[3:]]
    assert pack_ranges([], 10) == []


def test_source_and_sink_option_parity() -> None:
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    opts = SourceOptions.parse(
        base
        | {
            "minPartitions": "8",
            "maxRecordsPerPartition": "1000",
            "minOffsetsPerTrigger": "50",
            "maxTriggerDelay": "30s",
            "fetchOffset.numRetries": "0",
            "fetchOffset.retryIntervalMs": "20",
            "groupIdPrefix": "ignored",
        }
    )
    assert (opts.min_partitions, opts.max_records_per_partition) == (8, 1000)
    assert (opts.min_offsets_per_trigger, opts.max_trigger_delay_ms) == (50, 30_000)
    assert (opts.fetch_offset_retries, opts.fetch_offset_retry_interval_ms) == (0, 20)
    assert SourceOptions.parse(base).max_trigger_delay_ms == 15 * 60_000  # Spark's 15m
    with pytest.raises(KafkaConfigError, match="minPartitions is '0'"):
        SourceOptions.parse(base | {"minPartitions": "0"})
    with pytest.raises(KafkaConfigError, match="maxTriggerDelay is '5 parsecs'"):
        SourceOptions.parse(base | {"maxTriggerDelay": "5 parsecs"})
    sink = SinkOptions.parse(
        {"kafka.bootstrap.servers": "h:1", "deliveryGuarantee": "Exactly-Once",
         "transactionalIdPrefix": "orders-copy"}
    )
    assert (sink.delivery_guarantee, sink.transactional_id_prefix) == (
        "exactly-once", "orders-copy"
    )
    with pytest.raises(KafkaConfigError, match="deliveryGuarantee is 'twice'"):
        SinkOptions.parse({"kafka.bootstrap.servers": "h:1", "deliveryGuarantee": "twice"})
    with pytest.raises(KafkaConfigError, match="only used with deliveryGuarantee=exactly-once"):
        SinkOptions.parse({"kafka.bootstrap.servers": "h:1", "transactionalIdPrefix": "p"})
    with pytest.raises(KafkaConfigError, match="kafka.transactional.id is not supported"):
        client_settings({"kafka.bootstrap.servers": "h:1", "kafka.transactional.id": "x"})


def test_exactly_once_is_for_streaming_writes() -> None:
    schema = StructType([StructField("value", StringType())])
    raw = {"kafka.bootstrap.servers": "h:1", "topic": "t", "deliveryGuarantee": "exactly-once"}
    with pytest.raises(KafkaConfigError, match="exactly-once is for streaming writes"):
        KafkaioBatchWriter(raw, schema)
    KafkaioStreamWriter(raw, schema)


def test_min_offsets_per_trigger_waits_for_max_trigger_delay() -> None:
    """Spark's delayBatch: a trigger with fewer than minOffsetsPerTrigger new offsets is
    skipped until maxTriggerDelay has passed since the last micro-batch."""
    schema = source_schema(False)
    reader = KafkaioStreamReader(
        {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "minOffsetsPerTrigger": "10",
         "maxTriggerDelay": "1h"},
        schema,
    )
    tp = TopicPartition("t", 0)
    assert not reader._delay_batch({tp: 0}, {tp: 3})  # the first trigger always runs
    assert reader._delay_batch({tp: 3}, {tp: 8})  # 5 < 10 new offsets: wait
    assert not reader._delay_batch({tp: 3}, {tp: 13})  # 10 new offsets: run
    reader._last_trigger_ms -= 3_600_000  # an hour later
    assert not reader._delay_batch({tp: 13}, {tp: 14})


def test_rate_limit_spreads_by_lag() -> None:
    a, b, c = (TopicPartition("t", p) for p in range(3))
    start = {a: 0, b: 100, c: 50}
    latest = {a: 90, b: 110, c: 50}
    assert rate_limit(start, latest, 1000) == latest
    assert rate_limit(start, latest, 50) == {a: 45, b: 105, c: 50}
    assert rate_limit(start, latest, 1) == {a: 1, b: 101, c: 50}  # small lags are not starved


def test_batch_read_subscribe_pattern(
    spark: SparkSession, broker: BrokerInfo, unique_topic: str
) -> None:
    topics = [f"{unique_topic}-a", f"{unique_topic}-b"]
    ends: dict[TopicPartition, int] = {}
    for topic in topics:
        _create(broker, topic)
        ends |= _ends(_produce(broker.bootstrap, topic, _records(30)))
    _create(broker, f"{unique_topic}-c")  # not matched
    rows = (
        spark.read.format("kafkaio")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribePattern", f"{unique_topic}-[ab]")
        .option("endingOffsets", json.dumps(offsets_json(ends)))
        .load()
        .collect()
    )
    assert sorted((r.topic, bytes(r.value)) for r in rows) == sorted(
        (t, f"v{i}".encode()) for t in topics for i in range(30)
    )


class _StubAdmin:
    """Answers ListOffsets like a broker whose partition t-0 holds timestamps 100..190
    (offsets 0..9) and ends at 10: the edge cases of timestamp bounds (past the end, with
    each strategy) without a broker; test_batch_read_between_timestamps reads by timestamp
    from a real one."""

    async def list_offsets(self, specs: dict[TopicPartition, int], **_: Any) -> dict[Any, Any]:
        from kafkaio.admin import ListedOffset

        out = {}
        for tp, spec in specs.items():
            if spec == -1:
                out[tp] = ListedOffset(10)
            elif spec == -2:
                out[tp] = ListedOffset(0)
            else:
                offset = max(0, (spec - 100 + 9) // 10)
                out[tp] = ListedOffset(offset if offset < 10 else None)
        return out


async def test_timestamp_bounds_resolve() -> None:
    from kafkaio.spark.cluster import resolve_bound
    from kafkaio.spark.errors import OffsetLookupError
    from kafkaio.spark.offsets import OffsetBound

    tp = TopicPartition("t", 0)
    stub: Any = _StubAdmin()

    async def resolve(bound: OffsetBound, missing: str = "error") -> dict[TopicPartition, int]:
        return await resolve_bound(
            stub, bound, [tp], isolation_level="read_uncommitted", missing_timestamp=missing
        )

    assert await resolve(OffsetBound("timestamp", timestamp=145)) == {tp: 5}
    assert await resolve(OffsetBound("timestamps", ((tp, 100),))) == {tp: 0}
    assert await resolve(OffsetBound("timestamp", timestamp=999), "latest") == {tp: 10}
    with pytest.raises(OffsetLookupError, match="no record at or after the given timestamp"):
        await resolve(OffsetBound("timestamp", timestamp=999))
    assert await resolve(OffsetBound("offsets", ((tp, -1),))) == {tp: 10}
    with pytest.raises(OffsetLookupError, match="must name every partition"):
        await resolve(OffsetBound("offsets", ((TopicPartition("t", 1), 3),)))
