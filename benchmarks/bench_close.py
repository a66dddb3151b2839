"""Close time: how long a group member's ``close()`` takes once it has read a topic, per
client, in two situations: (a) right after the call that handed out the topic's last
record, (b) after three more idle polls of 100 ms.

A topic of one partition holds RECORDS records of 100 B. Each run, each client in a fresh
process (a JVM for the Java rows) runs three group members one after the other, each in a
new group (no auto-commit, reading from the beginning): the first is not timed (lazy
imports, class loading, JIT), the second times (a), the third (b). Every client keeps its
default fetch wait (500 ms: ``fetch_max_wait_ms``, ``fetch.wait.max.ms``,
``fetch.max.wait.ms``), which bounds how long the broker holds a fetch for a partition that
has no new records. Run ``python -m benchmarks.bench_close [--broker apache|tansu|HOST:PORT]
[--runs N]`` (default: an Apache Kafka broker started for the run, 5 runs).
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks import clients
from benchmarks.clients import CLASSIC, CONSUMER_PROTOCOL
from benchmarks.common import (
    APACHE,
    GROUP_HEARTBEAT_MS,
    GROUP_SESSION_TIMEOUT_MS,
    MOCK,
    BenchBroker,
    add_broker_argument,
    fill,
    in_turn,
)
from benchmarks.isolate import ChildError, Metrics, run_isolated
from benchmarks.report import Row, note, print_suite
from kafkaio.testing.errors import BrokerStartError

SUITE = "close"
# not a multiple of the Java client's max.poll.records (500): when its last poll hands out
# exactly that many, the Java client does not mark the drained fetch done and sends no
# fetch ahead, so it would have none in flight at close(); with any other count it has one
RECORDS = 999
IDLE_POLLS = 3
POLL_MS = 100
RUNS = 5
# what each member does before close(): the idle polls of the untimed one, (a), (b)
MEMBERS = (0, 0, IDLE_POLLS)

KAFKAIO_CONSUMER = "kafkaio (consumer protocol)"
JAVA_CLASSIC = clients.JAVA
JAVA_CONSUMER = "Java (kafka-clients, consumer protocol)"
# client -> (library, group protocol)
CLIENTS: dict[str, tuple[str, str]] = {
    clients.KAFKAIO: (clients.KAFKAIO, CLASSIC),
    KAFKAIO_CONSUMER: (clients.KAFKAIO, CONSUMER_PROTOCOL),
    clients.AIOKAFKA: (clients.AIOKAFKA, CLASSIC),
    clients.CONFLUENT: (clients.CONFLUENT, CLASSIC),
    JAVA_CLASSIC: (clients.JAVA, CLASSIC),
    JAVA_CONSUMER: (clients.JAVA, CONSUMER_PROTOCOL),
}
# what each library's close() does with its fetch session (KIP-227), from its source
FETCH_SESSION = {
    clients.KAFKAIO: (
        "closes it: a Fetch with epoch -1 on another idle connection to the broker (the group "
        "coordinator's, the bootstrap one), else once the fetch in flight is answered"
    ),
    clients.JAVA: "closes it: a Fetch with epoch -1 once the fetch in flight is answered",
    clients.AIOKAFKA: "has none: every Fetch is sessionless (session id 0, epoch -1)",
    clients.CONFLUENT: (
        "has none: librdkafka's Fetch is sessionless (session id 0, epoch -1; KIP-227 is "
        "not supported)"
    ),
}


async def _asyncio_member(consumer: Any, topic: str, idle: int, close: str) -> float:
    """Start `consumer` (kafkaio's or aiokafka's: the same getmany), subscribe, getmany()
    until the topic's RECORDS records are handed out, poll `idle` more times for POLL_MS,
    then time its `close` method."""
    await consumer.start()
    try:
        consumer.subscribe([topic])
        n, deadline = 0, time.monotonic() + 60
        while n < RECORDS:
            _in_time(n, deadline)
            batches = await consumer.getmany(timeout_ms=1000)
            n += sum(len(records) for records in batches.values())
        for _ in range(idle):
            await consumer.getmany(timeout_ms=POLL_MS)
    finally:
        start = time.perf_counter()
        await getattr(consumer, close)()
    return time.perf_counter() - start


def _options(bootstrap: str, group: str, protocol: str) -> dict[str, Any]:
    """kafkaio's and aiokafka's options (the same names) for a member of a new `group`."""
    options: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
    }
    if protocol == CONSUMER_PROTOCOL:  # the broker sets the session and heartbeats
        return {**options, "group_protocol": CONSUMER_PROTOCOL}
    return {
        **options,
        "session_timeout_ms": GROUP_SESSION_TIMEOUT_MS,
        "heartbeat_interval_ms": GROUP_HEARTBEAT_MS,
    }


async def _kafkaio(bootstrap: str, topic: str, group: str, idle: int, protocol: str) -> float:
    from kafkaio import Consumer

    consumer = Consumer(**_options(bootstrap, group, protocol))
    return await _asyncio_member(consumer, topic, idle, "close")


async def _aiokafka(bootstrap: str, topic: str, group: str, idle: int, protocol: str) -> float:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(**_options(bootstrap, group, protocol))
    return await _asyncio_member(consumer, topic, idle, "stop")


async def _confluent(bootstrap: str, topic: str, group: str, idle: int, protocol: str) -> float:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": GROUP_SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": GROUP_HEARTBEAT_MS,
        }
    )
    try:
        consumer.subscribe([topic])
        n, deadline = 0, time.monotonic() + 60
        while n < RECORDS:
            _in_time(n, deadline)
            messages = consumer.consume(num_messages=500, timeout=1.0)
            n += sum(1 for m in messages if m.error() is None)
        for _ in range(idle):
            consumer.consume(num_messages=500, timeout=POLL_MS / 1000)
    finally:
        start = time.perf_counter()
        consumer.close()
    return time.perf_counter() - start


def _in_time(n: int, deadline: float) -> None:
    if time.monotonic() > deadline:
        raise RuntimeError(f"read {n} of {RECORDS} records in 60 s")


Member = Callable[[str, str, str, int, str], Any]  # an awaitable's factory: close seconds
MEMBER_RUNS: dict[str, Member] = {
    clients.KAFKAIO: _kafkaio,
    clients.AIOKAFKA: _aiokafka,
    clients.CONFLUENT: _confluent,
}


def _metrics(seconds: Sequence[float]) -> Metrics:
    """(a) and (b) of the members' close seconds, the untimed first one left out."""
    if len(seconds) != len(MEMBERS):
        raise RuntimeError(f"{len(seconds)} close times, not {len(MEMBERS)}")
    return {"close_s": seconds[1], "idle_close_s": seconds[2]}


def measure_close(client: str, bootstrap: str, topic: str) -> Metrics:
    """Child: the members of MEMBERS of `client` (a CLIENTS key), one after the other."""
    library, protocol = CLIENTS[client]
    clients._prepare(library)
    group = f"bench-close-{uuid.uuid4().hex[:8]}"
    run = MEMBER_RUNS[library]
    return _metrics(
        [
            asyncio.run(run(bootstrap, topic, f"{group}-{i}", idle, protocol))
            for i, idle in enumerate(MEMBERS)
        ]
    )


def measure_java(client: str, bootstrap: str, topic: str) -> Metrics:
    """The members of MEMBERS in one JVM (Kafka's Java client, the repository's oracle)."""
    from kafkaio.testing.java import JavaClients

    _, protocol = CLIENTS[client]
    props = (
        {
            "session.timeout.ms": str(GROUP_SESSION_TIMEOUT_MS),
            "heartbeat.interval.ms": str(GROUP_HEARTBEAT_MS),
        }
        if protocol == CLASSIC
        else {}
    )
    seconds = JavaClients().close_times(
        bootstrap,
        topic,
        f"bench-close-{uuid.uuid4().hex[:8]}",
        RECORDS,
        MEMBERS,
        protocol=protocol,
        poll_ms=POLL_MS,
        props=props,
    )
    return _metrics(seconds)


def available(names: Sequence[str], broker: str | None) -> list[str]:
    """The clients of `names` that run on `broker` (a BenchBroker spec; a note for each one
    left out): the Java rows need a JDK and Apache Kafka's jars (kafkaio.testing.java) and
    run on Apache Kafka or an external cluster; the consumer protocol's rows not on Tansu."""
    python = clients.available(
        tuple(dict.fromkeys(CLIENTS[n][0] for n in names if CLIENTS[n][0] != clients.JAVA)),
        broker,
    )
    out = []
    for name in names:
        library, protocol = CLIENTS[name]
        if broker is None and protocol == CONSUMER_PROTOCOL:
            note(f"{name} is not measured on Tansu 0.6: it has no ConsumerGroupHeartbeat (KIP-848)")
            continue
        if library == clients.JAVA and broker in (None, MOCK):
            note(
                f"{name} is measured on Apache Kafka (--broker apache) or an external cluster "
                "(on Tansu 0.6 its member read no record within 60 s)"
            )
            continue
        if library != clients.JAVA:
            if library in python:
                out.append(name)
            continue
        from kafkaio.testing.java import unavailable_reason

        reason = unavailable_reason()
        if reason is None:
            out.append(name)
        else:
            note(f"{name} is not measured: {reason}")
    return out


def _cause(text: str) -> str:
    """The last line of an error's text that is not a stack frame (Python's or Java's)."""
    lines = [line.strip() for line in text.strip().splitlines()]
    causes = [line for line in lines if line and not line.startswith(("at ", "File ", "^"))]
    return causes[-1] if causes else text.strip()


def summary(client: str, runs: Sequence[Metrics]) -> Row:
    """The medians of (a) and (b) and their ranges."""
    import statistics

    metrics: Metrics = {}
    for key in ("close_s", "idle_close_s"):
        values = [r[key] for r in runs]
        metrics[key] = statistics.median(values)
        metrics[f"{key}_min"] = min(values)
        metrics[f"{key}_max"] = max(values)
    return Row(SUITE, f"{RECORDS:,} records, 1 partition", client, metrics, list(runs))


def suite(
    names: Sequence[str] = tuple(CLIENTS), runs: int = RUNS, bootstrap: str | None = APACHE
) -> list[Row]:
    chosen = available(names, bootstrap)
    samples: dict[str, list[Metrics]] = {}
    with BenchBroker(bootstrap) as broker:
        topic = broker.new_topic("bench-close")
        fill(broker.bootstrap, topic, "none", RECORDS, 100, 1)
        for round_ in range(runs):
            for name in in_turn(chosen, round_):
                try:
                    if CLIENTS[name][0] == clients.JAVA:
                        metrics = measure_java(name, broker.bootstrap, topic)
                    else:
                        metrics = run_isolated(
                            measure_close, name, broker.bootstrap, topic, timeout=300
                        )
                except (ChildError, RuntimeError, BrokerStartError) as exc:
                    note(f"close, {name}: not measured: {_cause(str(exc))}")
                    continue
                metrics.pop("peak_rss_mib", None)
                samples.setdefault(name, []).append(metrics)
    return [summary(name, samples[name]) for name in chosen if name in samples]


def describe(runs: int = RUNS) -> str:
    return (
        f"Close: a group member's close() once it has read a topic of {RECORDS:,} records "
        f"(1 partition, no auto-commit, a new group each time), (a) right after the call "
        f"that handed out the last record, (b) after {IDLE_POLLS} more idle polls of "
        f"{POLL_MS} ms; the median of {runs} run(s) and its range, each run in a fresh "
        "process after one untimed member; every client's default fetch wait (500 ms)."
    )


def fetch_sessions(names: Sequence[str]) -> str:
    """What each measured library does with its fetch session on close."""
    libraries = dict.fromkeys(CLIENTS[n][0] for n in names)
    return "\n".join(f"- {library}: {FETCH_SESSION[library]}" for library in libraries)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=RUNS, help=f"runs per client ({RUNS})")
    parser.add_argument(
        "--only", action="append", choices=tuple(CLIENTS), help="these clients (repeatable)"
    )
    add_broker_argument(parser)
    parser.set_defaults(bootstrap=APACHE)
    args = parser.parse_args(argv)
    names = args.only or tuple(CLIENTS)
    rows = suite(names, args.runs, args.bootstrap)
    print_suite(describe(args.runs), rows)
    print("\nFetch session on close (KIP-227):\n" + fetch_sessions([r.client for r in rows]))


if __name__ == "__main__":
    main()
