"""Consume throughput: kafkaio (getmany and ``async for``), aiokafka, confluent-kafka (sync
and AIOConsumer) and kafka-python read the same pre-filled topic, assign mode, from the start.

One broker; a topic per compression is filled once (with confluent-kafka), then each client
reads all N records in a fresh child process, clients interleaved. Run
``python -m benchmarks.bench_consume [-n N] [--runs R] [--compression C] [--profile]``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats

from benchmarks import clients
from benchmarks.common import BenchBroker, add_broker_argument, fill, in_turn, readable
from benchmarks.isolate import Metrics, Phases, run_isolated
from benchmarks.report import NOTES, Row, median_row, suite_table

VALUE_SIZE = 100
PARTITIONS = 4
COMPRESSIONS = ("none", "lz4", "zstd")
CLIENTS = (clients.KAFKAIO, clients.KAFKAIO_ITER, *clients.PEERS[1:])


def suite(
    records: int,
    runs: dict[str, int],
    bootstrap: str | None = None,
) -> list[Row]:
    """Every client reads `records` records per compression (the keys of `runs`), that
    many times with the clients interleaved; one row of medians per cell."""
    names = clients.available(CLIENTS, bootstrap)
    samples: dict[tuple[str, str], list[Metrics]] = {}
    with BenchBroker(bootstrap) as broker:
        topics = {}
        for compression in runs:
            topic = broker.new_topic(f"bench-consume-{compression}", PARTITIONS)
            fill(broker.bootstrap, topic, compression, records, VALUE_SIZE, PARTITIONS)
            topics[compression] = topic, readable(broker, topic, PARTITIONS, records)
        for round_ in range(max(runs.values())):
            for compression, (topic, wanted) in topics.items():
                if round_ >= runs[compression]:
                    continue
                for name in in_turn(names, round_):
                    metrics = run_isolated(
                        clients.measure_consume,
                        name,
                        broker.bootstrap,
                        topic,
                        PARTITIONS,
                        wanted,
                        VALUE_SIZE,
                    )
                    samples.setdefault((compression, name), []).append(metrics)
    return [
        median_row("consume", f"{VALUE_SIZE} B, {compression}", name, runs_)
        for (compression, name), runs_ in samples.items()
    ]


def describe(records: int, runs: dict[str, int]) -> str:
    counts = ", ".join(f"{codec} {n}" for codec, n in runs.items())
    return (
        f"Consume: {records:,} x {VALUE_SIZE} B records in {PARTITIONS} partitions, assign "
        "mode from the beginning, every value touched; msg/s, MB/s and CPU per record from "
        "the first record to the last (steady state), start-up (client creation to the first "
        "record) and close apart, and the whole run's msg/s; each run in a fresh child "
        f"process; runs per compression: {counts}."
    )


def profile_kafkaio(records: int, compression: str, top: int = 25) -> str:
    """cProfile of kafkaio's getmany loop (in this process), sorted by own time."""
    with BenchBroker() as broker:
        topic = broker.new_topic("bench-profile", PARTITIONS)
        fill(broker.bootstrap, topic, compression, records, VALUE_SIZE, PARTITIONS)
        profiler = cProfile.Profile()
        profiler.enable()
        phases = Phases()
        asyncio.run(
            clients._consume_kafkaio(broker.bootstrap, topic, PARTITIONS, records, phases)
        )
        profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", "--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--compression", action="append", choices=COMPRESSIONS)
    parser.add_argument("--profile", action="store_true", help="cProfile the kafkaio consumer")
    add_broker_argument(parser)
    args = parser.parse_args(argv)
    compressions = tuple(args.compression or COMPRESSIONS)
    if args.profile:
        print("```\n" + profile_kafkaio(args.records, compressions[0]) + "```")
        return
    runs = dict.fromkeys(compressions, args.runs)
    print(describe(args.records, runs))
    print(suite_table(suite(args.records, runs, args.bootstrap)))
    for text in sorted(NOTES):
        print(f"\nNote: {text}.")


if __name__ == "__main__":
    main()
