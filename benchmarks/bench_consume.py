"""Consume throughput: kafkaio vs aiokafka vs confluent-kafka (sync and aio), assign mode
and group mode (one consumer that subscribes, joins a fresh group and auto-commits).

Starts one embedded Tansu broker, pre-fills a topic per compression once, then times each
client reading all N x 100-byte records from the beginning (group mode includes the group
join). ``--mode`` picks assign, group or both; ``--profile`` adds a cProfile.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from benchmarks.report import Row, median_row

DEFAULT_RECORDS = 500_000
VALUE_SIZE = 100
PARTITIONS = 4
COMPRESSIONS = ("none", "lz4", "zstd")
MODES = ("assign", "group")


@dataclass(slots=True)
class Result:
    client: str
    mode: str
    compression: str
    records: int
    wall_s: float
    cpu_s: float

    @property
    def msgs_per_s(self) -> float:
        return self.records / self.wall_s

    @property
    def mb_per_s(self) -> float:
        return self.records * VALUE_SIZE / self.wall_s / 1e6

    @property
    def cpu_us_per_record(self) -> float:
        return self.cpu_s / self.records * 1e6


# -- filling -----------------------------------------------------------------------------


def fill(bootstrap: str, topic: str, compression: str, count: int) -> None:
    """Produce `count` 100-byte records with confluent-kafka (fast, every codec)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
    time.sleep(0.5)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": compression,
            "linger.ms": 20,
            "batch.size": 256 * 1024,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = (b"0123456789abcdef" * 8)[:VALUE_SIZE]
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, key=b"%08d" % i, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(60)
    if left:
        raise RuntimeError(f"{left} records were not delivered while filling {topic}")


# -- clients -----------------------------------------------------------------------------


async def consume_kafkaio(bootstrap: str, topic: str, count: int) -> int:
    from kafkaio import Consumer, TopicPartition

    n = 0
    async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        while n < count * VALUE_SIZE:
            batches = await consumer.getmany(timeout_ms=1000)
            for records in batches.values():
                for r in records:
                    n += len(r.value)  # touch every record as an application would
    return n // VALUE_SIZE


async def consume_kafkaio_iter(bootstrap: str, topic: str, count: int) -> int:
    """Record by record (``async for``): batched collection under the hood."""
    from kafkaio import Consumer, TopicPartition

    n = 0
    async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        async for r in consumer:
            n += len(r.value)
            if n >= count * VALUE_SIZE:
                break
    return n // VALUE_SIZE


def _group_id() -> str:
    return f"bench-{uuid.uuid4().hex[:8]}"


# Tansu 0.6 holds a new group's first JoinGroup for session_timeout_ms / 2 (22 s with the
# Java default of 45 s): both clients use 6 s, so the join costs about 3 s of the wall time.
GROUP_SESSION_TIMEOUT_MS = 6000
GROUP_HEARTBEAT_MS = 2000


async def consume_kafkaio_group(bootstrap: str, topic: str, count: int) -> int:
    from kafkaio import Consumer

    n = 0
    async with Consumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=_group_id(),
        auto_offset_reset="earliest",
        session_timeout_ms=GROUP_SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=GROUP_HEARTBEAT_MS,
    ) as consumer:
        while n < count * VALUE_SIZE:
            batches = await consumer.getmany(timeout_ms=1000)
            for records in batches.values():
                for r in records:
                    n += len(r.value)
    return n // VALUE_SIZE


async def consume_aiokafka_group(bootstrap: str, topic: str, count: int) -> int:
    from aiokafka import AIOKafkaConsumer

    n = 0
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=_group_id(),
        auto_offset_reset="earliest",
        session_timeout_ms=GROUP_SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=GROUP_HEARTBEAT_MS,
    )
    await consumer.start()
    try:
        while n < count * VALUE_SIZE:
            batches = await consumer.getmany(timeout_ms=1000)
            for records in batches.values():
                for r in records:
                    n += len(r.value)
    finally:
        await consumer.stop()
    return n // VALUE_SIZE


async def consume_aiokafka(bootstrap: str, topic: str, count: int) -> int:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    n = 0
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        while n < count * VALUE_SIZE:
            batches = await consumer.getmany(timeout_ms=1000)
            for records in batches.values():
                for r in records:
                    n += len(r.value)
    finally:
        await consumer.stop()
    return n // VALUE_SIZE


def _confluent_conf(bootstrap: str) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-{os.getpid()}-{time.monotonic_ns()}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }


def consume_confluent_sync(bootstrap: str, topic: str, count: int) -> int:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(_confluent_conf(bootstrap))
    n = 0
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        while n < count * VALUE_SIZE:
            for message in consumer.consume(num_messages=1000, timeout=1.0):
                if message.error() is None:
                    n += len(message.value() or b"")
    finally:
        consumer.close()
    return n // VALUE_SIZE


async def consume_confluent_aio(bootstrap: str, topic: str, count: int) -> int:
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition
    from confluent_kafka.aio import AIOConsumer

    consumer = AIOConsumer(_confluent_conf(bootstrap))
    n = 0
    try:
        await consumer.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)]
        )
        while n < count * VALUE_SIZE:
            for message in await consumer.consume(num_messages=1000, timeout=1.0):
                if message.error() is None:
                    n += len(message.value())
    finally:
        await consumer.close()
    return n // VALUE_SIZE


def _has_confluent_aio() -> bool:
    try:
        from confluent_kafka.aio import AIOConsumer  # noqa: F401
    except ImportError:
        return False
    return True


Runner = Callable[[str, str, int], int]


def _async(fn: Callable[[str, str, int], Awaitable[int]]) -> Runner:
    return lambda b, t, n: asyncio.run(fn(b, t, n))  # type: ignore[arg-type]


def clients(mode: str = "assign") -> dict[str, Runner]:
    if mode == "group":
        return {
            "kafkaio": _async(consume_kafkaio_group),
            # confluent-kafka's group consumer gets nothing from Tansu 0.6 (brokers.md)
            "aiokafka": _async(consume_aiokafka_group),
        }
    out: dict[str, Runner] = {
        "kafkaio": _async(consume_kafkaio),
        "kafkaio (async for)": _async(consume_kafkaio_iter),
        "aiokafka": _async(consume_aiokafka),
        "confluent-kafka (sync)": consume_confluent_sync,
    }
    if _has_confluent_aio():
        out["confluent-kafka (AIOConsumer)"] = _async(consume_confluent_aio)
    return out


def measure(
    name: str,
    runner: Runner,
    bootstrap: str,
    topic: str,
    count: int,
    compression: str,
    mode: str = "assign",
) -> Result:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    got = runner(bootstrap, topic, count)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    if got < count:
        raise RuntimeError(f"{name} read {got} records from {topic}, expected {count}")
    return Result(name, mode, compression, count, wall, cpu)


def profile_kafkaio(bootstrap: str, topic: str, count: int, top: int = 25) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(consume_kafkaio(bootstrap, topic, count))
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def suite(
    count: int,
    runs: int,
    compressions: tuple[str, ...] = ("none", "lz4"),
    modes: tuple[str, ...] = ("assign",),
) -> list[Row]:
    """Every client reads `count` records per compression and mode, `runs` times with the
    clients interleaved; one row of medians per cell."""
    from kafkaio.testing import TansuBroker

    samples: dict[tuple[str, str, str], list[dict[str, float]]] = {}
    with TansuBroker() as broker:
        fill(broker.bootstrap, "bench-warm-up", "lz4", 2000)
        for mode in modes:  # warm-up: imports and first connections
            for name, runner in clients(mode).items():
                measure(name, runner, broker.bootstrap, "bench-warm-up", 2000, "lz4", mode)
        topics = {}
        for compression in compressions:
            topic = f"bench-consume-{compression}"
            fill(broker.bootstrap, topic, compression, count)
            topics[compression] = topic
        for _ in range(runs):
            for mode in modes:
                for compression, topic in topics.items():
                    for name, runner in clients(mode).items():
                        r = measure(name, runner, broker.bootstrap, topic, count, compression, mode)
                        samples.setdefault((mode, compression, name), []).append(
                            {
                                "msg_per_s": r.msgs_per_s,
                                "mb_per_s": r.mb_per_s,
                                "cpu_us_per_msg": r.cpu_us_per_record,
                            }
                        )
    return [
        median_row("consume", f"{VALUE_SIZE} B, {compression}, {mode}", name, runs_)
        for (mode, compression, name), runs_ in samples.items()
    ]


def run(
    count: int, compressions: tuple[str, ...], profile: bool, modes: tuple[str, ...] = ("assign",)
) -> list[Result]:
    from kafkaio.testing import TansuBroker

    results: list[Result] = []
    with TansuBroker() as broker:
        topics = {}
        for compression in compressions:
            topic = f"bench-consume-{compression}"
            fill(broker.bootstrap, topic, compression, count)
            topics[compression] = topic
        for mode in modes:
            for compression, topic in topics.items():
                for name, runner in clients(mode).items():
                    results.append(
                        measure(name, runner, broker.bootstrap, topic, count, compression, mode)
                    )
        if profile:
            print(f"### cProfile: kafkaio, {topics[compressions[0]]} (tottime)\n")
            print(
                "```\n"
                + profile_kafkaio(broker.bootstrap, topics[compressions[0]], count)
                + "```\n"
            )
    return results


def table(results: list[Result]) -> str:
    lines = [
        "| client | mode | compression | records | msg/s | MB/s (values) | client CPU µs/record |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.client} | {r.mode} | {r.compression} | {r.records:,} | {r.msgs_per_s:,.0f} | "
            f"{r.mb_per_s:,.1f} | {r.cpu_us_per_record:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", "--records", type=int, default=DEFAULT_RECORDS)
    parser.add_argument("--compression", action="append", choices=COMPRESSIONS)
    parser.add_argument("--profile", action="store_true", help="cProfile the kafkaio consumer")
    parser.add_argument(
        "--mode", choices=(*MODES, "both"), default="both", help="assign, group or both"
    )
    args = parser.parse_args(argv)
    compressions = tuple(args.compression or COMPRESSIONS)
    modes = MODES if args.mode == "both" else (args.mode,)
    results = run(args.records, compressions, args.profile, modes)
    print(
        f"## Consume: {args.records:,} x {VALUE_SIZE}-byte records, {PARTITIONS} partitions, "
        f"{' and '.join(modes)} mode, one Tansu broker (memory storage) on this machine\n"
    )
    print(table(results))


if __name__ == "__main__":
    main()
