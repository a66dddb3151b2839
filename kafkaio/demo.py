"""`make demo`: start the embedded Tansu broker, create a topic, produce records with
kafkaio.Producer and read them back with kafkaio.Consumer, print throughput, stop the broker.
Run with ``python -m kafkaio.demo [--records N] [--bootstrap HOST:PORT]``."""

from __future__ import annotations

import argparse
import sys
import uuid

import anyio

from kafkaio import Admin, Consumer, NewTopic, Producer, TopicPartition
from kafkaio.progress import Progress
from kafkaio.records import COMPILED, Compression
from kafkaio.testing.tansu import TansuBroker

PARTITIONS = 3


async def run(bootstrap: str, records: int, value_size: int, compression: Compression) -> None:
    topic = f"kafkaio-demo-{uuid.uuid4().hex[:8]}"
    async with Admin(bootstrap) as admin:
        cluster = await admin.describe_cluster()
        print(f"broker: {bootstrap} (cluster {cluster.cluster_id}, {len(cluster.brokers)} node)")
        error = (await admin.create_topics([NewTopic(topic, PARTITIONS, 1)]))[topic].error
        if error is not None:
            raise error
    codec = "compiled" if COMPILED else "pure Python"
    print(
        f"topic:  {topic} ({PARTITIONS} partitions), {records:,} records of {value_size} B, "
        f"compression {compression.name.lower()}, record codec {codec}"
    )
    payload = (b"kafkaio demo " * (value_size // 13 + 1))[:value_size]
    record_bytes = value_size + 12

    progress = Progress("produced", records)
    async with Producer(bootstrap, compression_type=compression.name.lower()) as producer:
        futures = []
        for i in range(records):
            futures.append(await producer.enqueue(topic, value=payload, key=b"key-%08d" % i))
            if i % 5000 == 4999:
                progress.update(5000, 5000 * record_bytes)
        await producer.flush()
        progress.update(records % 5000, (records % 5000) * record_bytes)
        failed = [f.exception() for f in futures if f.exception() is not None]
        if failed:
            raise failed[0]  # type: ignore[misc]
    produce_secs = progress.finish()

    progress = Progress("consumed", records)
    seen = 0
    async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        with anyio.fail_after(120):
            while seen < records:
                batches = await consumer.getmany(timeout_ms=1000)
                got = 0
                for batch in batches.values():
                    for r in batch:
                        if r.value != payload:
                            raise AssertionError(f"{r.topic}/{r.partition}@{r.offset}: wrong value")
                    got += len(batch)
                seen += got
                progress.update(got, got * record_bytes)
    consume_secs = progress.finish()
    mb = records * record_bytes / 1e6
    print(
        f"produce: {records / produce_secs:,.0f} msg/s ({mb / produce_secs:.1f} MB/s), "
        f"consume: {records / consume_secs:,.0f} msg/s ({mb / consume_secs:.1f} MB/s); "
        f"{seen:,} records read back, all values checked"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument(
        "--compression", default="lz4", choices=[c.name.lower() for c in Compression]
    )
    parser.add_argument("--bootstrap", help="use this cluster instead of the embedded broker")
    args = parser.parse_args(argv)
    compression = Compression.parse(args.compression)
    if args.bootstrap:
        anyio.run(run, args.bootstrap, args.records, args.value_size, compression)
        return 0
    print("starting the embedded broker (Tansu) ...")
    with TansuBroker() as broker:
        anyio.run(run, broker.bootstrap, args.records, args.value_size, compression)
    print("broker stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
