"""Scale curves: how each client's cost grows with partitions, record size and topics.

Each point runs kafkaio, aiokafka and confluent-kafka's sync client (librdkafka) in turn,
each in a fresh child process against the same broker, and the tables give every point as
a ratio to aiokafka and to librdkafka from the same run, with the client's peak RSS.

- partitions (1, 10, 100, 1,000): keyed produce (1,024 distinct keys, murmur2 in every
  client) of N x 100 B to one topic with that many partitions, then a group consumer (the
  only member of a new group, subscribe) reading them back;
- record size (10 B to 1 MB): produce of about 100 MB (at most N records) to one
  partition, no compression;
- topics (1, 10, 100): N x 100 B spread round-robin over that many one-partition topics.

Run ``python -m benchmarks.bench_scale [--curve partitions|sizes|topics] [-n N] [--runs R]
[--broker tansu|apache]``.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from benchmarks import clients
from benchmarks.common import (
    BenchBroker,
    add_broker_argument,
    in_turn,
    payloads,
    readable,
    warm_clients,
)
from benchmarks.isolate import Meter, Metrics, run_isolated
from benchmarks.report import NOTES, Row, median_row, suite_table

CLIENTS = (clients.KAFKAIO, clients.AIOKAFKA, clients.CONFLUENT)
PRODUCE, CONSUME = "scale: produce", "scale: consume"  # the suites of the rows
CURVES = ("partitions", "sizes", "topics")
PARTITIONS = (1, 10, 100, 1000)
SIZES = (10, 100, 1_000, 10_000, 100_000, 1_000_000)
TOPICS = (1, 10, 100)
KEYS = 1024
SIZE_CURVE_BYTES = 100_000_000  # the record-size curve sends about this much per point
LINGER_MS = 5
BATCH_SIZE = 16384
MAX_REQUEST = 2_000_000  # room for the 1 MB records of the size curve (every client)


@dataclass(frozen=True, slots=True)
class Point:
    """One point of a curve: what the producers send."""

    curve: str
    size: int
    records: int
    partitions: int = 1  # of each topic
    topics: int = 1
    keyed: bool = False
    consume: bool = False  # a group consumer reads the records back afterwards

    @property
    def name(self) -> str:
        if self.curve == "partitions":
            return f"{self.partitions:,} partition" + "s" * (self.partitions != 1)
        if self.curve == "sizes":
            return f"{self.size:,} B records"
        return f"{self.topics:,} topic" + "s" * (self.topics != 1)


def points(curve: str, records: int) -> list[Point]:
    if curve == "partitions":
        return [
            Point(curve, 100, records, partitions=p, keyed=True, consume=True)
            for p in PARTITIONS
        ]
    if curve == "sizes":
        return [
            Point(curve, size, max(100, min(records, SIZE_CURVE_BYTES // size)))
            for size in SIZES
        ]
    if curve == "topics":
        return [Point(curve, 100, records, topics=t) for t in TOPICS]
    raise ValueError(f"unknown curve {curve!r}: one of {', '.join(CURVES)}")


# -- producers (in the child) --------------------------------------------------------------

Targets = list[tuple[str, bytes | None]]  # the (topic, key) of record i is targets[i % len]


def _targets(topics: Sequence[str], keyed: bool) -> Targets:
    """Record i goes to topic i % len(topics) with key i % KEYS (or none): both cycle."""
    keys: list[bytes | None] = [b"key-%04d" % k for k in range(KEYS)] if keyed else [None]
    count = len(topics) * len(keys) // _gcd(len(topics), len(keys))
    return [(topics[i % len(topics)], keys[i % len(keys)]) for i in range(count)]


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


async def _kafkaio(bootstrap: str, targets: Targets, values: list[bytes], records: int) -> None:
    from kafkaio.producer import Producer, WouldBlockError

    async with Producer(
        bootstrap,
        acks="1",
        linger_ms=LINGER_MS,
        batch_size=BATCH_SIZE,
        enable_idempotence=False,
        max_request_size=MAX_REQUEST,
    ) as producer:
        for topic in {t for t, _ in targets}:
            await producer.partitions_for(topic)
        produce, enqueue = producer.produce, producer.enqueue
        n, m = len(values), len(targets)
        for i in range(records):
            topic, key = targets[i % m]
            try:
                produce(topic, values[i % n], key)
            except WouldBlockError:
                await enqueue(topic, values[i % n], key)
            if not i & 1023:
                await asyncio.sleep(0)
        await producer.flush()


async def _aiokafka(bootstrap: str, targets: Targets, values: list[bytes], records: int) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks=1,
        linger_ms=LINGER_MS,
        max_batch_size=BATCH_SIZE,
        max_request_size=MAX_REQUEST,
    )
    await producer.start()
    try:
        for topic in {t for t, _ in targets}:
            await producer.partitions_for(topic)
        send = producer.send
        n, m = len(values), len(targets)
        for i in range(records):
            topic, key = targets[i % m]
            await send(topic, values[i % n], key=key)
        await producer.flush()
    finally:
        await producer.stop()


def _confluent(bootstrap: str, targets: Targets, values: list[bytes], records: int) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": LINGER_MS,
            "batch.size": BATCH_SIZE,
            "message.max.bytes": MAX_REQUEST,
            "queue.buffering.max.messages": 1_000_000,
            "partitioner": "murmur2_random",  # the Java client's (and kafkaio's) for keys
        }
    )
    produce, poll = producer.produce, producer.poll
    n, m = len(values), len(targets)
    for i in range(records):
        topic, key = targets[i % m]
        while True:
            try:
                produce(topic, values[i % n], key)
                break
            except BufferError:
                poll(0.001)
        if i % 1000 == 0:
            poll(0)
    if producer.flush(300):
        raise RuntimeError("confluent-kafka did not deliver everything within 300 s")


def _sync(fn: Callable[..., object]) -> Callable[..., None]:
    def run(*args: object) -> None:
        asyncio.run(fn(*args))  # type: ignore[arg-type]

    return run


PRODUCERS: dict[str, Callable[[str, Targets, list[bytes], int], None]] = {
    clients.KAFKAIO: _sync(_kafkaio),
    clients.AIOKAFKA: _sync(_aiokafka),
    clients.CONFLUENT: _confluent,
}


def measure_produce(client: str, bootstrap: str, topics: list[str], point: Point) -> Metrics:
    """Child: `client` sends the point's records (start, sends, flush: all timed)."""
    clients._prepare(client)
    values = payloads(point.size)
    targets = _targets(topics, point.keyed)
    with Meter() as meter:
        PRODUCERS[client](bootstrap, targets, values, point.records)
    return meter.throughput(point.records, point.size)


# -- the suite ------------------------------------------------------------------------------


def suite(curve: str, records: int, runs: int = 1, bootstrap: str | None = None) -> list[Row]:
    names = clients.available(CLIENTS, bootstrap)
    samples: dict[tuple[str, str], list[Metrics]] = {}
    with BenchBroker(bootstrap) as broker:
        curve_points = points(curve, records)
        first = curve_points[0]

        def warm(name: str) -> None:  # the first point's produce, not recorded
            broker.fresh()
            topics = [
                broker.new_topic("bench-scale-warm", first.partitions) for _ in range(first.topics)
            ]
            run_isolated(measure_produce, name, broker.bootstrap, topics, first)

        warm_clients(broker, names, warm)
        for point in curve_points:
            for round_ in range(runs):
                for name in in_turn(names, round_):
                    broker.fresh()
                    topics = [
                        broker.new_topic(f"bench-scale-{point.curve}", point.partitions)
                        for _ in range(point.topics)
                    ]
                    metrics = run_isolated(measure_produce, name, broker.bootstrap, topics, point)
                    samples.setdefault((f"produce, {point.name}", name), []).append(metrics)
                    if not point.consume:
                        continue
                    wanted = readable(broker, topics[0], point.partitions, point.records)
                    group = f"bench-scale-{uuid.uuid4().hex[:8]}"
                    metrics = run_isolated(
                        clients.measure_consume,
                        name,
                        broker.bootstrap,
                        topics[0],
                        point.partitions,
                        wanted,
                        point.size,
                        group,
                    )
                    samples.setdefault((f"group consume, {point.name}", name), []).append(
                        metrics
                    )
    return [
        median_row(
            PRODUCE if case.startswith("produce") else CONSUME, case, name, runs_
        )
        for (case, name), runs_ in samples.items()
    ]


def describe(curve: str, records: int, runs: int) -> str:
    detail = {
        "partitions": (
            f"keyed produce ({KEYS:,} distinct keys) of {records:,} x 100 B to one topic of "
            f"{', '.join(map(str, PARTITIONS))} partitions, then a group consumer (the only "
            "member of a new group) reading them from the start (steady state)"
        ),
        "sizes": (
            f"produce of about {SIZE_CURVE_BYTES / 1e6:g} MB (at most {records:,} records, at "
            f"least 100) of {', '.join(f'{s:,}' for s in SIZES)} B records to one partition"
        ),
        "topics": (
            f"produce of {records:,} x 100 B round-robin over "
            f"{', '.join(map(str, TOPICS))} one-partition topics"
        ),
    }[curve]
    return (
        f"Scale, {curve}: {detail}; acks=1, no compression, linger_ms={LINGER_MS}, "
        f"batch_size={BATCH_SIZE}; kafkaio calls produce() as in the produce suite, aiokafka "
        "awaits send(), confluent-kafka's sync producer polls every 1,000; produce wall time "
        "includes client start and the final flush; each run in a fresh child process, "
        f"{runs} run(s) per point."
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--curve", action="append", choices=CURVES)
    parser.add_argument("-n", "--records", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=1)
    add_broker_argument(parser)
    args = parser.parse_args(argv)
    for curve in args.curve or CURVES:
        print(describe(curve, args.records, args.runs))
        rows = suite(curve, args.records, args.runs, args.bootstrap)
        for kind in (PRODUCE, CONSUME):
            part = [r for r in rows if r.suite == kind]
            if part:
                print(suite_table(part), flush=True)
    for text in sorted(NOTES):
        print(f"\nNote: {text}.")


if __name__ == "__main__":
    main()
