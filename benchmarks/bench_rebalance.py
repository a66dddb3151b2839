"""Rebalance pause: a group of 2 consumers reads a steady stream, a 3rd joins, then one
leaves; how long consumption stops around each event, per client and assignment strategy.

Each case runs in a fresh child process: a kafkaio producer sends RATE msg/s round-robin
over PARTITIONS partitions; every member notes when it receives records of each partition.
Group pause = the longest interval in which no member received anything; partition gap =
the longest interval in which one partition was not consumed (the largest over partitions),
both from the event until the group is steady again plus SETTLE_S. Run
``python -m benchmarks.bench_rebalance [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Iterable

from benchmarks import clients
from benchmarks.clients import MemberSpec, Seen, run_member
from benchmarks.common import (
    GROUP_HEARTBEAT_MS,
    GROUP_SESSION_TIMEOUT_MS,
    BenchBroker,
    add_broker_argument,
    payload,
)
from benchmarks.isolate import ChildError, Metrics, run_isolated
from benchmarks.report import NOTES, Row, note, suite_table

PARTITIONS = 6
RATE = 2000
SETTLE_S = 4.0  # steady consumption measured before each event and after recovery
STEADY_TIMEOUT_S = 45.0

# (case, client, partition_assignment_strategy)
CASES: tuple[tuple[str, str, str], ...] = (
    ("kafkaio, range (eager)", clients.KAFKAIO, "range"),
    ("kafkaio, cooperative-sticky", clients.KAFKAIO, "cooperative-sticky"),
    ("aiokafka, range (eager)", clients.AIOKAFKA, "range"),
    ("confluent-kafka, range (eager)", clients.CONFLUENT, "range"),
    ("confluent-kafka, cooperative-sticky", clients.CONFLUENT, "cooperative-sticky"),
    ("confluent-kafka (aio), range (eager)", clients.CONFLUENT_AIO, "range"),
    ("kafka-python, range (eager)", clients.KAFKA_PYTHON, "range"),
)
QUICK_CASES = (CASES[0], CASES[2])  # kafkaio and aiokafka, eager


class NotSteady(RuntimeError):
    """The group did not reach steady consumption in time."""


class Timeline:
    """Receive events of every member: (perf_counter seconds, partition, member)."""

    def __init__(self) -> None:
        self.events: list[tuple[float, int, str]] = []
        self.owners: dict[int, str] = {}  # partition -> the member that received it last
        self.owner_changed = 0.0  # when a partition last reached another member

    def seen_by(self, member: str) -> Seen:
        def seen(partition: int, count: int, now: float) -> None:
            self.events.append((now, partition, member))
            if self.owners.get(partition) != member:
                self.owners[partition] = member
                self.owner_changed = now

        return seen

    def flowing(self, members: set[str], since: float) -> bool:
        """Did every partition reach one of `members`, and each member receive, since?"""
        recent = [(p, m) for t, p, m in reversed(self.events[-5000:]) if t >= since]
        return {p for p, m in recent if m in members} == set(range(PARTITIONS)) and {
            m for _, m in recent
        } >= members

    def longest_gap(self, start: float, end: float, partition: int | None = None) -> float:
        """Longest interval without a receive (of `partition`, or of any) in [start, end],
        counted from the last receive before `start`."""
        times = sorted(t for t, p, _ in self.events if partition is None or p == partition)
        before = [t for t in times if t < start]
        inside = [t for t in times if start <= t <= end]
        points = ([before[-1]] if before else [start]) + inside + [end]
        return max(b - a for a, b in zip(points, points[1:], strict=False))

    def partition_gap(self, start: float, end: float) -> float:
        return max(self.longest_gap(start, end, p) for p in range(PARTITIONS))


async def _steady(timeline: Timeline, members: set[str], after: float, what: str) -> float:
    deadline = time.perf_counter() + STEADY_TIMEOUT_S
    while True:
        now = time.perf_counter()
        if timeline.flowing(members, max(now - 1.0, after)):
            return now
        if now > deadline:
            got = {m for t, _, m in timeline.events if t >= after}
            raise NotSteady(
                f"{what}: the group did not consume every partition within "
                f"{STEADY_TIMEOUT_S:.0f} s (members that received records: {sorted(got)})"
            )
        await asyncio.sleep(0.1)


async def _settled(timeline: Timeline, members: set[str], quiet: float, what: str) -> None:
    """Wait until the group has moved no partition for `quiet` seconds (and all flow): a
    cooperative group may still be moving partitions, in rebalances of its own, after every
    partition flows once. A member leaving in the middle of one meets a Tansu 0.6 bug (the
    next generation's leader is the departed member); Kafka does not care, but the event
    should find a settled group."""
    deadline = time.perf_counter() + STEADY_TIMEOUT_S
    while True:
        now = time.perf_counter()
        if now - timeline.owner_changed >= quiet and timeline.flowing(members, now - 1.0):
            return
        if now > deadline:
            raise NotSteady(
                f"{what}: partitions still moved between members after {STEADY_TIMEOUT_S:.0f} s"
            )
        await asyncio.sleep(0.1)


async def produce_steadily(
    bootstrap: str, topic: str, rate: int, stop: threading.Event, partitions: int = PARTITIONS
) -> None:
    """`rate` records of 100 B a second round-robin over `partitions` until `stop`."""
    from kafkaio import Producer

    value = payload(100)
    async with Producer(bootstrap, acks="1", linger_ms=0) as producer:
        loop = asyncio.get_running_loop()
        start, i = loop.time(), 0
        while not stop.is_set():
            i += 1
            delay = start + i / rate - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await producer.enqueue(topic, value, partition=i % partitions)


async def _scenario(
    client: str, strategy: str, bootstrap: str, topic: str, rate: int, settle: float
) -> Metrics:
    timeline = Timeline()
    group = f"bench-rebalance-{uuid.uuid4().hex[:8]}"
    stops = {name: threading.Event() for name in ("producer", "A", "B", "C")}
    tasks: dict[str, asyncio.Task[None]] = {}

    def start(member: str) -> None:
        tasks[member] = asyncio.create_task(
            run_member(
                client,
                bootstrap,
                topic,
                group,
                MemberSpec(strategy),
                timeline.seen_by(member),
                stops[member],
            )
        )

    producer = asyncio.create_task(produce_steadily(bootstrap, topic, rate, stops["producer"]))
    try:
        start("A")
        start("B")
        steady_from = await _steady(timeline, {"A", "B"}, 0.0, "2 members")
        await asyncio.sleep(settle)
        await _settled(timeline, {"A", "B"}, settle, "2 members")
        t_join = time.perf_counter()
        start("C")
        await _steady(timeline, {"A", "B", "C"}, t_join, "3rd member joined")
        await asyncio.sleep(settle)
        await _settled(timeline, {"A", "B", "C"}, settle, "3rd member joined")
        t_leave = time.perf_counter()
        stops["A"].set()
        await tasks.pop("A")
        await _steady(timeline, {"B", "C"}, t_leave, "1st member left")
        await asyncio.sleep(settle)
        t_end = time.perf_counter()
    finally:
        for event in stops.values():
            event.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*tasks.values(), producer), 60)
    return {
        "steady_gap_ms": timeline.partition_gap(steady_from, t_join) * 1000,
        "join_pause_ms": timeline.longest_gap(t_join, t_leave) * 1000,
        "join_gap_ms": timeline.partition_gap(t_join, t_leave) * 1000,
        "leave_pause_ms": timeline.longest_gap(t_leave, t_end) * 1000,
        "leave_gap_ms": timeline.partition_gap(t_leave, t_end) * 1000,
    }


def measure_rebalance(
    client: str, strategy: str, bootstrap: str, topic: str, rate: int, settle: float
) -> Metrics:
    """Child: one scenario (2 members, a 3rd joins, the 1st leaves) of `client`."""
    return asyncio.run(_scenario(client, strategy, bootstrap, topic, rate, settle))


def suite(
    cases: Iterable[tuple[str, str, str]] = CASES,
    rate: int = RATE,
    settle: float = SETTLE_S,
    bootstrap: str | None = None,
) -> list[Row]:
    """One run per case (the pause is an event, not a rate: medians would need many)."""
    rows = []
    cases = list(cases)
    names = clients.available(tuple(dict.fromkeys(client for _, client, _ in cases)), bootstrap)
    with BenchBroker(bootstrap) as broker:
        for case, client, strategy in cases:
            if client not in names:
                continue
            topic = broker.new_topic("bench-rebalance", PARTITIONS)
            try:
                metrics = run_isolated(
                    measure_rebalance,
                    client,
                    strategy,
                    broker.bootstrap,
                    topic,
                    rate,
                    settle,
                    timeout=240,
                )
            except ChildError as exc:
                note(f"rebalance, {case}: not measured: {str(exc).strip().splitlines()[-1]}")
                continue
            metrics.pop("peak_rss_mib", None)
            rows.append(Row("rebalance", case, client, metrics, [metrics]))
    return rows


def describe(rate: int = RATE) -> str:
    return (
        f"Rebalance: {rate:,} msg/s (100 B, kafkaio producer) over {PARTITIONS} partitions; "
        "2 members, then a 3rd joins, then the 1st leaves (LeaveGroup on close); "
        f"session_timeout_ms={GROUP_SESSION_TIMEOUT_MS}, "
        f"heartbeat_interval_ms={GROUP_HEARTBEAT_MS} for every client, auto-commit on."
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="kafkaio and aiokafka only")
    parser.add_argument("--rate", type=int, default=RATE)
    add_broker_argument(parser)
    args = parser.parse_args(argv)
    print(describe(args.rate))
    rows = suite(QUICK_CASES if args.quick else CASES, args.rate, bootstrap=args.bootstrap)
    if rows:
        print(suite_table(rows))
    for text in sorted(NOTES):
        print(f"\nNote: {text}.")


if __name__ == "__main__":
    main()
