"""kafkaio next to Apache Kafka's Java client (kafka-clients 4.4.0) on Apache Kafka.

The Java client judges: what kafkaio writes must read back byte for byte in Java (every
codec, transactions with aborts under read_committed), what Java writes must read back in
kafkaio, and kafkaio and Java consumers must share one group (classic range, classic
cooperative-sticky, the consumer protocol) or one share group with every record delivered
once and no partition owned by two members at a time.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
import pytest

from kafkaio import Consumer, Producer, ShareConsumer, TopicPartition
from kafkaio.admin import Admin
from kafkaio.admin.config_types import AlterConfigOp, ConfigResource, ConfigResourceType
from kafkaio.consumer import RebalanceListener
from kafkaio.errors import RebalanceInProgressError
from kafkaio.testing import BrokerInfo
from kafkaio.testing.java import JavaClients, JavaProcess, JavaRecord, java_value

pytestmark = pytest.mark.integration

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def kafkaio_value(i: int) -> bytes:
    """What the kafkaio producers below write for record i: text, then binary bytes."""
    return b"kio-%d-" % i + bytes((i * 13 + j) % 256 for j in range(64))


async def read_all_kafkaio(
    bootstrap: str,
    topic: str,
    partitions: int,
    expect: int,
    *,
    isolation_level: str = "read_uncommitted",
    settle_s: float = 2.0,
) -> list[Any]:
    """Every record of `topic` as kafkaio reads it (assigned, from the beginning): stop
    `settle_s` after `expect` records arrived (so extra records would be seen too)."""
    got: list[Any] = []
    async with Consumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        isolation_level=isolation_level,
    ) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        with anyio.fail_after(120):
            quiet_until: float | None = None
            while quiet_until is None or time.monotonic() < quiet_until:
                batches = await consumer.getmany(timeout_ms=200)
                for records in batches.values():
                    got.extend(records)
                if quiet_until is None and len(got) >= expect:
                    quiet_until = time.monotonic() + settle_s
    return got


# -- every codec, both directions -------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
async def test_java_reads_what_kafkaio_writes(
    apache_kafka: BrokerInfo, java_clients: JavaClients, unique_topic: str, codec: str
) -> None:
    await apache_kafka.create_topic(unique_topic, partitions=3)
    count = 3000
    async with Producer(apache_kafka.bootstrap, compression_type=codec, linger_ms=5) as p:
        futures = [
            await p.enqueue(
                unique_topic,
                kafkaio_value(i),
                key=b"key-%d" % (i % 11),
                headers=[("i", b"%d" % i), ("empty", b""), ("none", None)],
            )
            for i in range(count)
        ]
        await p.flush()
        partitions = {(await f).partition for f in futures}
    assert partitions == {0, 1, 2}
    records = await anyio.to_thread.run_sync(
        lambda: java_clients.read_all(apache_kafka.bootstrap, unique_topic, expect=count)
    )
    assert len(records) == count
    seen = {}
    for r in records:
        i = int(dict(r.headers)["i"])
        seen[i] = r
    assert sorted(seen) == list(range(count))
    for i, r in seen.items():
        assert r.value == kafkaio_value(i)
        assert r.key == b"key-%d" % (i % 11)
        assert r.headers == (("i", b"%d" % i), ("empty", b""), ("none", None))
    # per key, Java sees kafkaio's send order
    by_key: dict[bytes | None, list[int]] = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        by_key.setdefault(r.key, []).append(int(dict(r.headers)["i"]))
    assert all(order == sorted(order) for order in by_key.values())


@pytest.mark.parametrize("codec", CODECS)
async def test_kafkaio_reads_what_java_writes(
    apache_kafka: BrokerInfo, java_clients: JavaClients, unique_topic: str, codec: str
) -> None:
    await apache_kafka.create_topic(unique_topic, partitions=3)
    count = 3000
    report = await anyio.to_thread.run_sync(
        lambda: java_clients.produce(
            apache_kafka.bootstrap, unique_topic, count, key_mod=7, pad=100, compression=codec
        )
    )
    assert (report.acked, report.failed) == (count, 0)
    written = {(p, o): i for i, p, o in report.acks}
    got = await read_all_kafkaio(apache_kafka.bootstrap, unique_topic, 3, count)
    assert len(got) == count
    for r in got:
        i = written[(r.partition, r.offset)]
        assert r.value == java_value(i, 100)
        assert r.key == b"k%d" % (i % 7)
        assert list(r.headers) == [("i", b"%d" % i)]


# -- transactions ---------------------------------------------------------------------------


async def test_java_read_committed_sees_only_kafkaio_committed_transactions(
    apache_kafka: BrokerInfo, java_clients: JavaClients, unique_topic: str
) -> None:
    await apache_kafka.create_topic(unique_topic, partitions=2)
    committed: list[int] = []
    aborted: list[int] = []
    async with Producer(
        apache_kafka.bootstrap, transactional_id=f"txn-{unique_topic}", linger_ms=2
    ) as producer:
        await producer.init_transactions()
        for t in range(12):
            producer.begin_transaction()
            ids = list(range(t * 50, (t + 1) * 50))
            for i in ids:
                await producer.enqueue(unique_topic, kafkaio_value(i), key=b"k%d" % (i % 5))
            if t % 3 == 2:
                await producer.flush()  # written to the log, then aborted (not just dropped)
                await producer.abort_transaction()
                aborted += ids
            else:
                await producer.commit_transaction()
                committed += ids
    # non-transactional records after the last marker: the LSO must have moved past them
    async with Producer(apache_kafka.bootstrap) as producer:
        for i in range(1000, 1010):
            await producer.send(unique_topic, kafkaio_value(i), key=b"k%d" % (i % 5))
    committed += list(range(1000, 1010))

    def read(isolation: str, expect: int) -> list[JavaRecord]:
        return java_clients.read_all(
            apache_kafka.bootstrap, unique_topic, isolation=isolation, expect=expect
        )

    read_committed = await anyio.to_thread.run_sync(lambda: read("read_committed", len(committed)))
    values = Counter(r.value for r in read_committed)
    assert values == Counter(kafkaio_value(i) for i in committed)
    everything = await anyio.to_thread.run_sync(
        lambda: read("read_uncommitted", len(committed) + len(aborted))
    )
    assert Counter(r.value for r in everything) == Counter(
        kafkaio_value(i) for i in committed + aborted
    )


async def test_kafkaio_read_committed_sees_only_java_committed_transactions(
    apache_kafka: BrokerInfo, java_clients: JavaClients, unique_topic: str
) -> None:
    await apache_kafka.create_topic(unique_topic, partitions=2)
    report = await anyio.to_thread.run_sync(
        lambda: java_clients.produce(
            apache_kafka.bootstrap,
            unique_topic,
            600,
            key_mod=5,
            transactional_id=f"java-txn-{unique_topic}",
            txn_size=50,
            abort_every=3,
            quiet=True,
        )
    )
    assert report.failed == 0 and len(report.transactions) == 12
    committed = [
        i for first, last, ok in report.transactions if ok for i in range(first, last + 1)
    ]
    aborted = [
        i for first, last, ok in report.transactions if not ok for i in range(first, last + 1)
    ]
    assert len(committed) == 400 and len(aborted) == 200
    got = await read_all_kafkaio(
        apache_kafka.bootstrap, unique_topic, 2, len(committed), isolation_level="read_committed"
    )
    assert Counter(r.value for r in got) == Counter(java_value(i) for i in committed)
    everything = await read_all_kafkaio(apache_kafka.bootstrap, unique_topic, 2, 600)
    assert Counter(r.value for r in everything) == Counter(
        java_value(i) for i in committed + aborted
    )


# -- one group, both clients ----------------------------------------------------------------


@dataclass
class Ledger:
    """What every member of a mixed group consumed and owned, on one clock (epoch ms)."""

    records: list[tuple[str, int, int, bytes | None]] = field(default_factory=list)
    ownership: list[tuple[str, str, tuple[int, ...], int]] = field(default_factory=list)

    def add_java(self, name: str, process: JavaProcess) -> None:
        for e in process.snapshot():
            if e["event"] in ("assigned", "revoked", "lost"):
                self.ownership.append((name, e["event"], tuple(e["partitions"]), e["t"]))
        self.records += [(name, r.partition, r.offset, r.value) for r in process.records]


class _Recorder(RebalanceListener):
    def __init__(self, name: str, consumer: Consumer, ledger: Ledger) -> None:
        self.name, self.consumer, self.ledger = name, consumer, ledger

    def _note(self, event: str, partitions: Iterable[TopicPartition]) -> None:
        owned = tuple(sorted(tp.partition for tp in partitions))
        self.ledger.ownership.append((self.name, event, owned, int(time.time() * 1000)))

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self.consumer.commit()  # what was handed out, before giving it up
        self._note("revoked", revoked)

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._note("assigned", assigned)

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self._note("lost", lost)


async def _kafkaio_member(
    name: str,
    bootstrap: str,
    topic: str,
    group: str,
    options: dict[str, Any],
    ledger: Ledger,
    stop: anyio.Event,
) -> None:
    async with Consumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **options,
    ) as consumer:
        consumer.subscribe([topic], listener=_Recorder(name, consumer, ledger))
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=200)
            for tp, records in batches.items():
                ledger.records += [(name, tp.partition, r.offset, r.value) for r in records]
            if batches:
                try:
                    await consumer.commit()
                except RebalanceInProgressError:
                    pass  # as Java's: poll to finish the rebalance; revocation commits



def _owned(events: Iterable[tuple[str, str, tuple[int, ...], int]]) -> dict[str, set[int]]:
    """Each member's partitions after applying its assigned/revoked/lost events in order."""
    owned: dict[str, set[int]] = {}
    for name, event, partitions, _ in sorted(events, key=lambda e: e[3]):
        mine = owned.setdefault(name, set())
        if event == "assigned":
            mine.update(partitions)
        else:
            mine.difference_update(partitions)
    return owned


async def _wait_until_stable(
    bootstrap: str, group: str, members: int, partitions: int, ownership: Any
) -> None:
    """Until the coordinator calls the group Stable with `members` members and the members'
    own callbacks say they hold every partition once (no revocation or assignment owed)."""
    async with Admin(bootstrap) as admin:
        with anyio.fail_after(60):
            while True:
                described = (await admin.describe_groups([group]))[group]
                held = sorted(p for mine in _owned(ownership()).values() for p in mine)
                if (
                    described.error is None
                    and described.state.lower() == "stable"
                    and len(described.members) == members
                    and held == list(range(partitions))
                ):
                    return
                await anyio.sleep(0.1)


def _overlaps(ledger: Ledger, partitions: int, end_ms: int) -> list[str]:
    """Partitions owned by two members at once, from the assigned/revoked/lost events."""
    intervals: dict[int, list[tuple[int, int, str]]] = {p: [] for p in range(partitions)}
    held: dict[tuple[str, int], int] = {}
    for name, event, owned, t in sorted(ledger.ownership, key=lambda e: e[3]):
        for p in owned:
            if event == "assigned":
                held[(name, p)] = t
            elif (name, p) in held:
                intervals[p].append((held.pop((name, p)), t, name))
    for (name, p), start in held.items():
        intervals[p].append((start, end_ms, name))
    problems = []
    for p, spans in intervals.items():
        for a, b in itertools.combinations(sorted(spans), 2):
            if a[2] != b[2] and b[0] < a[1]:
                problems.append(f"partition {p}: {a[2]} {a[:2]} and {b[2]} {b[:2]}")
    return problems


def _explain(ledger: Ledger, duplicates: dict[tuple[int, int], int]) -> str:
    """Who consumed the duplicated records, and the ownership events of their partitions."""
    partitions = sorted({p for p, _ in duplicates})
    by_member: dict[tuple[str, int], list[int]] = {}
    for name, p, o, _ in ledger.records:
        if (p, o) in duplicates:
            by_member.setdefault((name, p), []).append(o)
    lines = [f"{len(duplicates)} records consumed twice, partitions {partitions}"]
    lines += [
        f"  {name} read p{p} offsets {min(os)}..{max(os)} ({len(os)})"
        for (name, p), os in sorted(by_member.items())
    ]
    lines += [
        f"  t={t} {name} {event} {owned}"
        for name, event, owned, t in sorted(ledger.ownership, key=lambda e: e[3])
        if set(owned) & set(partitions)
    ]
    return "\n".join(lines)


GROUP_SHAPES = [
    pytest.param("classic", "range", id="classic-range"),
    pytest.param("classic", "cooperative-sticky", id="classic-cooperative-sticky"),
    pytest.param("consumer", None, id="consumer-protocol"),
]


@pytest.mark.parametrize(("protocol", "assignor"), GROUP_SHAPES)
async def test_kafkaio_and_java_consumers_share_a_group(
    apache_kafka: BrokerInfo,
    java_clients: JavaClients,
    unique_topic: str,
    protocol: str,
    assignor: str | None,
) -> None:
    """Members join and one leaves while records are produced: every record is consumed
    once and no partition is owned by two members at a time.

    The member leaves once the group is stable: leaving during a rebalance loses its
    partitions (Java's onLeavePrepare calls onPartitionsLost then, and a commit refused as
    REBALANCE_IN_PROGRESS stays uncommitted), so their last records are read again by
    design in either client."""
    partitions, total = 6, 4000
    await apache_kafka.create_topic(unique_topic, partitions=partitions)
    group = f"mixed-{unique_topic}"
    bootstrap = apache_kafka.bootstrap
    options: dict[str, Any] = {"group_protocol": protocol}
    if protocol == "classic":
        options |= {"partition_assignment_strategy": assignor, "session_timeout_ms": 10_000}
    ledger = Ledger()
    produced: list[int] = []
    java: dict[str, JavaProcess] = {}

    def start_java(name: str) -> None:
        java[name] = java_clients.consumer(
            bootstrap, unique_topic, group=group, protocol=protocol, assignor=assignor, name=name
        )

    async def produce() -> None:
        async with Producer(bootstrap, linger_ms=5) as producer:
            futures = []
            for i in range(total):
                futures.append(await producer.enqueue(unique_topic, b"v%d" % i, key=b"k%d" % i))
                if i % 100 == 99:
                    await anyio.sleep(0.3)  # about 12 s of production, through the rebalances
            await producer.flush()
            for future in futures:
                await future
            produced.extend(range(total))

    stop_a, stop_rest = anyio.Event(), anyio.Event()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(produce)
            tg.start_soon(
                _kafkaio_member, "kafkaio-a", bootstrap, unique_topic, group, options, ledger, stop_a
            )
            await anyio.sleep(1.5)
            await anyio.to_thread.run_sync(start_java, "java-b")
            await anyio.sleep(1.5)
            tg.start_soon(
                _kafkaio_member,
                "kafkaio-c",
                bootstrap,
                unique_topic,
                group,
                options,
                ledger,
                stop_rest,
            )
            await anyio.sleep(1.5)
            await anyio.to_thread.run_sync(start_java, "java-d")

            def ownership() -> list[tuple[str, str, tuple[int, ...], int]]:
                probe = Ledger(ownership=list(ledger.ownership))
                for name, process in java.items():
                    probe.add_java(name, process)
                return probe.ownership

            await _wait_until_stable(bootstrap, group, 4, partitions, ownership)
            assert len(produced) < total, "production ended before the group settled"
            stop_a.set()  # kafkaio-a leaves while records still arrive
            with anyio.fail_after(120):
                while True:
                    seen = len(ledger.records) + sum(len(p.records) for p in java.values())
                    if seen >= total and len(produced) == total:
                        break
                    await anyio.sleep(0.2)
            await anyio.sleep(2.0)  # a duplicate delivered late would show up now
            stop_rest.set()
    finally:
        for name, process in java.items():
            await anyio.to_thread.run_sync(process.stop)
            ledger.add_java(name, process)
    end_ms = int(time.time() * 1000)
    counts = Counter((p, o) for _, p, o, _ in ledger.records)
    duplicates = {key: n for key, n in counts.items() if n > 1}
    assert duplicates == {}, _explain(ledger, duplicates)
    assert len(counts) == total
    assert sorted(v for *_, v in ledger.records) == sorted(b"v%d" % i for i in range(total))
    members = {name for name, *_ in ledger.records}
    assert {"java-b", "java-d"} & members and {"kafkaio-a", "kafkaio-c"} & members, members
    assert _overlaps(ledger, partitions, end_ms) == []


# -- one share group, both clients -------------------------------------------------------------


async def test_kafkaio_and_java_share_consumers_split_a_share_group(
    apache_kafka: BrokerInfo, java_clients: JavaClients, unique_topic: str
) -> None:
    apache_kafka.skip_unless("share_groups")
    await apache_kafka.create_topic(unique_topic, partitions=2)
    group = f"share-{unique_topic}"
    async with Admin(apache_kafka.bootstrap) as admin:
        resource = ConfigResource(ConfigResourceType.GROUP, group)
        errors = await admin.incremental_alter_configs(
            {resource: [AlterConfigOp("share.auto.offset.reset", "earliest")]}
        )
        assert errors[resource] is None
    java = await anyio.to_thread.run_sync(
        lambda: java_clients.share_consumer(apache_kafka.bootstrap, unique_topic, group)
    )
    got: list[Any] = []
    sent = 0
    try:
        async with ShareConsumer(
            unique_topic, bootstrap_servers=apache_kafka.bootstrap, group_id=group
        ) as share, Producer(apache_kafka.bootstrap, linger_ms=5) as producer:
            # Records go out in rounds until both clients have had some: the JVM may join
            # the group well after kafkaio did on a busy machine, and a member that joined
            # late gets only what arrives after it did.
            with anyio.fail_after(120):
                while sent < 2000 or not (got and java.records):
                    for i in range(sent, sent + 200):
                        await producer.enqueue(unique_topic, b"s%d" % i, key=b"k%d" % i)
                    await producer.flush()
                    sent += 200
                    while len(got) + len(java.records) < sent:
                        got += await share.poll(timeout_ms=200)
            await anyio.sleep(2.0)  # a redelivery would arrive now
            got += await share.poll(timeout_ms=500)
            await share.commit()
    finally:
        await anyio.to_thread.run_sync(java.stop)
    delivered = Counter([r.value for r in got] + [r.value for r in java.records])
    assert delivered == Counter(b"s%d" % i for i in range(sent))
    assert all(r.delivery_count == 1 for r in java.records)
    assert got and java.records, (len(got), len(java.records))
