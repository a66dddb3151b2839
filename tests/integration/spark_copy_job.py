"""A streaming copy between Kafka topics with format("kafkaio"), run as its own process by
tests/integration/test_spark_apache.py so that the test can kill it (-9, mid-batch) and
start it again from its checkpoint.

``python spark_copy_job.py '{"bootstrap": ..., "source": ..., "sink": ..., "checkpoint": ...,
"guarantee": "exactly-once", "max_offsets": 2000, "row_sleep_ms": 1}'``: reads `source` from
the earliest offsets in micro-batches of `max_offsets` (Trigger.AvailableNow), writes each
row to `sink` with its source partition and offset as the key (value unchanged), sleeping
`row_sleep_ms` per row in a Python UDF, in `min_partitions` tasks a micro-batch (so a micro-batch takes long enough to be killed in).
Prints "done" when the query ends.
"""

from __future__ import annotations

import json
import sys
import time


def main(spec: dict[str, object]) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType
    from spark_support import start_spark  # this script's directory is on sys.path

    spark = start_spark("local[2]", "kafkaio-copy-job", **{"spark.sql.shuffle.partitions": "2"})
    pause = float(str(spec.get("row_sleep_ms", 0))) / 1000

    @F.udf(BinaryType())  # type: ignore[misc]
    def slow(value: bytes) -> bytes:
        time.sleep(pause)
        return value

    query = (
        spark.readStream.format("kafkaio")
        .option("kafka.bootstrap.servers", str(spec["bootstrap"]))
        .option("subscribe", str(spec["source"]))
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(spec["max_offsets"]))
        .option("minPartitions", str(spec.get("min_partitions", 1)))
        .load()
        .select(
            F.concat_ws(":", "partition", "offset").alias("key"),
            slow(F.col("value")).alias("value"),
        )
        .writeStream.format("kafkaio")
        .option("kafka.bootstrap.servers", str(spec["bootstrap"]))
        .option("topic", str(spec["sink"]))
        .option("deliveryGuarantee", str(spec["guarantee"]))
        .option("checkpointLocation", str(spec["checkpoint"]))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")
    print("done", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
