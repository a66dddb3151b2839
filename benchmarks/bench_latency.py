"""Produce latency at a steady rate: time from the produce call to the broker's ack.

Run ``python -m benchmarks.bench_latency [--seconds S] [--rate R]``. Each client sends
100-byte records at R msg/s (default 1,000) for S seconds to one Tansu partition, acks=1,
linger_ms=0 for every client (kafkaio's own default is 5 ms); prints p50/p99/max in ms.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from benchmarks.bench_produce import _create_topic, payload
from benchmarks.report import Row, median_row, suite_table

RATE = 1000
SECONDS = 10.0
WARM_UP = 200  # first records (connections, metadata) are left out

Latencies = list[float]
Client = Callable[[str, str, bytes, int, float], Coroutine[Any, Any, Latencies]]


async def _paced(
    send: Callable[[Callable[[], None]], Awaitable[None]], rate: int, seconds: float
) -> Latencies:
    """Call ``send(on_done)`` every 1/rate s; returns ack latencies in seconds."""
    latencies: Latencies = []
    loop = asyncio.get_running_loop()
    total = int(rate * seconds)
    start = loop.time()
    for i in range(total):
        delay = start + i / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        t0 = time.perf_counter()

        def done(t0: float = t0) -> None:
            latencies.append(time.perf_counter() - t0)

        await send(done)
    deadline = loop.time() + 30
    while len(latencies) < total and loop.time() < deadline:
        await asyncio.sleep(0.01)
    return latencies


async def kafkaio_latency(
    bootstrap: str, topic: str, value: bytes, rate: int, seconds: float
) -> Latencies:
    from kafkaio.producer import Producer

    async with Producer(bootstrap, acks="1", linger_ms=0) as producer:
        await producer.send(topic, b"warm-up")

        async def send(done: Callable[[], None]) -> None:
            future = await producer.enqueue(topic, value)
            future.add_done_callback(lambda _: done())

        return await _paced(send, rate, seconds)


async def aiokafka_latency(
    bootstrap: str, topic: str, value: bytes, rate: int, seconds: float
) -> Latencies:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
    await producer.start()
    try:
        await (await producer.send(topic, b"warm-up"))

        async def send(done: Callable[[], None]) -> None:
            future = await producer.send(topic, value)
            future.add_done_callback(lambda _: done())

        return await _paced(send, rate, seconds)
    finally:
        await producer.stop()


async def confluent_aio_latency(
    bootstrap: str, topic: str, value: bytes, rate: int, seconds: float
) -> Latencies:
    from confluent_kafka.aio import AIOProducer

    producer = AIOProducer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    try:
        await (await producer.produce(topic, b"warm-up"))

        async def send(done: Callable[[], None]) -> None:
            future = await producer.produce(topic, value)
            future.add_done_callback(lambda _: done())

        return await _paced(send, rate, seconds)
    finally:
        await producer.close()


def clients() -> dict[str, Client]:
    out: dict[str, Client] = {"kafkaio": kafkaio_latency, "aiokafka": aiokafka_latency}
    try:
        import confluent_kafka.aio  # noqa: F401

        out["confluent aio"] = confluent_aio_latency
    except ImportError:
        pass
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def suite(rate: int = RATE, seconds: float = SECONDS, runs: int = 1) -> list[Row]:
    from kafkaio.testing import TansuBroker

    samples: dict[str, list[dict[str, float]]] = {}
    with TansuBroker() as broker:
        for _ in range(runs):
            for name, client in clients().items():
                topic = f"lat-{uuid.uuid4().hex[:8]}"
                asyncio.run(_create_topic(broker.bootstrap, topic))
                latencies: Latencies = asyncio.run(
                    client(broker.bootstrap, topic, payload(100), rate, seconds)
                )[WARM_UP:]
                ms = [x * 1000 for x in latencies]
                samples.setdefault(name, []).append(
                    {
                        "p50_ms": statistics.median(ms),
                        "p99_ms": percentile(ms, 0.99),
                        "max_ms": max(ms),
                        "acked": float(len(ms)),
                    }
                )
    case = f"{rate:,} msg/s, 100 B, acks=1, linger_ms=0"
    return [median_row("latency", case, name, runs_) for name, runs_ in samples.items()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=int, default=RATE)
    parser.add_argument("--seconds", type=float, default=SECONDS)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args(argv)
    print(suite_table(suite(args.rate, args.seconds, args.runs)))


if __name__ == "__main__":
    main()
