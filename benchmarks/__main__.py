"""Run every benchmark: ``python -m benchmarks [--quick] [--out DIR] [--only SUITE]
[--docs-chart PATH] [--broker tansu|apache|mock | --bootstrap HOST:PORT]`` (``make bench``); the
Spark suite only with ``--only spark``.

Prints each suite's table and writes results.json, results.md and results.png (when
matplotlib is installed) to ``--out`` (default build/bench); ``--docs-chart`` copies the
chart. Every client runs against the same broker (an embedded Tansu; ``--broker apache``:
one Apache Kafka broker started for the run; ``--broker mock``: librdkafka's mock cluster;
``--bootstrap`` or $KAFKAIO_BENCH_BOOTSTRAP: an external cluster), with the same N and
settings.
About 40 minutes on a shared 2-core machine (the scale suite about 15 of them); ``--quick``
under 4.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import (
    bench_close,
    bench_consume,
    bench_latency,
    bench_memory,
    bench_produce,
    bench_rebalance,
    bench_records,
    bench_scale,
    bench_spark,
)
from benchmarks.common import APACHE, BOOTSTRAP_ENV, BROKERS, MOCK
from benchmarks.report import NOTES, Row, environment, suite_table, write_report

SUITES = (
    "records", "produce", "consume", "latency", "rebalance", "close", "memory", "scale", "spark",
)
# spark (format("kafkaio") against Spark's Kafka connector on Apache Kafka, about 35 minutes)
# runs only when asked for: --only spark
DEFAULT_SUITES = tuple(s for s in SUITES if s != "spark")


def records_rows() -> list[Row]:
    rows = []
    for op, codec, ours, theirs in bench_records.run():
        case = f"{op}, {codec}"
        rows.append(Row("records", case, "kafkaio", {"ns_per_record": ours}))
        if theirs is not None:
            rows.append(Row("records", case, "aiokafka", {"ns_per_record": theirs}))
    return rows


Suite = tuple[str, Callable[[], list[Row]]]  # description, run


def plan(quick: bool, runs: int | None, bootstrap: str | None) -> dict[str, Suite]:
    """Each suite with its sizes: full mode 1M x 100 B per produce/consume cell, 3 runs."""
    main_runs = runs or (1 if quick else 3)
    once = max(1, main_runs // 3)
    produce_cases = bench_produce.cases(quick, runs=runs)
    consume_n = 200_000 if quick else 1_000_000
    consume_runs = (
        {"none": main_runs, "lz4": main_runs}
        if quick
        else {"none": main_runs, "lz4": main_runs, "zstd": once}
    )
    seconds = 3.0 if quick else 20.0
    rebalance_cases = bench_rebalance.QUICK_CASES if quick else bench_rebalance.CASES
    settle = 1.0 if quick else bench_rebalance.SETTLE_S
    scale = (1_000_000,) if quick else (1_000_000, 10_000_000)
    scale_n = 20_000 if quick else 200_000
    scale_curves = ("partitions",) if quick else bench_scale.CURVES
    spark_records = 200_000 if quick else 5_000_000
    spark_runs = runs or (1 if quick else 3)
    return {
        "records": ("Record codec: ns per record, one batch of 1,000 records.", records_rows),
        "produce": (
            bench_produce.describe(produce_cases),
            lambda: bench_produce.suite(produce_cases, bootstrap),
        ),
        "consume": (
            bench_consume.describe(consume_n, consume_runs, bench_consume.MODES),
            lambda: bench_consume.suite(consume_n, consume_runs, bootstrap, bench_consume.MODES),
        ),
        "latency": (
            bench_latency.describe(seconds),
            lambda: bench_latency.suite(seconds=seconds, runs=main_runs, bootstrap=bootstrap),
        ),
        "rebalance": (
            bench_rebalance.describe(),
            lambda: bench_rebalance.suite(rebalance_cases, settle=settle, bootstrap=bootstrap),
        ),
        "close": (
            bench_close.describe(main_runs),
            lambda: bench_close.suite(runs=main_runs, bootstrap=bootstrap),
        ),
        "memory": (
            bench_memory.describe(scale),
            lambda: bench_memory.suite(scale=scale, bootstrap=bootstrap),
        ),
        "scale": (
            " ".join(bench_scale.describe(c, scale_n, 1) for c in scale_curves),
            lambda: [
                row
                for curve in scale_curves
                for row in bench_scale.suite(curve, scale_n, 1, bootstrap)
            ],
        ),
        # Apache Kafka of its own (an external cluster with --bootstrap), never Tansu or the
        # mock cluster: Spark's connector needs a real broker
        "spark": (
            bench_spark.describe(spark_records, spark_runs),
            lambda: bench_spark.suite(
                spark_records, spark_runs, None if bootstrap in (None, MOCK, APACHE) else bootstrap
            ),
        ),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer cases, records and runs")
    parser.add_argument("--out", type=Path, default=Path("build/bench"))
    parser.add_argument("--runs", type=int, default=None, help="runs per main cell (default 3)")
    parser.add_argument(
        "--only", action="append", choices=SUITES, help="run only these suites (repeatable)"
    )
    parser.add_argument("--docs-chart", type=Path, default=None, help="also copy the chart here")
    parser.add_argument(
        "--bootstrap",
        default=os.environ.get(BOOTSTRAP_ENV) or None,
        help=f"an external cluster instead of the embedded Tansu (or ${BOOTSTRAP_ENV})",
    )
    parser.add_argument(
        "--broker",
        choices=BROKERS,
        default=None,
        help="the broker started for the run: tansu (the default, embedded, in memory), "
        "apache (one Apache Kafka broker, as the tests start it: Java 17+ and the jars "
        "from Maven Central, `make kafka-jars`) or mock (librdkafka's mock cluster, whose "
        "brokers do little work per request)",
    )
    args = parser.parse_args(argv)
    if args.broker is not None:
        if args.bootstrap:
            parser.error(
                "--broker picks an embedded broker: leave out --bootstrap (and "
                f"${BOOTSTRAP_ENV}) with it"
            )
        args.bootstrap = None if args.broker == "tansu" else args.broker
    env = environment(args.bootstrap)
    env["mode"] = f"{'quick' if args.quick else 'full'}" + (
        f", {args.runs} run(s) per main cell" if args.runs else ""
    )
    print("# kafkaio benchmarks\n")
    for key, value in env.items():
        print(f"- {key}: {value}")
    rows: list[Row] = []
    total = time.perf_counter()
    for name, (description, run) in plan(args.quick, args.runs, args.bootstrap).items():
        if name not in (args.only or DEFAULT_SUITES):
            continue
        start = time.perf_counter()
        suite_rows = run()
        rows += suite_rows
        print(f"\n## {name} ({time.perf_counter() - start:.0f} s)\n\n{description}\n")
        for kind in dict.fromkeys(r.suite for r in suite_rows):  # the scale suite has two
            print(suite_table([r for r in suite_rows if r.suite == kind]))
    print(f"\nTotal: {time.perf_counter() - total:.0f} s")
    for text in sorted(NOTES):
        print(f"\nNote: {text}.")
    written = write_report(rows, args.out, env)
    for path in written:
        print(f"wrote {path}")
    chart = args.out / "results.png"
    if args.docs_chart is not None:
        if chart in written:
            args.docs_chart.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(chart, args.docs_chart)
            print(f"wrote {args.docs_chart}")
        else:
            print(f"no chart for {args.docs_chart} (matplotlib missing or no throughput rows)")


if __name__ == "__main__":
    main()
