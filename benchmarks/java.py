"""Apache Kafka's Java client as the JVM reference row: Kafka's own perf tools
(``kafka-producer-perf-test``: org.apache.kafka.tools.ProducerPerformance, and
``kafka-consumer-perf-test``: ConsumerPerformance) from the jars kafkaio.testing.apache
fetched, run in a JVM of their own with the same workload as the Python clients.

Throughput is what the tool reports: the producer's from its first send to its last ack,
the consumer's from its first fetch to the last record (its ``fetch.nMsg.sec``: the group
join is left out, as the steady state of the Python consumers leaves out their start-up).
CPU per record is the whole JVM's (every thread, JVM start-up and JIT compilation
included: a JVM's fixed cost of about a second of CPU, 1 µs per record at 1M records),
peak RSS the JVM's.
"""

from __future__ import annotations

import re
import resource
import subprocess
import tempfile
import time

from benchmarks.common import payloads
from benchmarks.isolate import Metrics

PRODUCER = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER = "org.apache.kafka.tools.ConsumerPerformance"
HEAP_MB = 512


def unavailable_reason() -> str | None:
    from kafkaio.testing.apache import unavailable_reason as reason

    return reason()


def _command(main: str, *args: str) -> list[str]:
    from kafkaio.testing.apache import find_java, kafka_home

    java = find_java()
    if java is None:
        raise RuntimeError("Java is not installed: the Java client row needs Java 17+")
    libs = kafka_home() / "libs"
    return [java, f"-Xmx{HEAP_MB}m", "-cp", f"{libs}/*", main, *args]


def _run(command: list[str], timeout: float) -> tuple[str, float, float, float]:
    """The tool's stdout, its wall time, and its CPU seconds and peak RSS (MiB) (the only
    child of this process: RUSAGE_CHILDREN)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(
            f"{command[-1]} failed ({done.returncode}): {done.stderr[-2000:] or done.stdout[-2000:]}"
        )
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return done.stdout, wall, cpu, after.ru_maxrss / 1024


def produce(
    bootstrap: str, topic: str, size: int, codec: str, acks: str, records: int,
    linger_ms: int, batch_size: int,
) -> Metrics:
    """ProducerPerformance sending `records` values of `size` bytes, cycling through the
    same distinct values as the Python clients (its --payload-file picks them at random)."""
    values = payloads(size)
    delimiter = "\x1e"  # a byte no payload holds (they are JSON text)
    if any(delimiter.encode() in v for v in values):
        raise ValueError("a payload holds the delimiter")
    with tempfile.NamedTemporaryFile(suffix=".payloads") as f:
        f.write(delimiter.encode().join(values))
        f.flush()
        out, wall, cpu, rss = _run(
            _command(
                PRODUCER,
                "--bootstrap-server", bootstrap,
                "--topic", topic,
                "--num-records", str(records),
                "--throughput", "-1",
                "--payload-file", f.name,
                "--payload-delimiter", delimiter,
                "--command-property",
                f"acks={acks}",
                f"linger.ms={linger_ms}",
                f"batch.size={batch_size}",
                f"compression.type={codec}",
                f"enable.idempotence={'true' if acks == 'all' else 'false'}",
            ),
            timeout=900,
        )
    # progress every 5 s, then the whole run: "1000000 records sent, 612745.1 records/sec
    # (58.44 MB/sec), 3.1 ms avg latency, ..."
    matches = re.findall(r"(\d+) records sent, ([\d.]+) records/sec", out)
    match = matches[-1] if matches else None
    if match is None or int(match[0]) != records:
        raise RuntimeError(f"ProducerPerformance said: {out[-2000:]}")
    rate = float(match[1])
    return {
        "msg_per_s": rate,
        "mb_per_s": rate * size / 1e6,
        "cpu_us_per_msg": cpu / records * 1e6,
        "records": float(records),
        "peak_rss_mib": rss,
        "whole_s": wall,
    }


def consume(bootstrap: str, topic: str, records: int, size: int, group: str) -> Metrics:
    """ConsumerPerformance: a group member (subscribe) reading `records` records from the
    start; msg/s from its first fetch to the last record."""
    out, wall, cpu, rss = _run(
        _command(
            CONSUMER,
            "--bootstrap-server", bootstrap,
            "--topic", topic,
            "--num-records", str(records),
            "--group", group,
            "--timeout", "30000",
        ),
        timeout=900,
    )
    lines = [line for line in out.splitlines() if line.strip()]
    header = next((i for i, line in enumerate(lines) if line.startswith("start.time")), None)
    if header is None or header + 1 >= len(lines):
        raise RuntimeError(f"ConsumerPerformance said: {out[-2000:]}")
    names = [n.strip() for n in lines[header].split(",")]
    cells = dict(zip(names, (c.strip() for c in lines[header + 1].split(",")), strict=False))
    got = int(cells["data.consumed.in.nMsg"])
    if got < records:
        raise RuntimeError(f"ConsumerPerformance read {got} of {records} records")
    rate = float(cells["fetch.nMsg.sec"])
    return {
        "msg_per_s": rate,
        "mb_per_s": rate * size / 1e6,
        "cpu_us_per_msg": cpu / records * 1e6,
        "records": float(records),
        "peak_rss_mib": rss,
        "startup_s": float(cells["rebalance.time.ms"]) / 1000,
        "whole_msg_per_s": records / wall,
    }
