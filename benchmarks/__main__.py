"""Run every benchmark: ``python -m benchmarks`` (``make bench``)."""

from __future__ import annotations

from benchmarks import bench_consume, bench_produce, bench_records


def main() -> None:
    print("## Record codec (ns per record, median)\n")
    bench_records.main()
    print("\n## Produce\n")
    bench_produce.main()
    print("\n## Consume\n")
    bench_consume.main()


if __name__ == "__main__":
    main()
