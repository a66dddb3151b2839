"""Consume throughput: kafkaio (getmany and ``async for``), aiokafka, confluent-kafka (sync
and AIOConsumer) and kafka-python read the same pre-filled topic, assign mode, from the start.

One broker; a topic per compression is filled once (with confluent-kafka), then each client
reads all N records in a fresh child process, clients interleaved. Run
``python -m benchmarks.bench_consume [-n N] [--runs R] [--compression C] [--mode assign|group]
[--client NAME] [--profile]``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import uuid

from benchmarks import clients
from benchmarks.common import BenchBroker, add_broker_argument, fill, in_turn, readable
from benchmarks.isolate import Metrics, Phases, run_isolated
from benchmarks.report import NOTES, Row, median_row, suite_table

VALUE_SIZE = 100
PARTITIONS = 4
COMPRESSIONS = ("none", "lz4", "zstd")
MODES = ("assign", "group")
CLIENTS = (clients.KAFKAIO, clients.KAFKAIO_ITER, *clients.PEERS[1:], clients.JAVA)


def suite(
    records: int,
    runs: dict[str, int],
    bootstrap: str | None = None,
    modes: tuple[str, ...] = ("assign",),
    only: tuple[str, ...] = CLIENTS,
) -> list[Row]:
    """Every client (of `only`) reads `records` records per compression (the keys of
    `runs`) and mode ("assign": every partition assigned; "group": the only member of a
    new group that subscribes), that many times with the clients interleaved; one row of
    medians per cell."""
    names = clients.available(tuple(c for c in CLIENTS if c in only), bootstrap)
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
                for mode in modes:
                    for name in in_turn(names, round_):
                        if name == clients.JAVA and mode != "group":
                            continue  # ConsumerPerformance subscribes: group mode only
                        group = f"bench-group-{uuid.uuid4().hex[:8]}" if mode == "group" else None
                        metrics = run_isolated(
                            clients.measure_consume,
                            name,
                            broker.bootstrap,
                            topic,
                            PARTITIONS,
                            wanted,
                            VALUE_SIZE,
                            group,
                        )
                        samples.setdefault((case_name(compression, mode), name), []).append(
                            metrics
                        )
    return [
        median_row("consume", case, name, runs_) for (case, name), runs_ in samples.items()
    ]


def case_name(compression: str, mode: str) -> str:
    return f"{VALUE_SIZE} B, {compression}" + (", group" if mode == "group" else "")


def describe(records: int, runs: dict[str, int], modes: tuple[str, ...] = ("assign",)) -> str:
    counts = ", ".join(f"{codec} {n}" for codec, n in runs.items())
    how = (
        "every partition assigned"
        + (
            " and, in the cases marked group, as the only member of a new group that "
            "subscribes (no auto-commit)"
            if "group" in modes
            else ""
        )
    )
    return (
        f"Consume: {records:,} x {VALUE_SIZE} B records in {PARTITIONS} partitions, {how}, "
        "from the beginning, every value touched; msg/s, MB/s and CPU per record from "
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
    parser.add_argument(
        "--mode", action="append", choices=MODES, help="assign (the default) and/or group"
    )
    parser.add_argument(
        "--client", action="append", choices=CLIENTS, help="only these clients (repeatable)"
    )
    add_broker_argument(parser)
    args = parser.parse_args(argv)
    compressions = tuple(args.compression or COMPRESSIONS)
    if args.profile:
        print("```\n" + profile_kafkaio(args.records, compressions[0]) + "```")
        return
    runs = dict.fromkeys(compressions, args.runs)
    modes = tuple(args.mode or ("assign",))
    only = tuple(args.client) if args.client else CLIENTS
    print(describe(args.records, runs, modes))
    print(suite_table(suite(args.records, runs, args.bootstrap, modes, only)))
    for text in sorted(NOTES):
        print(f"\nNote: {text}.")


if __name__ == "__main__":
    main()
