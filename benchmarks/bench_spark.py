"""format("kafkaio") against Spark's own Kafka connector (format("kafka"), spark-sql-kafka-0-10
for the installed PySpark), on Apache Kafka, in a Spark cluster of two executor JVMs
(local-cluster[2,1,1024]: one core and 1 GiB each, a Python worker per core).

Run ``python -m benchmarks --only spark`` (or ``python -m benchmarks.bench_spark [--records N]
[--runs R] [--cases write,stream]``: ``--cases`` runs only some groups of cells, of write,
read, stream and latency). One Apache Kafka broker (kafkaio.testing.apache) holds two input topics of N
records (100 B and 1 KiB values, 12 partitions, no compression), filled once. Each run of a
connector is a fresh Spark application (a child process) measuring, in this order:

- batch write: ``spark.range(N, numPartitions=12)`` as (key string, value binary of the size)
  written to a new 12-partition topic (``mode("append")``, producer defaults);
- batch read: the input topic into Spark's ``noop`` sink (every row materialized);
- streaming availableNow: the 100 B input topic, one micro-batch, into ``noop``;
- streaming micro-batches: the same with maxOffsetsPerTrigger = N / 10 (ten micro-batches);
- latency: a query copying a topic to a topic with the same connector (trigger as fast as
  possible) while 200 records/s are produced; produce -> visible in the output topic, read by
  a kafkaio consumer (warm-up excluded).

rows/s = rows / wall time of the action (job scheduling included). For each cell the
application samples every executor's process tree (its JVM and its Python workers) every
0.5 s: peak PSS per executor (MiB; PSS so that forked Python workers' shared pages count
once), and CPU seconds of the executors and of the broker per row. The connectors take
turns (reversed every second run); the table gives medians.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.common import in_turn, latency_summary, process_cpu_seconds
from benchmarks.report import Row, median_row, note

CONNECTORS = ("kafkaio", "spark-sql-kafka")
FORMATS = {"kafkaio": "kafkaio", "spark-sql-kafka": "kafka"}
PARTITIONS = 12
SIZES = (100, 1024)
MASTER = "local-cluster[2,1,1024]"
LATENCY_RATE = 200  # records/s
LATENCY_WARMUP_S = 10.0
LATENCY_S = 30.0
MIB = 1024 * 1024
# --cases: the groups of cells, in the order a run measures them
CASES = ("write", "read", "stream", "latency")


def describe(records: int, runs: int, cases: tuple[str, ...] = CASES) -> str:
    only = "" if set(cases) == set(CASES) else f" (cells: {', '.join(cases)})"
    return (
        f"format(\"kafkaio\") vs Spark's Kafka connector (spark-sql-kafka-0-10), same PySpark, "
        f"{MASTER}, Apache Kafka (1 broker); {records:,} records per input topic over "
        f"{PARTITIONS} partitions; {runs} run(s) per connector, alternating; medians. rows/s "
        "= rows / wall time of the action; exec MiB = peak PSS of one executor (JVM + Python "
        "workers); CPU µs/row = the executors' CPU (and the broker's) per row" + only
    )


# -- the parent: broker, input topics, runs in turn ------------------------------------------


def parse_cases(text: str) -> tuple[str, ...]:
    """``write,stream`` -> the groups of cells to run, in CASES order; unknown ones refused."""
    asked = {c.strip() for c in text.split(",") if c.strip()}
    unknown = asked - set(CASES)
    if unknown or not asked:
        raise argparse.ArgumentTypeError(
            f"--cases takes a comma-separated list of {', '.join(CASES)}; got {text!r}"
        )
    return tuple(c for c in CASES if c in asked)


def suite(
    records: int, runs: int, bootstrap: str | None = None, cases: tuple[str, ...] = CASES
) -> list[Row]:
    from kafkaio.testing import spark_kafka
    from kafkaio.testing.apache import ApacheKafka, unavailable_reason

    reason = spark_kafka.unavailable_reason() or (None if bootstrap else unavailable_reason())
    if reason is not None:
        note(f"Spark suite skipped: {reason}")
        return []
    jars = [str(j) for j in spark_kafka.connector_jars()]
    cluster = None
    broker_pid = None
    if bootstrap is None:
        cluster = ApacheKafka(1, heap_mb=1024, config={"num.partitions": str(PARTITIONS)})
        cluster.start()
        bootstrap = cluster.bootstrap
        broker_pid = cluster.nodes[1].pid
        note(
            f"Spark suite: its own Apache Kafka {cluster.version} (one KRaft node, "
            "1 GiB heap, on loopback), not the broker named above"
        )
    else:
        note("Spark suite on an external cluster: broker CPU not measured")
    try:
        sizes = SIZES if "read" in cases else (100,) if "stream" in cases else ()
        inputs = {size: _fill_input(bootstrap, records, size) for size in sizes}
        results: dict[tuple[str, str], list[dict[str, float]]] = {}
        for round_ in range(runs):
            for connector in in_turn(CONNECTORS, round_):
                for case, metrics in _run_app(
                    connector, bootstrap, broker_pid, inputs, records, jars, cases
                ).items():
                    results.setdefault((case, connector), []).append(metrics)
    finally:
        if cluster is not None:
            cluster.stop()
    rows = []
    cases = list(dict.fromkeys(case for case, _ in results))
    for case in cases:
        for connector in CONNECTORS:
            runs_ = results.get((case, connector))
            if runs_:
                rows.append(median_row("spark", case, connector, runs_))
    return rows


def _fill_input(bootstrap: str, records: int, size: int) -> str:
    from benchmarks.common import create_topic, fill

    topic = f"spark-in-{size}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, PARTITIONS)
    began = time.perf_counter()
    fill(bootstrap, topic, "none", records, size, PARTITIONS)
    print(
        f"  filled {topic}: {records:,} x {size} B in {time.perf_counter() - began:.0f} s",
        flush=True,
    )
    return topic


def _run_app(
    connector: str,
    bootstrap: str,
    broker_pid: int | None,
    inputs: dict[int, str],
    records: int,
    jars: list[str],
    cases: tuple[str, ...],
) -> dict[str, dict[str, float]]:
    """One Spark application for `connector` in a child process; its cells' metrics."""
    spec = {
        "cases": list(cases),
        "connector": connector,
        "bootstrap": bootstrap,
        "broker_pid": broker_pid,
        "inputs": {str(k): v for k, v in inputs.items()},
        "records": records,
        "jars": jars,
    }
    root = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = dict(
        os.environ,
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PYTHONPATH=path,
    )
    with tempfile.TemporaryDirectory(prefix="kafkaio-bench-spark-") as tmp:
        out = Path(tmp) / "result.json"
        command = [sys.executable, "-m", "benchmarks.bench_spark", "--child", json.dumps(spec),
                   "--result", str(out)]
        began = time.perf_counter()
        done = subprocess.run(command, env=env, cwd=tmp, capture_output=True, text=True)
        if done.returncode != 0 or not out.exists():
            tail = (done.stdout + done.stderr)[-3000:]
            raise RuntimeError(f"the {connector} Spark application failed:\n{tail}")
        cells: dict[str, dict[str, float]] = json.loads(out.read_text())
    print(f"  {connector}: {time.perf_counter() - began:.0f} s", flush=True)
    for case, metrics in cells.items():
        shown = ", ".join(f"{k} {v:,.1f}" for k, v in metrics.items())
        print(f"    {case}: {shown}", flush=True)
    return cells


# -- the child: one Spark application ----------------------------------------------------------


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        tree.setdefault(ppid, []).append(int(name))
    return tree


def _descendants(root: int, tree: dict[int, list[int]]) -> list[int]:
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(tree.get(pid, ()))
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _pss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _tree_cpu(pid: int, tree: dict[int, list[int]]) -> float:
    """CPU seconds of `pid` and its descendants, reaped children included."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for p in _descendants(pid, tree):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15]) / tick
        except (OSError, IndexError, ValueError):
            continue
    return total


class _Executors:
    """Samples the executors (JVMs running CoarseGrainedExecutorBackend under this process)
    and their Python workers: peak PSS per executor, and CPU seconds."""

    def __init__(self, broker_pid: int | None) -> None:
        self._broker_pid = broker_pid
        self._peak = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def executors(self, tree: dict[int, list[int]]) -> list[int]:
        return [
            p
            for p in _descendants(os.getpid(), tree)
            if "CoarseGrainedExecutorBackend" in _cmdline(p)
        ]

    def cpu(self) -> tuple[float, float]:
        tree = _children()
        executors = sum(_tree_cpu(p, tree) for p in self.executors(tree))
        return executors, process_cpu_seconds(self._broker_pid) or 0.0

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            tree = _children()
            for executor in self.executors(tree):
                pss = sum(_pss_mib(p) for p in _descendants(executor, tree))
                self._peak = max(self._peak, pss)

    @contextmanager
    def measure(self, rows: int, payload: int, out: dict[str, float]) -> Iterator[None]:
        self._peak = 0.0
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        exec0, broker0 = self.cpu()
        self._thread.start()
        began = time.perf_counter()
        yield
        elapsed = time.perf_counter() - began
        self._stop.set()
        self._thread.join()
        exec1, broker1 = self.cpu()
        out.update(
            rows_per_s=rows / elapsed,
            mb_per_s=rows * payload / elapsed / 1e6,
            exec_cpu_us_per_row=(exec1 - exec0) * 1e6 / rows,
            broker_cpu_us_per_row=(broker1 - broker0) * 1e6 / rows,
            exec_peak_mib=self._peak,
        )


def _child(spec: dict[str, Any], result: Path) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import kafkaio.spark
    from benchmarks.common import create_topic

    connector, bootstrap = spec["connector"], spec["bootstrap"]
    fmt = FORMATS[connector]
    records = int(spec["records"])
    cases = set(spec["cases"])
    spark = (
        SparkSession.builder.master(MASTER)
        .appName(f"kafkaio-bench-{connector}")
        .config("spark.jars", ",".join(spec["jars"]))
        .config("spark.ui.enabled", "false")
        .config("spark.executor.memory", "1g")
        .config("spark.sql.shuffle.partitions", str(PARTITIONS))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    kafkaio.spark.register(spark)
    meter = _Executors(spec["broker_pid"])
    cells: dict[str, dict[str, float]] = {}
    checkpoints = Path(tempfile.mkdtemp(prefix="checkpoints-", dir="."))

    def reader() -> Any:
        return spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)

    # warm-up: a small write and read, so neither connector pays its first-use costs in a cell
    warm = f"spark-warm-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, warm, PARTITIONS)
    spark.range(0, 20_000, 1, PARTITIONS).selectExpr(
        "CAST(id AS STRING) AS key", "CAST(CAST(id AS STRING) AS BINARY) AS value"
    ).write.format(fmt).option("kafka.bootstrap.servers", bootstrap).option(
        "topic", warm
    ).mode("append").save()
    reader().option("subscribe", warm).load().write.format("noop").mode("overwrite").save()

    for size in SIZES:
        if "write" in cases:
            topic = f"spark-out-{size}-{uuid.uuid4().hex[:6]}"
            create_topic(bootstrap, topic, PARTITIONS)
            df = spark.range(0, records, 1, PARTITIONS).select(
                F.col("id").cast("string").alias("key"),
                F.concat(
                    F.lpad(F.col("id").cast("string"), 12, "0"), F.lit("x" * (size - 12))
                ).cast("binary").alias("value"),
            )
            out = cells.setdefault(f"batch write, {size} B", {})
            with meter.measure(records, size, out):
                df.write.format(fmt).option("kafka.bootstrap.servers", bootstrap).option(
                    "topic", topic
                ).mode("append").save()
            _delete_topic(bootstrap, topic)
        if "read" in cases:
            out = cells.setdefault(f"batch read, {size} B", {})
            with meter.measure(records, size, out):
                reader().option("subscribe", spec["inputs"][str(size)]).load().write.format(
                    "noop"
                ).mode("overwrite").save()

    streams = (
        ("streaming availableNow, 100 B", None),
        ("streaming 10 micro-batches, 100 B", records // 10),
    )
    for case, limit in streams if "stream" in cases else ():
        source = spec["inputs"]["100"]
        stream = (
            spark.readStream.format(fmt)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
        )
        if limit is not None:
            stream = stream.option("maxOffsetsPerTrigger", str(limit))
        out = cells.setdefault(case, {})
        with meter.measure(records, 100, out):
            query = (
                stream.load()
                .writeStream.format("noop")
                .option("checkpointLocation", str(checkpoints / uuid.uuid4().hex))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"{case}: {query.exception()}")
        read = sum(p["numInputRows"] for p in query.recentProgress)
        if read != records:
            raise RuntimeError(f"{case}: read {read} of {records} rows")

    if "latency" in cases:
        cells["latency, produce -> visible, 200 records/s"] = _latency(
            spark, fmt, bootstrap, checkpoints
        )
    spark.stop()
    result.write_text(json.dumps(cells))


def _delete_topic(bootstrap: str, topic: str) -> None:
    import anyio

    from kafkaio.admin import Admin

    async def main() -> None:
        async with Admin(bootstrap) as admin:
            await admin.delete_topics([topic])

    anyio.run(main)


def _latency(spark: Any, fmt: str, bootstrap: str, checkpoints: Path) -> dict[str, float]:
    """Copy a topic to a topic with `fmt` as fast as Spark triggers; latency from produce to
    visible in the output, measured by a kafkaio consumer in this process."""
    import anyio

    from benchmarks.common import create_topic
    from kafkaio import Consumer, Producer, TopicPartition

    src, dst = (f"spark-lat-{x}-{uuid.uuid4().hex[:6]}" for x in ("in", "out"))
    create_topic(bootstrap, src, PARTITIONS)
    create_topic(bootstrap, dst, PARTITIONS)
    query = (
        spark.readStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "value")
        .writeStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", dst)
        .option("checkpointLocation", str(checkpoints / uuid.uuid4().hex))
        .start()
    )
    latencies: list[float] = []

    async def main() -> None:
        total = LATENCY_WARMUP_S + LATENCY_S
        began = time.time()

        async def produce() -> None:
            async with Producer(bootstrap, linger_ms=0) as producer:
                i = 0
                while time.time() - began < total:
                    await producer.enqueue(src, str(time.time_ns()).encode(), partition=i % PARTITIONS)
                    i += 1
                    await anyio.sleep(max(0.0, began + i / LATENCY_RATE - time.time()))
                await producer.flush()

        async def consume() -> None:
            async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
                c.assign([TopicPartition(dst, p) for p in range(PARTITIONS)])
                while time.time() - began < total + 10:
                    batch = await c.getmany(timeout_ms=200)
                    now = time.time_ns()
                    for recs in batch.values():
                        for r in recs:
                            sent = int(r.value)
                            if sent >= (began + LATENCY_WARMUP_S) * 1e9:
                                latencies.append((now - sent) / 1e6)

        async with anyio.create_task_group() as tg:
            tg.start_soon(produce)
            tg.start_soon(consume)

    anyio.run(main)
    query.stop()
    summary = latency_summary(latencies)
    expected = LATENCY_RATE * LATENCY_S
    if summary.get("samples", 0) < 0.9 * expected:
        note(f"latency ({fmt}): {summary.get('samples', 0):.0f} of ~{expected:.0f} records seen")
    return {k: summary[k] for k in ("p50_ms", "p99_ms", "max_ms", "samples") if k in summary}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--bootstrap", default=None, help="an external Apache Kafka cluster")
    parser.add_argument(
        "--cases",
        type=parse_cases,
        default=CASES,
        help=f"run only these groups of cells, comma-separated, of {', '.join(CASES)} "
        "(default: all)",
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        _child(json.loads(args.child), args.result)
        return
    from benchmarks.report import suite_table

    rows = suite(args.records, args.runs, args.bootstrap, args.cases)
    print(describe(args.records, args.runs, args.cases))
    if rows:
        print(suite_table(rows))


if __name__ == "__main__":
    main()
