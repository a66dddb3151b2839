"""Produce throughput: kafkaio vs aiokafka vs confluent-kafka against one embedded Tansu broker.

Run ``python -m benchmarks.bench_produce [-n N] [--runs R] [--quick]``; prints a markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from benchmarks.report import Row, median_row, suite_table
from kafkaio.producer import Producer
from kafkaio.testing import TansuBroker

DEFAULT_N = 200_000
LINGER_MS = 5
BATCH_SIZE = 16384
CODECS = ("none", "lz4", "zstd")
ACKS = ("1", "all")


@dataclass(slots=True)
class Result:
    client: str
    size: int
    codec: str
    acks: str
    records: int
    seconds: float
    cpu: float

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.records * self.size / self.seconds / 1e6

    @property
    def cpu_us(self) -> float:
        return self.cpu / self.records * 1e6


def payload(size: int) -> bytes:
    """Half random-looking, half repetitive: compressible, but not trivially."""
    half = size // 2
    return (uuid.uuid4().hex * (half // 32 + 1))[:half].encode() + b"a" * (size - half)


# -- clients: each produces `n` copies of `value` to `topic` and waits for every ack ----------


async def run_kafkaio(
    bootstrap: str, topic: str, value: bytes, n: int, codec: str, acks: str
) -> None:
    async with Producer(
        bootstrap,
        acks=acks,
        compression_type=codec,
        linger_ms=LINGER_MS,
        batch_size=BATCH_SIZE,
        enable_idempotence=acks == "all",
    ) as producer:
        await producer.send(topic, b"warm-up")
        enqueue = producer.enqueue
        for _ in range(n):
            await enqueue(topic, value)
        await producer.flush()


NOTES: set[str] = set()
AIOKAFKA_NO_IDEMPOTENCE = (
    "aiokafka 0.14's InitProducerId gets UNKNOWN_SERVER_ERROR from Tansu 0.6, so with "
    "acks=all aiokafka runs without idempotence (kafkaio and confluent-kafka run with it)"
)


async def run_aiokafka(
    bootstrap: str, topic: str, value: bytes, n: int, codec: str, acks: str
) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError as AioKafkaError

    def make(idempotence: bool) -> AIOKafkaProducer:
        return AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks=-1 if acks == "all" else 1,
            compression_type=None if codec == "none" else codec,
            linger_ms=LINGER_MS,
            max_batch_size=BATCH_SIZE,
            enable_idempotence=idempotence,
        )

    producer = make(acks == "all")
    try:
        await producer.start()
    except AioKafkaError:
        await producer.stop()
        NOTES.add(AIOKAFKA_NO_IDEMPOTENCE)
        producer = make(False)
        await producer.start()
    try:
        await (await producer.send(topic, b"warm-up"))
        send = producer.send
        for _ in range(n):
            await send(topic, value)
        await producer.flush()
    finally:
        await producer.stop()


def _confluent_conf(bootstrap: str, codec: str, acks: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "compression.type": codec,
        "linger.ms": LINGER_MS,
        "batch.size": BATCH_SIZE,
        "enable.idempotence": acks == "all",
        "queue.buffering.max.messages": 1_000_000,
    }


async def run_confluent(
    bootstrap: str, topic: str, value: bytes, n: int, codec: str, acks: str
) -> None:
    from confluent_kafka import Producer as CkProducer

    producer = CkProducer(_confluent_conf(bootstrap, codec, acks))
    producer.produce(topic, b"warm-up")
    producer.flush(30)
    produce, poll = producer.produce, producer.poll
    for i in range(n):
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:
                poll(0.001)
        if i % 1000 == 0:
            poll(0)
    if producer.flush(60):
        raise RuntimeError("confluent-kafka did not deliver everything within 60 s")


async def run_confluent_aio(
    bootstrap: str, topic: str, value: bytes, n: int, codec: str, acks: str
) -> None:
    from confluent_kafka.aio import AIOProducer

    producer = AIOProducer(_confluent_conf(bootstrap, codec, acks))
    try:
        await (await producer.produce(topic, b"warm-up"))
        produce = producer.produce
        for _ in range(n):
            await produce(topic, value)
        await producer.flush()
    finally:
        await producer.close()


Runner = Callable[[str, str, bytes, int, str, str], Coroutine[Any, Any, None]]
CLIENTS: dict[str, Runner] = {
    "kafkaio": run_kafkaio,
    "aiokafka": run_aiokafka,
    "confluent-kafka": run_confluent,
    "confluent aio": run_confluent_aio,
}


def available_clients() -> dict[str, Runner]:
    out = dict(CLIENTS)
    try:
        import confluent_kafka.aio  # noqa: F401
    except ImportError:
        out.pop("confluent aio")
    return out


def measure(
    broker: TansuBroker, client: str, runner: Runner, size: int, n: int, codec: str, acks: str
) -> Result:
    broker.restart()  # memory storage: a fresh, empty broker for every run
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    asyncio.run(_create_topic(broker.bootstrap, topic))
    value = payload(size)
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    asyncio.run(runner(broker.bootstrap, topic, value, n, codec, acks))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return Result(client, size, codec, acks, n, seconds, cpu)


async def _create_topic(bootstrap: str, topic: str) -> None:
    from kafkaio.admin import Admin, NewTopic

    async with Admin(bootstrap) as admin:
        results = await admin.create_topics([NewTopic(topic, 1, 1)])
        error = results[topic].error
        if error is not None:
            raise error


Case = tuple[int, str, str]  # value size, codec, acks
QUICK_CASES: tuple[Case, ...] = ((100, "none", "1"), (100, "lz4", "all"))
FULL_CASES: tuple[Case, ...] = (
    (100, "none", "1"),
    (100, "lz4", "1"),
    (100, "none", "all"),
    (100, "lz4", "all"),
    (1024, "none", "1"),
    (1024, "lz4", "1"),
)


def case_name(case: Case) -> str:
    size, codec, acks = case
    return f"{size} B, {codec}, acks={acks}"


def suite(n: int, runs: int, cases: tuple[Case, ...]) -> list[Row]:
    """Every client on every case, `runs` times, clients interleaved; medians per cell.
    1 KiB cases send n/4 records."""
    clients = available_clients()
    samples: dict[tuple[Case, str], list[dict[str, float]]] = {}
    with TansuBroker() as broker:
        for name, runner in clients.items():  # warm-up: imports and first connections
            measure(broker, name, runner, 100, 2000, "lz4", "all")
        for _ in range(runs):
            for case in cases:
                size, codec, acks = case
                count = n if size <= 100 else max(n // 4, 1)
                for name, runner in clients.items():
                    r = measure(broker, name, runner, size, count, codec, acks)
                    samples.setdefault((case, name), []).append(
                        {"msg_per_s": r.rate, "mb_per_s": r.mb_per_s, "cpu_us_per_msg": r.cpu_us}
                    )
    return [
        median_row("produce", case_name(case), name, runs_)
        for (case, name), runs_ in samples.items()
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", "--records", type=int, default=DEFAULT_N)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="two cases, one run")
    args = parser.parse_args(argv)
    cases = QUICK_CASES if args.quick else FULL_CASES
    rows = suite(args.records, 1 if args.quick else args.runs, cases)
    print(describe(args.records))
    print(suite_table(rows))
    for note in sorted(NOTES):
        print(f"\nNote: {note}.")


def describe(n: int) -> str:
    return (
        f"Produce: one Tansu broker on loopback, one partition, linger_ms={LINGER_MS}, "
        f"batch_size={BATCH_SIZE}, idempotence with acks=all; {n:,} x 100 B or {n // 4:,} x "
        "1 KiB records per run, each client awaits every enqueue/produce call, then flushes; "
        "wall time includes client start and the final flush. CPU is the client process "
        "(librdkafka's threads included); medians of the runs."
    )


if __name__ == "__main__":
    main()
