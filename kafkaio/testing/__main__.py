"""``python -m kafkaio.testing``: fetch Apache Kafka's jars (or Spark's Kafka connector), or
run a local test cluster."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Sequence
from types import FrameType

from kafkaio.testing.apache import (
    KAFKA_VERSION,
    ApacheKafka,
    build_class_archive,
    fetch_jars,
    jars_cached,
    unavailable_reason,
)
from kafkaio.testing.errors import BrokerStartError


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kafkaio.testing",
        description="Fetch Apache Kafka's jars with Maven, or run a local test cluster.",
    )
    parser.add_argument("--version", default=KAFKA_VERSION, help="Apache Kafka version")
    commands = parser.add_subparsers(dest="command", required=True)
    fetch = commands.add_parser(
        "fetch-kafka", help="fetch the jars into ~/.cache/kafkaio (idempotent)"
    )
    fetch.add_argument(
        "--if-possible",
        action="store_true",
        help="when Java 17+ or Maven is missing, say why and exit 0 (the tests then skip)",
    )
    fetch.add_argument(
        "--no-class-archive",
        action="store_true",
        help="do not record the broker's class-data-sharing archive (faster starts)",
    )
    spark = commands.add_parser(
        "fetch-spark-kafka",
        help="fetch Spark's Kafka connector for the installed PySpark (idempotent)",
    )
    spark.add_argument(
        "--if-possible",
        action="store_true",
        help="when PySpark, Java 17+ or Maven is missing, say why and exit 0",
    )
    run = commands.add_parser("run-kafka", help="run a cluster on 127.0.0.1 until Ctrl-C")
    run.add_argument("--brokers", type=int, default=1, help="number of brokers (default 1)")
    args = parser.parse_args(argv)
    if args.command == "fetch-kafka":
        reason = unavailable_reason(args.version)
        if reason is not None:
            print(f"Apache Kafka {args.version} not fetched: {reason}", file=sys.stderr)
            return 0 if args.if_possible else 1
        began = time.monotonic()
        cached = jars_cached(args.version)
        libs = fetch_jars(args.version)
        took = "" if cached else f" (fetched in {time.monotonic() - began:.1f} s)"
        print(f"Apache Kafka {args.version}: {libs}{took}")
        if not args.no_class_archive:
            build_class_archive(args.version)
        return 0
    if args.command == "fetch-spark-kafka":
        return _fetch_spark_kafka(args.if_possible)
    # SIGTERM (kill, a service manager, timeout) stops the cluster as Ctrl-C does: without
    # this the process ended at once and left the brokers' data (gigabytes after a
    # benchmark) in the temporary directory. An interrupt at any point, start-up and the
    # first prints included, stops the cluster (start() and the with block clean up) and
    # ends the command normally.
    signal.signal(signal.SIGTERM, _interrupt)
    with contextlib.suppress(KeyboardInterrupt):
        with ApacheKafka(args.brokers, version=args.version, keep_directory=True) as cluster:
            print(f"bootstrap {cluster.bootstrap} (started in {cluster.start_seconds or 0:.1f} s)")
            print(f"logs under {cluster.directory}; Ctrl-C or SIGTERM stops", flush=True)
            while cluster.running:
                time.sleep(1)
    return 0


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _fetch_spark_kafka(if_possible: bool) -> int:
    from kafkaio.testing import spark_kafka

    reason = spark_kafka.unavailable_reason()
    if reason is not None:
        print(f"Spark's Kafka connector not fetched: {reason}", file=sys.stderr)
        return 0 if if_possible else 1
    try:
        jars = spark_kafka.connector_jars()
    except BrokerStartError as exc:
        print(f"Spark's Kafka connector not fetched: {exc}", file=sys.stderr)
        return 0 if if_possible else 1
    print(f"spark-sql-kafka-0-10 {spark_kafka.pyspark_version()}: {', '.join(map(str, jars))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
