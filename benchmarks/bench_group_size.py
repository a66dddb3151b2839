"""Group size: how long a group of 1 to 50 consumers takes to form, and to become stable
again when one more member joins, per client and group protocol.

Each case runs in a fresh child process, against one Apache Kafka broker with Kafka's
default group settings (GROUP_DEFAULTS: a real cluster's, not the tests' quick ones): a
kafkaio producer sends RATE msg/s round-robin over PARTITIONS partitions; N members of one
client (in-process: tasks, or threads for confluent-kafka) subscribe at once, then, once the
group is stable, one more joins. Stable = every partition is owned by exactly one member
(from the clients' rebalance callbacks), every member owns PARTITIONS / members partitions
(rounded down or up) and each partition's owner has received a record of it since it was
assigned. Formation = from the members' start to stable; join = from the new member's start
to stable; both end at the last partition's first record. Run
``python -m benchmarks.bench_group_size [--sizes 1,2,5] [--broker apache]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Iterable, Sequence

from benchmarks import clients
from benchmarks.bench_rebalance import produce_steadily
from benchmarks.clients import CLASSIC, CONSUMER_PROTOCOL, MemberSpec, run_member
from benchmarks.common import APACHE, BenchBroker, add_broker_argument, int_list
from benchmarks.isolate import ChildError, Metrics, run_isolated
from benchmarks.report import Row, median_row, note, print_suite

SUITE = "scale: group size"
PARTITIONS = 100
RATE = 2000  # msg/s over all partitions: a record of each partition every 50 ms
SIZES = (1, 2, 5, 10, 20, 50)
STABLE_TIMEOUT_S = 180.0
# Apache Kafka's defaults for the group settings that kafkaio.testing's broker shortens for
# quick tests (TEST_CONFIG): the classic protocol's initial rebalance delay and the consumer
# protocol's (KIP-848) heartbeat interval and session timeout, with their lower bounds
GROUP_DEFAULTS = {
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.min.heartbeat.interval.ms": "5000",
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.min.session.timeout.ms": "45000",
}
# the classic members' session and heartbeat: the Java client's defaults, for every client
SESSION_TIMEOUT_MS = 45_000
HEARTBEAT_MS = 3000
COOPERATIVE = "cooperative-sticky"

# (case, client, protocol, classic assignor): aiokafka has no cooperative assignor (range,
# eager) and no KIP-848
CASES: tuple[tuple[str, str, str, str], ...] = (
    ("classic", clients.KAFKAIO, CLASSIC, COOPERATIVE),
    ("classic", clients.AIOKAFKA, CLASSIC, "range"),
    ("classic", clients.CONFLUENT, CLASSIC, COOPERATIVE),
    ("consumer (KIP-848)", clients.KAFKAIO, CONSUMER_PROTOCOL, ""),
    ("consumer (KIP-848)", clients.CONFLUENT, CONSUMER_PROTOCOL, ""),
)
NO_KIP848 = (
    "aiokafka 0.14 has no consumer group protocol (KIP-848) and no cooperative assignor: it "
    "has no consumer-protocol rows, and its classic rows use range (eager: every member "
    "gives up all its partitions in each rebalance)"
)


class NotStable(RuntimeError):
    """The group did not become stable in time."""


class GroupView:
    """What every member reported: its assignment (rebalance callbacks) and, per owned
    partition, when it first received a record of it since it was assigned."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.owned: dict[str, set[int]] = {}
        self.first: dict[tuple[str, int], float] = {}  # (member, partition) -> first record
        self.revoked = 0  # partitions given up (revoked or lost) by any member
        self._lock = threading.Lock()  # confluent-kafka's members report from their threads

    def spec(self, member: str, base: MemberSpec) -> MemberSpec:
        self.owned[member] = set()

        def moved(change: str, partitions: set[int], now: float) -> None:
            with self._lock:
                owned = self.owned[member]
                if change == "assigned":
                    owned |= partitions
                    for p in partitions:
                        self.first.pop((member, p), None)
                else:
                    self.revoked += len(partitions & owned)
                    owned -= partitions

        return MemberSpec(
            base.strategy,
            base.protocol,
            base.session_timeout_ms,
            base.heartbeat_interval_ms,
            moved,
        )

    def seen_by(self, member: str) -> clients.Seen:
        def seen(partition: int, count: int, now: float) -> None:
            with self._lock:
                if partition in self.owned[member]:
                    self.first.setdefault((member, partition), now)

        return seen

    def stable_since(self, members: Iterable[str]) -> float | None:
        """When the group became stable (the last owned partition's first record), or None
        while it is not: a partition unowned or owned twice, a member with more or fewer
        than its share, or an owner that has not received a record of its partition yet."""
        with self._lock:
            members = list(members)
            low, high = self.partitions // len(members), -(-self.partitions // len(members))
            owners: dict[int, str] = {}
            for member in members:
                owned = self.owned.get(member, set())
                if not low <= len(owned) <= high:
                    return None
                for p in owned:
                    if p in owners:
                        return None
                    owners[p] = member
            if len(owners) != self.partitions:
                return None
            times = [self.first.get((m, p)) for p, m in owners.items()]
            if any(t is None for t in times):
                return None
            return max(t for t in times if t is not None)


async def _stable(view: GroupView, members: Sequence[str], since: float, what: str) -> float:
    deadline = since + STABLE_TIMEOUT_S
    while True:
        stable = view.stable_since(members)
        if stable is not None:
            return stable - since
        if time.perf_counter() > deadline:
            raise NotStable(
                f"{what}: no stable assignment of {view.partitions} partitions over "
                f"{len(members)} members within {STABLE_TIMEOUT_S:.0f} s"
            )
        await asyncio.sleep(0.02)


async def _scenario(
    client: str, protocol: str, strategy: str, size: int, bootstrap: str, topic: str
) -> Metrics:
    view = GroupView(PARTITIONS)
    group = f"bench-group-size-{uuid.uuid4().hex[:8]}"
    base = MemberSpec(strategy, protocol, SESSION_TIMEOUT_MS, HEARTBEAT_MS)
    stop, stop_producer = threading.Event(), threading.Event()
    tasks: list[asyncio.Task[None]] = []

    def start(member: str) -> None:
        spec = view.spec(member, base)
        tasks.append(
            asyncio.create_task(
                run_member(client, bootstrap, topic, group, spec, view.seen_by(member), stop)
            )
        )

    async def watch(members: list[str], since: float, what: str) -> float:
        # a member that failed ends the wait at once with its error
        waiting = asyncio.create_task(_stable(view, members, since, what))
        done, _ = await asyncio.wait([waiting, *tasks], return_when=asyncio.FIRST_COMPLETED)
        if waiting not in done:
            waiting.cancel()
            for task in done:
                task.result()
            raise NotStable(f"{what}: a member stopped")
        return waiting.result()

    producer = asyncio.create_task(produce_steadily(bootstrap, topic, RATE, stop_producer, PARTITIONS))
    try:
        members = [f"m{i}" for i in range(size)]
        await asyncio.sleep(1.0)  # the producer's records flow before the group starts
        t_start, cpu_start = time.perf_counter(), time.process_time()
        for member in members:
            start(member)
        formation = await watch(members, t_start, f"{size} members forming")
        revoked_before = view.revoked
        t_join = time.perf_counter()
        start("new")
        join = await watch([*members, "new"], t_join, f"member {size + 1} joining")
        moved = view.revoked - revoked_before
        cpu = time.process_time() - cpu_start
    finally:
        stop.set()
        stop_producer.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*tasks, producer), 120)
    return {"formation_s": formation, "join_s": join, "moved": float(moved), "cpu_s": cpu}


def measure_group(
    client: str, protocol: str, strategy: str, size: int, bootstrap: str, topic: str
) -> Metrics:
    """Child: `size` members of `client` form a group, then one more joins."""
    clients._prepare(client)
    return asyncio.run(_scenario(client, protocol, strategy, size, bootstrap, topic))


def suite(
    sizes: Sequence[int] = SIZES,
    runs: int = 1,
    bootstrap: str | None = APACHE,
    cases: Sequence[tuple[str, str, str, str]] = CASES,
) -> list[Row]:
    names = clients.available(tuple(dict.fromkeys(c for _, c, _, _ in cases)), bootstrap)
    note(NO_KIP848)
    samples: dict[tuple[str, str], list[Metrics]] = {}
    with BenchBroker(bootstrap, apache_config=GROUP_DEFAULTS) as broker:
        for size in sizes:
            for round_ in range(runs):
                ordered = cases if round_ % 2 == 0 else cases[::-1]
                for protocol_name, client, protocol, strategy in ordered:
                    if client not in names:
                        continue
                    case = f"{size} member" + "s" * (size != 1) + f", {protocol_name}"
                    topic = broker.new_topic("bench-group-size", PARTITIONS)
                    try:
                        metrics = run_isolated(
                            measure_group,
                            client,
                            protocol,
                            strategy,
                            size,
                            broker.bootstrap,
                            topic,
                            timeout=2 * STABLE_TIMEOUT_S + 180,
                        )
                    except ChildError as exc:
                        last = str(exc).strip().splitlines()[-1]
                        note(f"group size, {case}, {client}: not measured: {last}")
                        continue
                    samples.setdefault((case, client), []).append(metrics)
    rows = [median_row(SUITE, case, client, runs_) for (case, client), runs_ in samples.items()]
    order = {(c, p): i for i, (p, c, _, _) in enumerate(CASES)}
    return sorted(
        rows,
        key=lambda r: (
            int(r.case.split()[0]),
            "KIP-848" in r.case,
            order.get((r.client, r.case.split(", ", 1)[1]), 0),
        ),
    )


def describe(sizes: Sequence[int] = SIZES, runs: int = 1) -> str:
    settings = ", ".join(f"{k}={v}" for k, v in GROUP_DEFAULTS.items())
    return (
        f"Group size: {', '.join(map(str, sizes))} members of one client (in one process) "
        f"subscribe at once to a topic of {PARTITIONS} partitions that a kafkaio producer "
        f"feeds with {RATE:,} msg/s (100 B, round-robin); then one more member joins. "
        "Formation and join: seconds until every partition is owned by exactly one member, "
        "the members hold equal shares, and each owner has received a record of each of its "
        "partitions; moved: partitions revoked during the join; CPU: the whole process's "
        "(every member and the producer) from the members' start to the end of the join. "
        "Classic: cooperative-sticky "
        f"(aiokafka: range), session_timeout_ms={SESSION_TIMEOUT_MS}, "
        f"heartbeat_interval_ms={HEARTBEAT_MS} (the Java client's defaults); consumer "
        f"(KIP-848): the broker's uniform assignor. Broker group settings: {settings} "
        f"(Apache Kafka's defaults). {runs} run(s) per case."
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int_list, default=SIZES)
    parser.add_argument("--runs", type=int, default=1)
    add_broker_argument(parser)
    parser.set_defaults(bootstrap=APACHE)
    args = parser.parse_args(argv)
    print_suite(describe(args.sizes, args.runs), suite(args.sizes, args.runs, args.bootstrap))


if __name__ == "__main__":
    main()
