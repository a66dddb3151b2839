"""Produce throughput: kafkaio vs aiokafka vs confluent-kafka against one embedded Tansu broker.

Run ``python -m benchmarks.bench_produce [N]``; prints a markdown table (msg/s, MB/s, CPU µs/rec).
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

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


Runner = Callable[[str, str, bytes, int, str, str], Awaitable[None]]
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


def run(n: int = DEFAULT_N) -> list[Result]:
    clients = available_clients()
    results = []
    with TansuBroker() as broker:
        for size, count in ((100, n), (1024, max(n // 4, 1))):
            for codec in CODECS:
                for acks in ACKS:
                    for name, runner in clients.items():
                        results.append(measure(broker, name, runner, size, count, codec, acks))
    return results


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else DEFAULT_N
    results = run(n)
    print(
        f"### Produce throughput: one Tansu broker on loopback, one partition, linger_ms="
        f"{LINGER_MS}, batch_size={BATCH_SIZE}, idempotence with acks=all; {n} x 100 B and "
        f"{max(n // 4, 1)} x 1 KiB records; wall time includes client start and the final "
        "flush. CPU is the client process (librdkafka's threads included).\n"
    )
    print("| value | codec | acks | client | msg/s | MB/s | CPU µs/rec | msg/s vs kafkaio |")
    print("|---|---|---|---|---:|---:|---:|---:|")
    base: dict[tuple[int, str, str], float] = {}
    for r in results:
        if r.client == "kafkaio":
            base[(r.size, r.codec, r.acks)] = r.rate
    for r in results:
        ratio = r.rate / base[(r.size, r.codec, r.acks)]
        print(
            f"| {r.size} B | {r.codec} | {r.acks} | {r.client} | {r.rate:,.0f} | "
            f"{r.mb_per_s:.1f} | {r.cpu_us:.1f} | {ratio:.2f} |"
        )
    for note in sorted(NOTES):
        print(f"\nNote: {note}.")


if __name__ == "__main__":
    main()
