"""Latency at a steady rate: produce→ack and end to end (produce→consume) in one run.

Each client (in a fresh child process) runs one producer and one consumer of its own
library on a new one-partition topic; the producer sends 100-byte records stamped with their
send time at R msg/s (default 1,000) for S seconds, acks=1, linger_ms=0 for every client;
the consumer notes when the application receives each record. A second child runs the
producer alone (produce→ack without the consumer's Fetches reaching the same broker).
Prints p50/p99/p99.9/max in ms.
Run ``python -m benchmarks.bench_latency [--seconds S] [--rate R] [--runs N]
[--clients kafkaio,aiokafka] [--no-producer-alone] [--pin]`` (the last three for an A/B of
one case; ``--pin`` puts an embedded broker on a core of its own, the clients on the others).
"""

from __future__ import annotations

import argparse

from benchmarks import clients
from benchmarks.common import MOCK, BenchBroker, add_broker_argument, in_turn, pin_broker
from benchmarks.isolate import Metrics, run_isolated
from benchmarks.report import NOTES, Row, median_row, suite_table

RATE = 1000
SECONDS = 20.0
SIZE = 100
WARM_UP = 200  # first records (connections, metadata) are left out
# Tansu 0.6 does not answer a waiting Fetch when a record arrives (it holds it until the
# wait is over), nor does librdkafka's mock cluster, so on the embedded brokers every
# consumer polls with a short wait; a Kafka broker answers at once, so an external cluster
# keeps the default of 500 ms.
TANSU_FETCH_WAIT_MS = 10
KAFKA_FETCH_WAIT_MS = 500
TANSU_FETCH_NOTE = (
    "Tansu 0.6 (and librdkafka's mock cluster) answers a waiting Fetch when its wait ends, "
    "not when a record arrives (on Tansu with the default fetch_max_wait_ms=500, end-to-end "
    "p50 was 85-135 ms and max 260-300 ms for every client), so on the embedded brokers the "
    "end-to-end case uses fetch_max_wait_ms="
    f"{TANSU_FETCH_WAIT_MS} for every client"
)
CLIENTS = clients.PEERS
PINNED_NOTE = (
    "latency (--pin): the embedded broker ran on a core of its own and the clients on the others"
)
CONFLUENT_AIO_BUFFER = (
    "confluent-kafka's AIOProducer buffers produce() calls and hands them to librdkafka in "
    "batches of 1,000 or after buffer_timeout (1 s by default), which its latency shows"
)


def suite(
    rate: int = RATE,
    seconds: float = SECONDS,
    runs: int = 1,
    bootstrap: str | None = None,
    only: tuple[str, ...] = CLIENTS,
    producer_alone: bool = True,
    pin: bool = False,
) -> list[Row]:
    """Every client of `only` in turn, `runs` times: with its consumer and (unless
    `producer_alone` is False) its producer alone; a row of medians per case and client.
    With `pin`, an embedded broker runs on a core of its own and the clients on the others
    (see `pin_broker`): an A/B of the mock cluster, whose thread otherwise runs on the
    client's core; Tansu, which keeps a core busy while a Fetch waits, saturates one."""
    names = clients.available(only, bootstrap)
    samples: dict[tuple[str, str], list[Metrics]] = {}
    base = f"{rate:,} msg/s, {SIZE} B, acks=1, linger_ms=0"
    wait = TANSU_FETCH_WAIT_MS if bootstrap in (None, MOCK) else KAFKA_FETCH_WAIT_MS
    with_consumer = {
        "ack_": f"produce→ack, {base}",
        "e2e_": f"produce→consume, {base}, fetch_max_wait_ms={wait}",
    }
    alone = {"ack_": f"produce→ack, producer alone, {base}"}
    plan = ((True, with_consumer), (False, alone)) if producer_alone else ((True, with_consumer),)
    with BenchBroker(bootstrap) as broker:
        cpus = pin_broker(broker.pid) if pin else None
        if cpus is not None:
            NOTES.add(PINNED_NOTE)
        for run in range(runs):
            for name in in_turn(names, run):
                for consume, cases in plan:
                    topic = broker.new_topic("bench-latency")
                    metrics = run_isolated(
                        clients.measure_latency,
                        name,
                        broker.bootstrap,
                        topic,
                        rate,
                        seconds,
                        SIZE,
                        WARM_UP,
                        wait,
                        broker.pid,
                        consume,
                        cpus=cpus,
                    )
                    for prefix, case in cases.items():
                        kept = {
                            k[len(prefix) :]: v for k, v in metrics.items() if k.startswith(prefix)
                        }
                        if kept.get("missing"):
                            NOTES.add(
                                f"{name}, {case}: {kept['missing']:.0f} records had no "
                                "measurement (not acknowledged or not received within 30 s)"
                            )
                        samples.setdefault((case, name), []).append(kept)
    if bootstrap in (None, MOCK):
        NOTES.add(TANSU_FETCH_NOTE)
    if clients.CONFLUENT_AIO in names:
        NOTES.add(CONFLUENT_AIO_BUFFER)
    return [median_row("latency", case, name, runs_) for (case, name), runs_ in samples.items()]


def describe(seconds: float = SECONDS, rate: int = RATE) -> str:
    return (
        f"Latency: each client's own producer and consumer, {rate:,} msg/s x {SIZE} B for "
        f"{seconds:g} s to one partition, acks=1, linger_ms=0 for every client (kafkaio's own "
        f"default is 5 ms); the first {WARM_UP} records are left out. produce→ack: from the "
        "send call to the delivery callback; produce→consume: from the send call to the "
        "consumer application receiving the record (same process, perf_counter). "
        "produce→ack, producer alone: the same producer in a child of its own, with no "
        "consumer fetching from the broker meanwhile. With several runs, the clients take "
        "turns, in reverse order every second run, and each figure is the median of the runs."
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=int, default=RATE)
    parser.add_argument("--seconds", type=float, default=SECONDS)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--clients",
        default=",".join(CLIENTS),
        help="comma-separated clients to measure, in this order (default: all)",
    )
    parser.add_argument(
        "--no-producer-alone",
        action="store_true",
        help="measure only each client's producer with its consumer in the process",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="run an embedded broker on a core of its own and the clients on the others "
        "(default: they share every core)",
    )
    add_broker_argument(parser)
    args = parser.parse_args(argv)
    only = tuple(name.strip() for name in args.clients.split(",") if name.strip())
    unknown = [name for name in only if name not in CLIENTS]
    if unknown:
        parser.error(f"--clients: unknown {unknown}; choose from {', '.join(CLIENTS)}")
    if not only:
        parser.error(f"--clients: name at least one of {', '.join(CLIENTS)}")
    print(describe(args.seconds, args.rate))
    rows = suite(
        args.rate,
        args.seconds,
        args.runs,
        args.bootstrap,
        only,
        not args.no_producer_alone,
        args.pin,
    )
    print(suite_table(rows))
    print("\np99 ms of each run, in the order run:")
    for row in rows:
        print(f"- {row.case} | {row.client}: " + ", ".join(f"{r['p99_ms']:.2f}" for r in row.runs))
    for text in sorted(NOTES):
        print(f"\nNote: {text}.")


if __name__ == "__main__":
    main()
