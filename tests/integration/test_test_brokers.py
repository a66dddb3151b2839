"""The test brokers of kafkaio.testing work: produce/consume on each, fault injection on the
mock cluster, Tansu restart, helper processes that die with their parent. Uses aiokafka.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kafkaio.errors import KafkaConfigError
from kafkaio.testing import FEATURES, BrokerInfo, MockClusterError
from kafkaio.testing._probe import api_versions, parse_bootstrap

pytestmark = pytest.mark.integration

T = TypeVar("T")

PRODUCE = 0
NOT_LEADER_OR_FOLLOWER = 6
TOPIC_AUTHORIZATION_FAILED = 29


async def bounded(awaitable: Awaitable[T], seconds: float = 20.0) -> T:
    return await asyncio.wait_for(awaitable, seconds)


async def consume(bootstrap: str, topic: str, partitions: int, count: int) -> list[Any]:
    """Read ``count`` records from the start of every partition (no group, manual assign)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        await consumer.seek_to_beginning()
        records: list[Any] = []
        while len(records) < count:
            batches = await consumer.getmany(timeout_ms=200)
            for batch in batches.values():
                records.extend(batch)
        return records
    finally:
        await consumer.stop()


async def produce(bootstrap: str, topic: str, values: list[bytes], **config: Any) -> list[Any]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **config)
    await producer.start()
    try:
        futures = [await producer.send(topic, value=v, key=v[:4]) for v in values]
        return list(await asyncio.gather(*futures))
    finally:
        await producer.stop()


# -- every broker -------------------------------------------------------------------------


async def test_produce_and_consume_100_records(kafka_broker: BrokerInfo, unique_topic: str) -> None:
    await kafka_broker.create_topic(unique_topic, partitions=3)
    values = [f"rec-{i:03d}".encode() for i in range(100)]

    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap)
    await bounded(producer.start())
    try:
        metas = [
            await bounded(producer.send_and_wait(unique_topic, value=v, partition=i % 3))
            for i, v in enumerate(values)
        ]
    finally:
        await producer.stop()
    assert [m.partition for m in metas] == [i % 3 for i in range(100)]
    # Each partition got 34/33/33 records at offsets 0..n-1, in send order.
    for partition in range(3):
        assert [m.offset for m in metas if m.partition == partition] == list(
            range(len(values[partition::3]))
        )

    records = await bounded(consume(kafka_broker.bootstrap, unique_topic, 3, 100))
    assert len(records) == 100
    assert sorted(r.value for r in records) == values
    for partition in range(3):
        in_partition = [r for r in records if r.partition == partition]
        assert [r.value for r in in_partition] == values[partition::3]
        assert [r.offset for r in in_partition] == list(range(len(in_partition)))


async def test_broker_info_describes_the_broker(kafka_broker: BrokerInfo) -> None:
    host, port = parse_bootstrap(kafka_broker.bootstrap)[0]
    assert api_versions(host, port) == dict(kafka_broker.api_versions)
    assert "consumer_groups" in kafka_broker.features
    with pytest.raises(KafkaConfigError, match="unknown broker feature 'no_such_feature'"):
        kafka_broker.has("no_such_feature")


def test_apache_kafka_has_every_feature_the_suite_asks_for(apache_kafka: BrokerInfo) -> None:
    missing = {"telemetry", "fault_injection", "multi_broker"}  # no metrics plugin; one node
    assert apache_kafka.features == FEATURES - missing
    assert apache_kafka.api_versions[68] == (0, 1)  # ConsumerGroupHeartbeat (KIP-848)
    assert apache_kafka.api_versions[76] == (1, 1)  # ShareGroupHeartbeat v1 (KIP-932 GA)


def test_features_match_what_each_broker_advertises(
    tansu_broker: BrokerInfo, mock_cluster: BrokerInfo
) -> None:
    # Facts from /work/shared/brokers.md: admin APIs on Tansu, KIP-848/epochs on the mock.
    assert {"create_topics", "transactions", "sasl"} <= tansu_broker.features
    assert not {"offset_for_leader_epoch", "consumer_group_heartbeat", "fault_injection"} & (
        tansu_broker.features
    )
    assert {"consumer_group_heartbeat", "offset_for_leader_epoch", "share_groups"} <= (
        mock_cluster.features
    )
    assert {"fault_injection", "multi_broker", "exact_end_offsets"} <= mock_cluster.features
    assert "create_topics" not in mock_cluster.features
    # neither lists aborted transactions in Fetch (the mock has no transaction semantics)
    assert not {"aborted_transactions", "exact_end_offsets"} & tansu_broker.features
    assert "aborted_transactions" not in mock_cluster.features

    with pytest.raises(pytest.skip.Exception) as skipped:
        tansu_broker.skip_unless("offset_for_leader_epoch")
    assert str(skipped.value) == (
        "broker 'tansu' lacks feature 'offset_for_leader_epoch': it does not advertise "
        "OffsetForLeaderEpoch (key 23) in ApiVersions"
    )
    with pytest.raises(pytest.skip.Exception, match="'mock' lacks feature 'create_topics'"):
        mock_cluster.skip_unless("consumer_groups", "create_topics")
    mock_cluster.skip_unless("fault_injection", "consumer_group_heartbeat")  # does not skip


# -- mock cluster fault injection ---------------------------------------------------------


async def test_leader_move_and_broker_down_are_survived_by_the_producer(
    isolated_mock_cluster: BrokerInfo, unique_topic: str
) -> None:
    from aiokafka import AIOKafkaProducer

    cluster = isolated_mock_cluster.cluster
    assert cluster is not None and cluster.broker_ids == [1, 2, 3]
    cluster.create_topic(unique_topic, 1, 3)
    cluster.set_partition_leader(unique_topic, 0, 1)
    cluster.start_request_tracking()

    producer = AIOKafkaProducer(bootstrap_servers=isolated_mock_cluster.bootstrap)
    await bounded(producer.start())
    try:
        first = await bounded(producer.send_and_wait(unique_topic, b"before"))
        cluster.set_partition_leader(unique_topic, 0, 2)
        cluster.broker_down(1)
        second = await bounded(producer.send_and_wait(unique_topic, b"after"))
    finally:
        await producer.stop()

    assert (first.offset, second.offset) == (0, 1)
    produce_brokers = [broker for broker, api, _ in cluster.get_requests() if api == PRODUCE]
    assert produce_brokers[0] == 1 and produce_brokers[-1] == 2
    records = await bounded(consume(isolated_mock_cluster.bootstrap, unique_topic, 1, 2))
    assert [r.value for r in records] == [b"before", b"after"]


async def test_pushed_retriable_errors_are_retried(
    isolated_mock_cluster: BrokerInfo, unique_topic: str
) -> None:
    cluster = isolated_mock_cluster.cluster
    assert cluster is not None
    cluster.create_topic(unique_topic, 1, 1)
    cluster.push_request_errors(PRODUCE, [NOT_LEADER_OR_FOLLOWER, NOT_LEADER_OR_FOLLOWER])
    cluster.start_request_tracking()

    metas = await bounded(produce(isolated_mock_cluster.bootstrap, unique_topic, [b"only"]))

    assert [m.offset for m in metas] == [0]
    produce_requests = [api for _, api, _ in cluster.get_requests() if api == PRODUCE]
    assert len(produce_requests) == 3  # two rejected attempts, then the accepted one
    records = await bounded(consume(isolated_mock_cluster.bootstrap, unique_topic, 1, 1))
    assert [r.value for r in records] == [b"only"]


async def test_pushed_fatal_error_reaches_the_client(
    isolated_mock_cluster: BrokerInfo, unique_topic: str
) -> None:
    from aiokafka.errors import TopicAuthorizationFailedError

    cluster = isolated_mock_cluster.cluster
    assert cluster is not None
    cluster.create_topic(unique_topic, 1, 1)
    cluster.push_request_errors(PRODUCE, [TOPIC_AUTHORIZATION_FAILED])
    with pytest.raises(TopicAuthorizationFailedError):
        await bounded(produce(isolated_mock_cluster.bootstrap, unique_topic, [b"denied"]))


async def test_per_broker_error_stack_is_consumed_by_requests(
    isolated_mock_cluster: BrokerInfo, unique_topic: str
) -> None:
    cluster = isolated_mock_cluster.cluster
    assert cluster is not None
    cluster.create_topic(unique_topic, 1, 1)
    cluster.set_partition_leader(unique_topic, 0, 3)
    cluster.broker_push_request_error_rtts(3, PRODUCE, [(NOT_LEADER_OR_FOLLOWER, 0), (0, 10)])
    assert cluster.broker_error_stack_count(3, PRODUCE) == 2
    assert cluster.broker_error_stack_count(1, PRODUCE) == 0

    metas = await bounded(produce(isolated_mock_cluster.bootstrap, unique_topic, [b"x"]))

    assert [m.offset for m in metas] == [0]
    assert cluster.broker_error_stack_count(3, PRODUCE) == 0


def test_apiversion_override_and_errors_come_back(isolated_mock_cluster: BrokerInfo) -> None:
    cluster = isolated_mock_cluster.cluster
    assert cluster is not None
    cluster.set_apiversion(PRODUCE, 3, 7)
    cluster.set_apiversion(23, -1, -1)  # OffsetForLeaderEpoch withdrawn
    host, port = parse_bootstrap(cluster.bootstrap)[1]
    versions = api_versions(host, port)
    assert versions[PRODUCE] == (3, 7)
    assert versions.get(23, (-1, -1)) == (-1, -1)

    with pytest.raises(MockClusterError, match="BROKER_NOT_AVAILABLE"):
        cluster.set_partition_leader("some-topic", 0, 99)
    cluster.create_topic("twice", 1)
    with pytest.raises(MockClusterError, match="TOPIC_ALREADY_EXISTS"):
        cluster.create_topic("twice", 1)
    cluster.set_rtt(2, 0)  # still usable after errors


# -- Tansu ------------------------------------------------------------------------------


async def test_tansu_restart_keeps_the_port_and_loses_the_data(
    isolated_tansu_broker: BrokerInfo, unique_topic: str
) -> None:
    from aiokafka.admin import AIOKafkaAdminClient

    broker = isolated_tansu_broker.tansu
    assert broker is not None
    await isolated_tansu_broker.create_topic(unique_topic, 1)
    await bounded(produce(broker.bootstrap, unique_topic, [b"lost"]))

    broker.restart()

    assert broker.bootstrap == isolated_tansu_broker.bootstrap
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await bounded(admin.start())
    try:
        assert unique_topic not in await bounded(admin.list_topics())
    finally:
        await admin.close()
    await isolated_tansu_broker.create_topic(unique_topic, 1)
    metas = await bounded(produce(broker.bootstrap, unique_topic, [b"fresh"]))
    assert [m.offset for m in metas] == [0]
    records = await bounded(consume(broker.bootstrap, unique_topic, 1, 1))
    assert [r.value for r in records] == [b"fresh"]


# -- helper processes end with their parent -----------------------------------------------

_ORPHAN_SCRIPT = """
import os, sys
from kafkaio.testing import MockCluster, TansuBroker
cluster = MockCluster().start(1)
tansu = TansuBroker().start()
print(cluster.pid, tansu.pid, flush=True)
sys.stdin.read()  # wait to be killed
"""

# a broker started from a thread that ends at once (as a fixture run through a worker
# thread, or a restart after a fault, starts one): it must outlive that thread, and end with
# the process
_WORKER_THREAD_SCRIPT = """
import sys, threading, time
from kafkaio.testing import TansuBroker
brokers = []
starter = threading.Thread(target=lambda: brokers.append(TansuBroker().start()))
starter.start()
starter.join()
time.sleep(0.5)
print(brokers[0].pid, flush=True)
sys.stdin.read()  # wait to be killed
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and prctl")
@pytest.mark.parametrize(
    ("script", "count"),
    [(_ORPHAN_SCRIPT, 2), (_WORKER_THREAD_SCRIPT, 1)],
    ids=["main-thread", "worker-thread"],
)
def test_broker_processes_end_when_their_parent_is_killed(script: str, count: int) -> None:
    """Brokers started by a process end when it is killed (SIGKILL: no atexit runs), from
    whichever thread they were started; and a broker outlives the thread that started it."""
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=dict(os.environ),
    )
    assert parent.stdout is not None
    try:
        line = parent.stdout.readline().decode()
        pids = [int(p) for p in line.split()]
        assert len(pids) == count and all(_alive(pid) for pid in pids)
    finally:
        parent.kill()
        parent.wait(10)
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = [pid for pid in pids if _alive(pid)]
    for pid in survivors:  # do not leak them when the assertion fails
        os.kill(pid, signal.SIGKILL)
    assert survivors == []


# -- Apache Kafka ---------------------------------------------------------------------------

_APACHE_SCRIPT = """
import sys
from kafkaio.testing import ApacheKafka
cluster = ApacheKafka(1).start()
print(cluster.nodes[1].pid, cluster.directory, flush=True)
sys.stdin.read()  # until stdin closes (then exit normally) or until killed
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and prctl")
@pytest.mark.parametrize("end", ["exit", "kill"])
def test_apache_kafka_ends_with_the_process_that_started_it(
    apache_kafka: BrokerInfo, end: str
) -> None:
    """A script that exits without stop() (atexit) or is killed with SIGKILL (the JVM's
    parent-death signal) leaves no JVM behind; a normal exit also removes its directory."""
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_APACHE_SCRIPT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert parent.stdin is not None and parent.stdout is not None
    try:
        pid_text, directory = parent.stdout.readline().decode().split()
        pid = int(pid_text)
        assert _alive(pid)
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            assert b"kafka.Kafka" in cmdline.read()
        if end == "exit":
            parent.stdin.close()
            assert parent.wait(30) == 0
        else:
            parent.kill()
            parent.wait(10)
    finally:
        if parent.poll() is None:
            parent.kill()
    deadline = time.monotonic() + 15
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid):  # do not leak it when the assertion fails
        os.kill(pid, signal.SIGKILL)
        raise AssertionError(f"the broker JVM {pid} outlived its parent ({end})")
    if end == "exit":
        assert not os.path.exists(directory)
    else:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM is a POSIX signal")
def test_run_kafka_stopped_by_sigterm_removes_the_brokers_data(apache_kafka: BrokerInfo) -> None:
    """``python -m kafkaio.testing run-kafka`` stops on SIGTERM as on Ctrl-C: the broker
    ends and its data directory is removed (the logs stay, as the command says)."""
    command = subprocess.Popen(
        [sys.executable, "-m", "kafkaio.testing", "run-kafka"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert command.stdout is not None
    try:
        bootstrap = command.stdout.readline().split()[1]
        directory = Path(command.stdout.readline().split()[2].rstrip(";"))
        data = directory / "broker1" / "data"
        assert bootstrap.startswith("127.0.0.1:") and data.is_dir()
        command.send_signal(signal.SIGTERM)
        assert command.wait(60) == 0
    finally:
        if command.poll() is None:
            command.kill()
            command.wait(10)
    try:
        assert not data.exists()
        assert (directory / "broker1" / "server.log").exists()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


_SKIP_PROBE = """
from kafkaio.testing import BrokerInfo

def test_needs_apache_kafka(apache_kafka: BrokerInfo) -> None:
    raise AssertionError("must not run without Java or Maven")
"""


@pytest.mark.parametrize("missing", ["java", "maven"])
def test_apache_kafka_skips_with_the_reason_when_java_or_maven_is_missing(
    tmp_path: Path, missing: str
) -> None:
    """Never a silent pass: without Java (or without Maven and with no cached jars) the
    Apache Kafka fixtures skip, and the skip says what is missing."""
    from kafkaio.testing import apache

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    java = apache.find_java()
    if missing == "maven":
        assert java is not None
        (bin_dir / "java").symlink_to(java)  # Java present, Maven absent, empty cache
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env |= {"PATH": str(bin_dir), apache.CACHE_ENV: str(tmp_path / "cache")}
    (tmp_path / "test_probe.py").write_text(_SKIP_PROBE)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "test_probe.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert "1 skipped" in output, output
    expected = "Java not found" if missing == "java" else "Maven (mvn) not found"
    assert f"Apache Kafka unavailable: {expected}" in output, output


async def test_wait_for_leaders_returns_once_every_partition_takes_produce(
    apache_kafka: BrokerInfo, unique_topic: str
) -> None:
    """After CreateTopics Apache Kafka names a leader for each partition before that broker
    has created the partition's log; wait_for_leaders returns only once each one serves it:
    a Produce to every partition right after is accepted (no NOT_LEADER_OR_FOLLOWER)."""
    from kafkaio import Admin, NewTopic
    from kafkaio.net import Connection, ConnectionConfig
    from kafkaio.testing import wait_for_leaders
    from kafkaio.testing.raw import build_batches, produce

    partitions = 200
    async with Admin(apache_kafka.bootstrap) as admin:
        created = await admin.create_topics([NewTopic(unique_topic, partitions, 1)])
        assert created[unique_topic].error is None
        await wait_for_leaders(apache_kafka.bootstrap, unique_topic, partitions)
        info = (await admin.describe_topics([unique_topic]))[unique_topic]
    host, port = parse_bootstrap(apache_kafka.bootstrap)[0]
    (leader,) = {p.leader for p in info.partitions}  # one broker
    conn = await Connection.connect(host, port, ConnectionConfig(), node_id=leader)
    try:
        batch = build_batches([(None, b"v")])
        for partition in range(partitions):
            assert await produce(conn, unique_topic, partition, batch, acks=1) == [0]
    finally:
        await conn.close()


async def test_wait_for_leaders_gives_up_after_its_timeout(
    kafka_broker: BrokerInfo, unique_topic: str
) -> None:
    from kafkaio.errors import KafkaTimeoutError
    from kafkaio.testing import wait_for_leaders

    kafka_broker.skip_unless("create_topics")
    await kafka_broker.create_topic(unique_topic, 1)
    with pytest.raises(KafkaTimeoutError, match="after 0.5 s"):
        # two partitions asked for, one exists: never satisfied
        await wait_for_leaders(kafka_broker.bootstrap, unique_topic, 2, timeout=0.5)
