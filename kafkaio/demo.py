"""`make demo`: start the embedded Tansu broker, create a topic, produce and consume records,
print throughput, stop the broker. Run with ``python -m kafkaio.demo [--records N]``."""

from __future__ import annotations

import argparse
import sys
import uuid

import anyio

from kafkaio import Admin, NewTopic
from kafkaio.net import Connection, ConnectionConfig
from kafkaio.progress import Progress
from kafkaio.records import Compression
from kafkaio.testing.raw import build_batches, fetch, produce
from kafkaio.testing.tansu import TansuBroker

TOPIC = f"kafkaio-demo-{uuid.uuid4().hex[:8]}"
PARTITIONS = 3


async def run(bootstrap: str, records: int, value_size: int, compression: Compression) -> None:
    async with Admin(bootstrap) as admin:
        cluster = await admin.describe_cluster()
        print(f"broker: {bootstrap} (cluster {cluster.cluster_id}, {len(cluster.brokers)} node)")
        error = (await admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]))[TOPIC].error
        if error is not None:
            raise error
        print(
            f"topic:  {TOPIC} ({PARTITIONS} partitions), {records:,} records of {value_size} B, "
            f"compression {compression.name.lower()}"
        )
        info = (await admin.describe_topics([TOPIC]))[TOPIC]
        leaders = {p.partition: p.leader for p in info.partitions}
        brokers = {b.node_id: b for b in cluster.brokers}
    conns: dict[int, Connection] = {}
    for node_id in set(leaders.values()):
        assert node_id is not None
        b = brokers[node_id]
        conns[node_id] = await Connection.connect(
            b.host, b.port, ConnectionConfig(), node_id=node_id
        )
    try:
        per_partition = [
            records // PARTITIONS + (1 if p < records % PARTITIONS else 0)
            for p in range(PARTITIONS)
        ]
        payload = (b"kafkaio demo " * (value_size // 13 + 1))[:value_size]

        progress = Progress("produced", records)

        async def produce_partition(p: int) -> None:
            conn = conns[leaders[p]]  # type: ignore[index]
            chunk = 2_000
            for start in range(0, per_partition[p], chunk):
                data = [
                    (b"key-%08d" % i, payload)
                    for i in range(start, min(start + chunk, per_partition[p]))
                ]
                batches = build_batches(data, compression=compression, batch_size=1024 * 1024)
                await produce(conn, TOPIC, p, batches, acks=-1)
                progress.update(len(data), len(data) * (value_size + 12))

        async with anyio.create_task_group() as tg:
            for p in range(PARTITIONS):
                tg.start_soon(produce_partition, p)
        produce_secs = progress.finish()

        progress = Progress("consumed", records)
        counts = [0] * PARTITIONS

        async def consume_partition(p: int) -> None:
            conn = conns[leaders[p]]  # type: ignore[index]
            offset = 0
            while counts[p] < per_partition[p]:
                got, _hw = await fetch(conn, TOPIC, p, offset, max_bytes=4 * 1024 * 1024)
                if got:
                    for r in got:
                        if r.value != payload:
                            raise AssertionError(f"record {p}/{r.offset} has the wrong value")
                    counts[p] += len(got)
                    offset = got[-1].offset + 1
                    progress.update(
                        len(got), sum(len(r.value or b"") + len(r.key or b"") for r in got)
                    )

        async with anyio.create_task_group() as tg:
            for p in range(PARTITIONS):
                tg.start_soon(consume_partition, p)
        consume_secs = progress.finish()
    finally:
        for conn in conns.values():
            await conn.close()
    mb = records * (value_size + 12) / 1e6
    print(
        f"produce: {records / produce_secs:,.0f} msg/s ({mb / produce_secs:.1f} MB/s), "
        f"consume: {records / consume_secs:,.0f} msg/s ({mb / consume_secs:.1f} MB/s); "
        f"{sum(counts):,} records read back, all values checked"
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
