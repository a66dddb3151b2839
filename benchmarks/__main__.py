"""Run every benchmark: ``python -m benchmarks [--quick] [--out DIR]`` (``make bench``).

Prints each suite's table and writes results.json, results.md and results.png (when
matplotlib is installed) to ``--out`` (default build/bench). About 4-5 minutes by default
on a 2-core machine; ``--quick`` about 1.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import bench_consume, bench_latency, bench_memory, bench_produce, bench_records
from benchmarks.report import Row, environment, suite_table, write_report


def records_rows() -> list[Row]:
    rows = []
    for op, codec, ours, theirs in bench_records.run():
        case = f"{op}, {codec}"
        rows.append(Row("records", case, "kafkaio", {"ns_per_record": ours}))
        if theirs is not None:
            rows.append(Row("records", case, "aiokafka", {"ns_per_record": theirs}))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer cases, records and runs")
    parser.add_argument("--out", type=Path, default=Path("build/bench"))
    parser.add_argument("--runs", type=int, default=None, help="runs per cell (default 3)")
    parser.add_argument(
        "--only",
        action="append",
        choices=("records", "produce", "consume", "latency", "memory"),
        help="run only these suites (repeatable)",
    )
    args = parser.parse_args(argv)
    quick = args.quick
    runs = args.runs or (1 if quick else 3)
    env = environment()
    env["mode"] = f"{'quick' if quick else 'full'}, {runs} run(s) per cell"
    print("# kafkaio benchmarks\n")
    for key, value in env.items():
        print(f"- {key}: {value}")
    suites: dict[str, Callable[[], list[Row]]] = {
        "records": records_rows,
        "produce": lambda: bench_produce.suite(
            100_000 if quick else 200_000,
            runs,
            bench_produce.QUICK_CASES if quick else bench_produce.FULL_CASES,
        ),
        "consume": lambda: bench_consume.suite(200_000 if quick else 500_000, runs),
        "latency": lambda: bench_latency.suite(seconds=3.0 if quick else 10.0),
        "memory": bench_memory.suite,
    }
    rows: list[Row] = []
    for name, run in suites.items():
        if args.only and name not in args.only:
            continue
        start = time.perf_counter()
        suite_rows = run()
        rows += suite_rows
        print(f"\n## {name} ({time.perf_counter() - start:.0f} s)\n")
        print(suite_table(suite_rows))
    for note in sorted(bench_produce.NOTES):
        print(f"\nNote: {note}.")
    for path in write_report(rows, args.out, env):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
