"""The cost of metrics: kafkaio produce and consume throughput with ``metrics_enabled`` on
(the default) and off (a null registry), interleaved runs on one embedded Tansu broker.

Also times one ``Sensor.record`` call and one ``metrics()`` snapshot. Prints a markdown table;
``suite()`` returns report rows (``python -m benchmarks`` style).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import time
import timeit
from collections.abc import Awaitable, Callable

from benchmarks.common import BenchBroker, fill
from benchmarks.report import Row, median_row

DEFAULT_RECORDS = 200_000
PARTITIONS = 4
VALUE_SIZE = 100
VALUE = (b"0123456789abcdef" * 8)[:VALUE_SIZE]


def _accepts_metrics_flag(cls: type) -> bool:
    return "metrics_enabled" in inspect.signature(cls.__init__).parameters


async def produce(bootstrap: str, topic: str, count: int, metrics: bool) -> int:
    from kafkaio import Producer

    options = {"metrics_enabled": metrics} if _accepts_metrics_flag(Producer) else {}
    async with Producer(bootstrap, linger_ms=5, acks=1, **options) as producer:
        for i in range(count):
            await producer.enqueue(topic, VALUE, partition=i % PARTITIONS)
        await producer.flush()
        if metrics and options:
            sent = producer.metrics().get("record-send-total", count)
            if sent != count:
                raise RuntimeError(f"record-send-total is {sent}, expected {count}")
    return count


async def consume(bootstrap: str, topic: str, count: int, metrics: bool) -> int:
    from kafkaio import Consumer, TopicPartition

    n = 0
    async with Consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", metrics_enabled=metrics
    ) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        while n < count:
            batches = await consumer.getmany(timeout_ms=1000)
            for records in batches.values():
                for r in records:
                    n += len(r.value) // VALUE_SIZE
        if metrics and consumer.metrics()["records-consumed-total"] != n:
            raise RuntimeError("records-consumed-total does not match the records read")
    return n


Runner = Callable[[str, str, int, bool], Awaitable[int]]


def _time(fn: Runner, bootstrap: str, topic: str, count: int, metrics: bool) -> dict[str, float]:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    got = asyncio.run(fn(bootstrap, topic, count, metrics))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    if got < count:
        raise RuntimeError(f"read {got} of {count} records")
    return {"msg_per_s": count / wall, "cpu_us_per_msg": cpu / count * 1e6}


def micro() -> dict[str, float]:
    """ns per Sensor.record and µs per metrics() snapshot of a consumer-sized registry."""
    from kafkaio.metrics import MetricsRegistry
    from kafkaio.metrics.connection import ConnectionMetrics
    from kafkaio.metrics.consumer import ConsumerMetrics

    registry = MetricsRegistry("bench", "consumer")
    m = ConsumerMetrics(registry)
    ConnectionMetrics(registry).bind_connection_count(lambda now: 2.0)
    lags = {("t", str(p)): 5.0 for p in range(PARTITIONS)}
    m.bind_gauges(
        lags=lambda now: lags,
        assigned_partitions=lambda now: float(PARTITIONS),
        last_poll_seconds_ago=lambda now: 0.0,
    )
    sensor = m.records_consumed
    loops = 1_000_000
    record_s = timeit.timeit("sensor.record(500, 1.0)", globals={"sensor": sensor}, number=loops)
    snaps = 2000
    snapshot_s = timeit.timeit(registry.snapshot, number=snaps)
    return {"record_ns": record_s / loops * 1e9, "snapshot_us": snapshot_s / snaps * 1e6}


def suite(count: int = DEFAULT_RECORDS, runs: int = 3) -> list[Row]:
    """Produce and consume `count` records `runs` times, metrics on and off interleaved."""
    samples: dict[tuple[str, str], list[dict[str, float]]] = {}
    with BenchBroker() as broker:
        source = broker.new_topic("bench-metrics-consume", PARTITIONS)
        fill(broker.bootstrap, source, "none", count, VALUE_SIZE, PARTITIONS)
        target = broker.new_topic("bench-metrics-produce", PARTITIONS)
        for metrics in (True, False):  # warm-up: imports and first connections
            _time(consume, broker.bootstrap, source, 1000, metrics)
        for _ in range(runs):
            for metrics in (True, False):
                label = "metrics on" if metrics else "metrics off"
                samples.setdefault(("consume", label), []).append(
                    _time(consume, broker.bootstrap, source, count, metrics)
                )
                samples.setdefault(("produce", label), []).append(
                    _time(produce, broker.bootstrap, target, count, metrics)
                )
    rows = [
        median_row("metrics", f"{what}, {VALUE_SIZE} B, none", f"kafkaio ({label})", runs_)
        for (what, label), runs_ in samples.items()
    ]
    rows.append(median_row("metrics", "micro", "kafkaio", [micro() for _ in range(3)]))
    return rows


def table(rows: list[Row]) -> str:
    lines = [
        "| case | client | msg/s (median) | client CPU µs/msg | runs msg/s |",
        "|---|---|---:|---:|---|",
    ]
    for row in rows:
        if row.case == "micro":
            continue
        runs = ", ".join(f"{r['msg_per_s']:,.0f}" for r in row.runs)
        lines.append(
            f"| {row.case} | {row.client} | {row.metrics['msg_per_s']:,.0f} | "
            f"{row.metrics['cpu_us_per_msg']:.2f} | {runs} |"
        )
    micro_rows = [r for r in rows if r.case == "micro"]
    if micro_rows:
        m = micro_rows[0].metrics
        lines.append("")
        lines.append(
            f"Sensor.record: {m['record_ns']:.0f} ns per call; metrics() snapshot of a "
            f"consumer ({PARTITIONS} partitions): {m['snapshot_us']:.0f} µs"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", "--records", type=int, default=DEFAULT_RECORDS)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    rows = suite(args.records, args.runs)
    print(
        f"## Metrics on vs off: {args.records:,} x {VALUE_SIZE}-byte records, {PARTITIONS} "
        f"partitions, one Tansu broker (memory storage), median of {args.runs} runs\n"
    )
    print(table(rows))
    on = {r.case: r.metrics["msg_per_s"] for r in rows if r.client.endswith("(metrics on)")}
    off = {r.case: r.metrics["msg_per_s"] for r in rows if r.client.endswith("(metrics off)")}
    for case in on:
        print(f"\n{case}: metrics on / off = {on[case] / off[case]:.3f}")


if __name__ == "__main__":
    main()
