"""Produce throughput: kafkaio, aiokafka, confluent-kafka (sync and aio), kafka-python and
the broker ceilings (pre-built batches, 5 or 1 requests in flight, see ceiling.py), each in
a fresh child process against the same broker (a fresh embedded Tansu per run).

Run ``python -m benchmarks.bench_produce [-n N] [--runs R] [--quick] [--case SIZE,CODEC,ACKS]
[--client NAME]``; prints a markdown
table (msg/s, MB/s, client CPU µs/record incl. librdkafka's threads, peak RSS of the child).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace

from benchmarks import clients
from benchmarks.clients import ProduceSpec
from benchmarks.common import (
    PAYLOADS,
    BenchBroker,
    add_broker_argument,
    in_turn,
    warm_clients,
)
from benchmarks.isolate import Metrics, run_isolated
from benchmarks.report import NOTES, Row, median_row, suite_table

# the broker's limits, with 5 requests in flight and with 1: see ceiling.py
CLIENTS = (
    clients.KAFKAIO,
    clients.KAFKAIO_ENQUEUE,
    *clients.PEERS[1:],
    clients.CONFLUENT_5,
    clients.JAVA,
    clients.CEILING,
    clients.ORDERED_CEILING,
)


@dataclass(frozen=True, slots=True)
class Case:
    size: int
    codec: str
    acks: str
    records: int
    runs: int
    enqueue_row: bool = False  # also kafkaio with `await enqueue()` per record
    partitions: int = 1
    batch_size: int = 16384

    @property
    def name(self) -> str:
        where = "" if self.partitions == 1 else f", {self.partitions} partitions"
        batch = "" if self.batch_size == 16384 else f", batch_size={self.batch_size}"
        return f"{self.size:,} B, {self.codec}, acks={self.acks}{where}{batch}"


def cases(quick: bool, records: int | None = None, runs: int | None = None) -> list[Case]:
    """Full: 1M x 100 B with none and lz4 (`runs`, default 3), zstd and acks=all once;
    200k x 1 KiB uncompressed `runs` times (its ratio is the one nearest a target, and one
    run on Tansu moved it by a quarter), lz4 and zstd once. `records` / `runs` override the
    100 B numbers (1 KiB cases send a fifth as many records)."""
    if quick:
        n, r = records or 100_000, runs or 1
        return [Case(100, "none", "1", n, r, enqueue_row=True), Case(100, "lz4", "all", n, r)]
    n, r = records or 1_000_000, runs or 3
    once = max(1, r // 3)
    return [
        Case(100, "none", "1", n, r, enqueue_row=True),
        Case(100, "lz4", "1", n, r),
        Case(100, "zstd", "1", n, once),
        Case(100, "none", "all", n, once),
        Case(1024, "none", "1", max(1, n // 5), r),
        *(Case(1024, codec, "1", max(1, n // 5), once) for codec in ("lz4", "zstd")),
    ]


def measure(broker: BenchBroker, client: str, case: Case) -> Metrics:
    broker.fresh()  # memory storage: an empty broker for every run
    topic = broker.new_topic("bench-produce", case.partitions)
    spec = ProduceSpec(
        case.size, case.codec, case.acks, case.records, batch_size=case.batch_size
    )
    return run_isolated(clients.measure_produce, client, broker.bootstrap, topic, spec)


def suite(
    case_list: list[Case], bootstrap: str | None = None, only: tuple[str, ...] = CLIENTS
) -> list[Row]:
    """Every client (of `only`) on every case, `case.runs` times with the clients
    interleaved (on Apache Kafka or an external broker after an unrecorded run of each on
    the first case); medians."""
    names = clients.available(tuple(c for c in CLIENTS if c in only), bootstrap)
    samples: dict[tuple[str, str], list[Metrics]] = {}
    with BenchBroker(bootstrap) as broker:
        warm_clients(broker, names, lambda name: measure(broker, name, case_list[0]))
        rounds = max(c.runs for c in case_list)
        for round_ in range(rounds):
            for case in case_list:
                if round_ >= case.runs:
                    continue
                for name in in_turn(names, round_):
                    if name == clients.KAFKAIO_ENQUEUE and not case.enqueue_row:
                        continue
                    metrics = measure(broker, name, case)
                    samples.setdefault((case.name, name), []).append(metrics)
    return [median_row("produce", case, name, runs) for (case, name), runs in samples.items()]


def describe(case_list: list[Case]) -> str:
    sizes = ", ".join(f"{c.records:,} x {c.name}" for c in case_list)
    return (
        "Produce: one partition unless a case says more (keyless records: each client's "
        "default partitioner spreads them), linger_ms=5, batch_size=16384 unless a case says "
        "otherwise (the same for every client), idempotence with acks=all; "
        f"values cycle through {PAYLOADS:,} distinct JSON events (compressible as "
        "application logs are). kafkaio calls produce() (an `await enqueue()` when it says "
        "the buffer is full) and awaits once every 1,024 records; `kafkaio (await enqueue)` "
        "awaits enqueue() per record; aiokafka and confluent-kafka's AIOProducer await "
        "every send/produce; the sync clients call theirs (confluent-kafka polls every "
        "1,000). Then each flushes; wall time includes client start and the final flush; "
        f"each run in a fresh child process. Cases: {sizes}."
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", "--records", type=int, default=None)
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--quick", action="store_true", help="two cases, one run")
    parser.add_argument(
        "--case",
        action="append",
        metavar="SIZE,CODEC,ACKS",
        help="only these cases (e.g. 100,lz4,1); the full mode's record counts and runs",
    )
    parser.add_argument(
        "--client", action="append", choices=CLIENTS, help="only these clients (repeatable)"
    )
    parser.add_argument(
        "--partitions",
        type=int,
        default=1,
        help="partitions of each case's topic (default 1; the issue's reference run used 3)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=16384,
        help="every client's batch size in bytes (default 16384, Java's and aiokafka's default)",
    )
    add_broker_argument(parser)
    args = parser.parse_args(argv)
    case_list = cases(args.quick, args.records, args.runs)
    case_list = [
        replace(c, partitions=args.partitions, batch_size=args.batch_size) for c in case_list
    ]
    if args.case:
        wanted = [tuple(c.split(",")) for c in args.case]
        case_list = [c for c in case_list if (str(c.size), c.codec, c.acks) in wanted]
        if args.runs:  # --runs applies to every chosen case
            case_list = [replace(c, runs=args.runs) for c in case_list]
    print(describe(case_list))
    only = tuple(args.client) if args.client else CLIENTS
    print(suite_table(suite(case_list, args.bootstrap, only)))
    for text in sorted(NOTES):
        print(f"\nNote: {text}.")


if __name__ == "__main__":
    main()
