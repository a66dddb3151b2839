"""Memory bounds of kafkaio: consumer RSS by fetch settings, producer RSS by buffer_memory,
and RSS over time while producing and then consuming millions of records (the scale cases).

Run ``python -m benchmarks.bench_memory [--scale N]``. Each case runs in a fresh child
process against one broker. The settings cases: the consumer reads 100,000 x 1 KiB records
with a slow application (it sleeps a little per batch, so fetched data piles up as far as
the settings allow); the producer enqueues 100,000 x 1 KiB records as fast as it can. The
scale cases: a producer with default settings writes N x 100 B records, then a consumer
with default settings reads them; RSS is sampled every 0.5 s. Start = RSS once the client
was started; growth = peak minus start.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from benchmarks.common import BenchBroker, add_broker_argument, fill, payloads, readable
from benchmarks.isolate import Meter, Metrics, RssSampler, rss_mib, run_isolated
from benchmarks.report import Row, median_row, suite_table

RECORDS = 100_000
VALUE = 1024
SCALE_VALUE = 100
PARTITIONS = 4
MIB = 1024 * 1024

CONSUMER_CASES: dict[str, dict[str, Any]] = {
    "consumer, 100,000 x 1 KiB, slow application, defaults (fetch_max_bytes 50 MiB, "
    "1 MiB/partition)": {},
    "consumer, 100,000 x 1 KiB, slow application, max_partition_fetch_bytes=256 KiB, "
    "fetch_max_bytes=fetch_buffer_max_bytes=1 MiB": {
        "max_partition_fetch_bytes": 256 * 1024,
        "fetch_max_bytes": 1 * MIB,
        "fetch_buffer_max_bytes": 1 * MIB,
    },
}
SCALE_SETTINGS = {
    "producer": "acks=1, other settings default (buffer_memory 32 MiB)",
    "consumer": "default settings",
}
PRODUCER_CASES: dict[str, dict[str, Any]] = {
    "producer, 100,000 x 1 KiB, buffer_memory=32 MiB (default)": {},
    "producer, 100,000 x 1 KiB, buffer_memory=4 MiB": {"buffer_memory": 4 * MIB},
}


async def _consume(
    bootstrap: str, topic: str, records: int, options: dict[str, Any], slow: bool
) -> Metrics:
    from kafkaio import Consumer, TopicPartition

    async with Consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", **options
    ) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        with RssSampler() as rss, Meter() as meter:
            n = 0
            while n < records:
                batches = await consumer.getmany(timeout_ms=1000, max_records=2000)
                n += sum(len(v) for v in batches.values())
                if slow:
                    await asyncio.sleep(0.002)  # a slow application: prefetched data waits
    return {**rss.summary(), "msg_per_s": records / meter.wall_s}


async def _produce(
    bootstrap: str, topic: str, records: int, options: dict[str, Any], size: int
) -> Metrics:
    from kafkaio.producer import Producer, WouldBlockError

    values = payloads(size)
    n = len(values)
    async with Producer(bootstrap, **options) as producer:
        await producer.send(topic, b"warm-up")
        with RssSampler() as rss, Meter() as meter:
            # produce() until the buffer is full, then enqueue() waits for room: the
            # buffer stays at buffer_memory, the most the producer holds
            produce, enqueue = producer.produce, producer.enqueue
            for i in range(records):
                try:
                    produce(topic, values[i % n])
                except WouldBlockError:
                    await enqueue(topic, values[i % n])
            await producer.flush()
    return {**rss.summary(), "msg_per_s": records / meter.wall_s}


def measure_memory(
    kind: str, bootstrap: str, topic: str, records: int, options: dict[str, Any], size: int
) -> Metrics:
    """Child: one consumer (`kind` "consumer" or "slow consumer") or producer run."""
    rss_mib()  # the interpreter and imports are in the start RSS of every case alike
    if kind == "producer":
        run = _produce(bootstrap, topic, records, {"acks": "1", **options}, size)
    else:
        run = _consume(bootstrap, topic, records, options, slow=kind == "slow consumer")
    return asyncio.run(run)


def _row_metrics(metrics: Metrics) -> Metrics:
    out = dict(metrics)
    # VmHWM is updated lazily by the kernel: a sample can be higher
    out["peak_rss_mib"] = max(out["peak_rss_mib"], out.pop("peak_sample_mib"))
    out["growth_mib"] = out["peak_rss_mib"] - out["start_rss_mib"]
    return out


def suite(runs: int = 1, scale: tuple[int, ...] = (), bootstrap: str | None = None) -> list[Row]:
    """The settings cases `runs` times, then one producer + consumer run per scale N."""
    samples: dict[str, list[Metrics]] = {}
    with BenchBroker(bootstrap) as broker:
        topic = broker.new_topic("bench-mem", PARTITIONS)
        fill(broker.bootstrap, topic, "none", RECORDS, VALUE, PARTITIONS)
        stored = readable(broker, topic, PARTITIONS, RECORDS)
        for _ in range(runs):
            for case, options in CONSUMER_CASES.items():
                m = run_isolated(
                    measure_memory, "slow consumer", broker.bootstrap, topic, stored, options, 0
                )
                samples.setdefault(case, []).append(_row_metrics(m))
            for case, options in PRODUCER_CASES.items():
                target = broker.new_topic("bench-mem-p")
                m = run_isolated(
                    measure_memory, "producer", broker.bootstrap, target, RECORDS, options, VALUE
                )
                samples.setdefault(case, []).append(_row_metrics(m))
        for n in scale:
            broker.fresh()
            target = broker.new_topic("bench-mem-scale", PARTITIONS)
            for kind in ("producer", "consumer"):
                count = n if kind == "producer" else readable(broker, target, PARTITIONS, n)
                m = run_isolated(
                    measure_memory, kind, broker.bootstrap, target, count, {}, SCALE_VALUE
                )
                case = f"{kind}, {n:,} x {SCALE_VALUE} B, {SCALE_SETTINGS[kind]}"
                samples.setdefault(case, []).append(_row_metrics(m))
    return [median_row("memory", case, "kafkaio", runs_) for case, runs_ in samples.items()]


def describe(scale: tuple[int, ...]) -> str:
    sizes = " and ".join(f"{n:,}" for n in scale)
    return (
        "Memory (kafkaio, each case in a fresh child process): settings cases with 100,000 x "
        f"1 KiB records; scale cases: a producer writes {sizes} x {SCALE_VALUE} B records, "
        "then a consumer reads them, RSS sampled every 0.5 s. Start = RSS once the client "
        "was started, peak = the child's peak RSS, end = RSS when the last record was acked "
        "or read, growth = peak - start."
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--scale", type=int, action="append", default=None, help="records of a scale case"
    )
    add_broker_argument(parser)
    args = parser.parse_args(argv)
    scale = tuple(args.scale or (1_000_000,))
    print(describe(scale))
    print(suite_table(suite(args.runs, scale, args.bootstrap)))


if __name__ == "__main__":
    main()
