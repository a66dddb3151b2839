"""Memory bounds: consumer RSS by fetch settings, producer RSS by buffer_memory.

Run ``python -m benchmarks.bench_memory``. Each case runs in a fresh Python process (so
peak RSS is its own) against one Tansu broker: the consumer reads N x 1 KiB records with a
slow application (it sleeps a little per batch, so fetched data piles up as far as the
settings allow); the producer enqueues N x 1 KiB records as fast as it can. Growth is the
peak RSS minus the RSS once the client was started.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import uuid
from typing import Any

from benchmarks.report import Row, median_row, suite_table

RECORDS = 100_000
VALUE = 1024
PARTITIONS = 4
MIB = 1024 * 1024

CONSUMER_CASES: dict[str, dict[str, Any]] = {
    "consumer, defaults (fetch_max_bytes 50 MiB, 1 MiB/partition)": {},
    "consumer, max_partition_fetch_bytes=256 KiB, fetch_buffer_max_bytes=1 MiB": {
        "max_partition_fetch_bytes": 256 * 1024,
        "fetch_max_bytes": 1 * MIB,
        "fetch_buffer_max_bytes": 1 * MIB,
    },
}
PRODUCER_CASES: dict[str, dict[str, Any]] = {
    "producer, buffer_memory=32 MiB (default)": {},
    "producer, buffer_memory=4 MiB": {"buffer_memory": 4 * MIB},
}


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / MIB


def _peak_mib() -> float:
    """Peak RSS of this process (VmHWM; ru_maxrss would include the parent's before exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _consume(bootstrap: str, topic: str, options: dict[str, Any]) -> dict[str, float]:
    from kafkaio import Consumer, TopicPartition

    async with Consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", **options
    ) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        base = _rss_mib()
        n = 0
        while n < RECORDS:
            batches = await consumer.getmany(timeout_ms=1000, max_records=2000)
            n += sum(len(v) for v in batches.values())
            await asyncio.sleep(0.002)  # a slow application: prefetched data waits
    return {"base": base, "peak": _peak_mib()}


async def _produce(bootstrap: str, topic: str, options: dict[str, Any]) -> dict[str, float]:
    from kafkaio.producer import Producer

    value = b"x" * VALUE
    async with Producer(bootstrap, acks="1", **options) as producer:
        await producer.send(topic, b"warm-up")
        base = _rss_mib()
        for _ in range(RECORDS):
            await producer.enqueue(topic, value)
        await producer.flush()
    return {"base": base, "peak": _peak_mib()}


def _child(kind: str, bootstrap: str, topic: str, options: dict[str, Any]) -> None:
    run = _consume if kind == "consumer" else _produce
    print(json.dumps(asyncio.run(run(bootstrap, topic, options))))


def _measure(kind: str, bootstrap: str, topic: str, options: dict[str, Any]) -> dict[str, float]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_memory",
            "--child",
            kind,
            bootstrap,
            topic,
            json.dumps(options),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    result = json.loads(out.strip().splitlines()[-1])
    return {"peak_rss_mib": result["peak"], "growth_mib": result["peak"] - result["base"]}


def suite(runs: int = 1) -> list[Row]:
    from benchmarks.bench_produce import _create_topic
    from kafkaio.testing import TansuBroker

    samples: dict[str, list[dict[str, float]]] = {}
    with TansuBroker() as broker:
        topic = f"mem-{uuid.uuid4().hex[:8]}"
        _fill(broker.bootstrap, topic)
        for _ in range(runs):
            for case, options in CONSUMER_CASES.items():
                samples.setdefault(case, []).append(
                    _measure("consumer", broker.bootstrap, topic, options)
                )
            for case, options in PRODUCER_CASES.items():
                target = f"mem-p-{uuid.uuid4().hex[:8]}"
                asyncio.run(_create_topic(broker.bootstrap, target))
                samples.setdefault(case, []).append(
                    _measure("producer", broker.bootstrap, target, options)
                )
    return [median_row("memory", case, "kafkaio", runs_) for case, runs_ in samples.items()]


def _fill(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    value = os.urandom(VALUE)  # uncompressed, so buffered bytes are what was fetched
    for i in range(RECORDS):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(60):
        raise RuntimeError(f"could not fill {topic}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", nargs=4, metavar=("KIND", "BOOTSTRAP", "TOPIC", "OPTIONS"))
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args(argv)
    if args.child:
        kind, bootstrap, topic, options = args.child
        _child(kind, bootstrap, topic, json.loads(options))
        return
    print(suite_table(suite(args.runs)))


if __name__ == "__main__":
    main()
