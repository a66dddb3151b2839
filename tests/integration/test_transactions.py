"""Transactional producer and exactly-once pipelines against real brokers.

What the brokers here do with kafkaio's transactional requests (seen with raw requests):
Tansu 0.6 runs the whole protocol (FindCoordinator key_type 1, InitProducerId v5 with epoch
bumps and fencing, AddPartitionsToTxn v3, AddOffsetsToTxn v4, TxnOffsetCommit v4 with the
offsets hidden until commit and dropped on abort, EndTxn v4, COMMIT/ABORT markers, a last
stable offset that stops at an open transaction), but its Fetch lists no aborted
transactions. librdkafka's mock cluster accepts every request but implements none of the
semantics (see MOCK_REASON); it is used here for fault injection on the request path.
What the log holds is judged by a reader other than the code under test where one can be
right: on Apache Kafka, Java's consumer at both isolation levels (``LogJudge``: committed,
aborted, still open); on Tansu, whose Fetch lists no aborted transactions so no client's
read_committed is right there, the batches and markers as `read_log` decodes them, with the
markers applied as the Kafka log format defines them (`committed_view`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from kafkaio import Consumer, Producer, TopicPartition
from kafkaio.errors import InvalidProducerEpochError, ProducerFencedError
from kafkaio.net.config import ConnectionConfig
from kafkaio.net.manager import ConnectionManager
from kafkaio.producer.errors import TransactionAbortedError
from kafkaio.producer.transaction_state import TxnState
from kafkaio.protocol import messages as m
from kafkaio.records import iter_batches, parse_control_record
from kafkaio.structs import ConsumerGroupMetadata
from kafkaio.testing import BrokerInfo
from kafkaio.testing.java import JavaClients

pytestmark = pytest.mark.integration

GUARD = 30  # seconds: a scenario taking longer has hung
ROOT = Path(__file__).resolve().parents[2]

MOCK_REASON = (
    "librdkafka 2.16 mock cluster has no transaction semantics: it answers InitProducerId, "
    "AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn with no error, but "
    "writes the COMMIT/ABORT markers with a wrong CRC-32C (a fetch reaching a marker fails "
    "the CRC check), lists no aborted transactions in Fetch, does not store TxnOffsetCommit "
    "offsets (OffsetFetch answers -1 after the commit), and does not fence: a second "
    "InitProducerId for the same transactional id returns a new producer id with epoch 0 "
    "and requests with the old epoch still succeed"
)

COMMIT, ABORT = 1, 0
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
FIND_COORDINATOR, INIT_PRODUCER_ID = 10, 22
COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS = 14, 16, 51


def skip_without_transactions(broker: BrokerInfo) -> None:
    if broker.name == "mock":
        pytest.skip(MOCK_REASON)
    broker.skip_unless("transactions")


# -- reading the log as it is --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LogEntry:
    partition: int
    offset: int
    producer_id: int
    transactional: bool
    value: bytes | None  # None for a control record
    control: int | None  # COMMIT / ABORT for a marker


async def read_log(bootstrap: str, topic: str, partitions: int) -> list[LogEntry]:
    """Every record and marker of ``topic`` (isolation_level 0), read until a fetch is empty."""
    out: list[LogEntry] = []
    async with ConnectionManager(bootstrap, ConnectionConfig()) as connections:
        conn = await connections.bootstrap()
        for partition in range(partitions):
            offset = 0
            while True:
                request = m.FetchRequest(
                    max_wait_ms=10,
                    min_bytes=1,
                    max_bytes=4 << 20,
                    isolation_level=0,
                    topics=[
                        m.FetchRequest.FetchTopic(
                            topic=topic,
                            partitions=[
                                m.FetchRequest.FetchPartition(
                                    partition=partition,
                                    fetch_offset=offset,
                                    partition_max_bytes=4 << 20,
                                )
                            ],
                        )
                    ],
                )
                response = await conn.send(request, version=12)
                part = response.responses[0].partitions[0]
                assert part.error_code == 0, part
                before = offset
                for batch in iter_batches(part.records or b"", topic=topic, partition=partition):
                    for r in batch:
                        if r.offset < offset:
                            continue
                        control = parse_control_record(r.key).type if batch.is_control else None
                        out.append(
                            LogEntry(
                                partition,
                                r.offset,
                                batch.producer_id,
                                batch.is_transactional,
                                None if batch.is_control else r.value,
                                control,
                            )
                        )
                    offset = max(offset, batch.last_offset + 1)
                if offset == before:
                    break
    return out


def committed_view(log: list[LogEntry]) -> tuple[list[bytes], list[bytes], int]:
    """Apply the markers: (committed values, aborted values, records of open transactions).

    A transactional record belongs to the next marker of its producer in its partition.
    """
    committed: list[bytes] = []
    aborted: list[bytes] = []
    pending: dict[tuple[int, int], list[bytes]] = {}
    for e in log:
        key = (e.partition, e.producer_id)
        if e.control is not None:
            values = pending.pop(key, [])
            (committed if e.control == COMMIT else aborted).extend(values)
        elif e.transactional:
            assert e.value is not None
            pending.setdefault(key, []).append(e.value)
        else:
            assert e.value is not None
            committed.append(e.value)
    return committed, aborted, sum(len(v) for v in pending.values())


async def read_committed(
    bootstrap: str, topic: str, partitions: int, wanted: list[bytes], *, seconds: float = 5
) -> list[bytes]:
    """Values a kafkaio read_committed consumer returns: until it has every ``wanted`` value,
    then whatever else arrives within another 300 ms."""
    got: list[bytes] = []
    async with Consumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        with anyio.move_on_after(seconds):
            while not set(wanted) <= set(got):
                batch = await consumer.getmany(timeout_ms=200)
                got += [r.value for records in batch.values() for r in records]
        batch = await consumer.getmany(timeout_ms=300)
        got += [r.value for records in batch.values() for r in records]
    return got


@dataclass(frozen=True, slots=True)
class LogView:
    committed: list[bytes]  # in log order per partition, partition 0 first
    aborted: list[bytes]
    open_records: int  # records of transactions still open
    judged_by: str


class LogJudge:
    """Reads what a topic's log holds: Java's consumer on Apache Kafka, kafkaio's decoding of
    the batches and markers elsewhere (see the module docstring)."""

    def __init__(self, broker: BrokerInfo, java: JavaClients | None) -> None:
        self.broker = broker
        self.java = java

    async def view(self, topic: str, partitions: int) -> LogView:
        if self.java is not None:
            java = self.java
            log = await anyio.to_thread.run_sync(
                lambda: java.read_log(self.broker.bootstrap, topic)
            )
            assert sorted(log.high_watermarks) == list(range(partitions))
            return LogView(
                [v for v in log.values() if v is not None],
                [v for v in log.values(log.aborted) if v is not None],
                len(log.open_records),
                "Java",
            )
        entries = await read_log(self.broker.bootstrap, topic, partitions)
        committed, aborted, open_records = committed_view(
            sorted(entries, key=lambda e: (e.partition, e.offset))
        )
        return LogView(committed, aborted, open_records, "kafkaio")


@pytest.fixture
def judge(kafka_broker: BrokerInfo, request: pytest.FixtureRequest) -> LogJudge:
    java = request.getfixturevalue("java_clients") if kafka_broker.name == "kafka" else None
    return LogJudge(kafka_broker, java)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- commit and abort --------------------------------------------------------------------------


async def produce_commit_abort_commit(
    bootstrap: str, topic: str
) -> tuple[list[bytes], list[bytes]]:
    """Transactions: 6 records committed, 4 aborted (written first), 2 committed."""
    committed = [b"c1-%d" % i for i in range(6)] + [b"c3-%d" % i for i in range(2)]
    aborted = [b"a2-%d" % i for i in range(4)]
    async with Producer(bootstrap, transactional_id=new_id("tx"), linger_ms=1) as p:
        assert p.transaction_state is TxnState.READY  # start() ran init_transactions()
        await p.init_transactions()  # again: returns at once
        async with p.transaction():
            for i, value in enumerate(committed[:6]):
                await p.enqueue(topic, value, partition=i % 2)
        p.begin_transaction()
        futures = [await p.enqueue(topic, v, partition=i % 2) for i, v in enumerate(aborted)]
        await p.flush()  # written to the log, then aborted
        assert all(f.exception() is None for f in futures)
        await p.abort_transaction()
        with pytest.raises(RuntimeError, match="app failed"):
            async with p.transaction():
                queued = await p.enqueue(topic, b"never", partition=0)
                raise RuntimeError("app failed")  # aborts; the record was never sent
        # the partition was not in the transaction yet: the record never left the producer
        assert isinstance(queued.exception(), TransactionAbortedError)
        async with p.transaction():
            for i, value in enumerate(committed[6:]):
                await p.send(topic, value, partition=i % 2)
        assert p.transaction_state is TxnState.READY
    return committed, aborted


async def test_commit_and_abort_markers(
    kafka_broker: BrokerInfo, unique_topic: str, judge: LogJudge
) -> None:
    skip_without_transactions(kafka_broker)
    await kafka_broker.create_topic(unique_topic, 2)
    with anyio.fail_after(GUARD):
        committed, aborted = await produce_commit_abort_commit(kafka_broker.bootstrap, unique_topic)
    view = await judge.view(unique_topic, 2)
    # each record once, in the order sent per partition (0, 2, 4... went to partition 0)
    assert view.committed == committed[0:6:2] + committed[6::2] + committed[1:6:2] + committed[7::2]
    # the aborted transaction reached the log, and its marker says ABORT
    assert view.aborted == aborted[0::2] + aborted[1::2]
    assert view.open_records == 0
    if view.judged_by == "kafkaio":
        log = await read_log(kafka_broker.bootstrap, unique_topic, 2)
        assert all(e.transactional for e in log if e.value is not None)


async def test_close_aborts_a_transaction_left_open(
    kafka_broker: BrokerInfo, unique_topic: str, judge: LogJudge
) -> None:
    skip_without_transactions(kafka_broker)
    await kafka_broker.create_topic(unique_topic, 1)
    with anyio.fail_after(GUARD):
        p = Producer(kafka_broker.bootstrap, transactional_id=new_id("tx"), linger_ms=1)
        await p.start()
        p.begin_transaction()
        written = [await p.enqueue(unique_topic, b"w%d" % i, partition=0) for i in range(3)]
        await p.flush()  # in the log, in a transaction nobody commits
        unsent = await p.enqueue(unique_topic, b"unsent", partition=0)
        await p.close()
        assert p.transaction_state is TxnState.READY  # the abort completed
        assert all(f.exception() is None for f in written)
        assert isinstance(unsent.exception(), TransactionAbortedError)
    view = await judge.view(unique_topic, 1)
    assert (view.committed, view.open_records) == ([], 0)  # before, the 3 records stayed open
    assert view.aborted == [b"w0", b"w1", b"w2"]


async def test_read_committed_consumers_return_exactly_the_committed_records(
    kafka_broker: BrokerInfo, unique_topic: str
) -> None:
    """kafkaio's and aiokafka's read_committed consumers return every committed record once
    and no aborted one (nor the record of the transaction aborted before it was sent)."""
    skip_without_transactions(kafka_broker)
    kafka_broker.skip_unless("aborted_transactions")
    await kafka_broker.create_topic(unique_topic, 2)
    with anyio.fail_after(GUARD):
        committed, _ = await produce_commit_abort_commit(kafka_broker.bootstrap, unique_topic)
        got = await read_committed(kafka_broker.bootstrap, unique_topic, 2, committed)
        aio = await read_committed_aiokafka(kafka_broker.bootstrap, unique_topic, len(committed))
    assert Counter(got) == Counter(committed)
    assert Counter(aio) == Counter(committed)


async def read_committed_aiokafka(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioTp

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    got: list[bytes] = []
    try:
        consumer.assign([AioTp(topic, 0), AioTp(topic, 1)])
        with anyio.move_on_after(5):
            while len(got) < expected:
                batch = await consumer.getmany(timeout_ms=200)
                got += [r.value for records in batch.values() for r in records]
        batch = await consumer.getmany(timeout_ms=300)  # anything more would show here
        got += [r.value for records in batch.values() for r in records]
    finally:
        await consumer.stop()
    return got


def test_confluent_kafka_reads_exactly_the_committed_records(kafka_broker: BrokerInfo) -> None:
    import confluent_kafka

    skip_without_transactions(kafka_broker)
    kafka_broker.skip_unless("aborted_transactions")
    topic = new_id("ck")

    async def produce() -> tuple[list[bytes], list[bytes]]:
        await kafka_broker.create_topic(topic, 2)
        with anyio.fail_after(GUARD):
            return await produce_commit_abort_commit(kafka_broker.bootstrap, topic)

    committed, aborted = anyio.run(produce)
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka_broker.bootstrap,
            "group.id": new_id("ck"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    got: list[bytes] = []
    errors: list[Any] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in (0, 1)])
        quiet_until = None
        deadline = time.monotonic() + 15
        while time.monotonic() < (quiet_until or deadline):
            msg = consumer.poll(0.1)
            if msg is not None:
                if msg.error() is None:
                    got.append(msg.value())
                elif not msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    errors.append(msg.error())
            if quiet_until is None and len(got) >= len(committed):
                quiet_until = time.monotonic() + 0.5  # anything more would show here
    finally:
        consumer.close()
    assert errors == []
    assert Counter(got) == Counter(committed)
    assert not set(aborted) & set(got)


# -- fencing -----------------------------------------------------------------------------------


async def test_zombie_producer_is_fenced(
    kafka_broker: BrokerInfo, unique_topic: str, judge: LogJudge
) -> None:
    """The successor's InitProducerId fences the zombie and aborts its open transaction.

    Apache Kafka (as the Java client sees it): the zombie's next produce to a partition of
    its transaction gets INVALID_PRODUCER_EPOCH, an abortable error; aborting then gets
    PRODUCER_FENCED, fatal. Tansu answers the produce with PRODUCER_FENCED at once.
    """
    skip_without_transactions(kafka_broker)
    await kafka_broker.create_topic(unique_topic, 2)
    tid = new_id("zombie")
    boot = kafka_broker.bootstrap
    with anyio.fail_after(GUARD):
        async with Producer(boot, transactional_id=tid, linger_ms=1) as zombie:
            zombie.begin_transaction()
            await zombie.send(unique_topic, b"zombie-1", partition=0)
            async with Producer(boot, transactional_id=tid, linger_ms=1) as successor:
                # the successor's init fenced the zombie and aborted its open transaction
                async with successor.transaction():
                    await successor.send(unique_topic, b"successor", partition=0)
                with pytest.raises((ProducerFencedError, InvalidProducerEpochError)):
                    await zombie.send(unique_topic, b"zombie-2", partition=0)
                if zombie.transaction_state is TxnState.ABORTABLE_ERROR:
                    with pytest.raises(ProducerFencedError):
                        await zombie.abort_transaction()
                assert zombie.transaction_state is TxnState.FATAL_ERROR
                with pytest.raises(ProducerFencedError):
                    zombie.begin_transaction()
    view = await judge.view(unique_topic, 2)
    assert view.committed == [b"successor"]
    assert view.aborted == [b"zombie-1"]
    assert view.open_records == 0


async def test_close_of_a_fenced_producer_with_an_abortable_transaction_does_not_raise(
    kafka_broker: BrokerInfo, unique_topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    """close() aborts a transaction left open; when that abort is refused (the producer was
    fenced meanwhile) close() logs it and finishes, as Java's close() does, instead of
    raising PRODUCER_FENCED out of ``async with``. On Apache Kafka the zombie's produce gets
    INVALID_PRODUCER_EPOCH (abortable), so close() has a transaction to abort."""
    skip_without_transactions(kafka_broker)
    await kafka_broker.create_topic(unique_topic, 1)
    tid = new_id("zombie-close")
    boot = kafka_broker.bootstrap
    with anyio.fail_after(GUARD):
        zombie = Producer(boot, transactional_id=tid, linger_ms=1)
        await zombie.start()
        zombie.begin_transaction()
        await zombie.send(unique_topic, b"zombie-1", partition=0)
        async with Producer(boot, transactional_id=tid, linger_ms=1):
            pass  # its init fences the zombie
        with pytest.raises((ProducerFencedError, InvalidProducerEpochError)):
            await zombie.send(unique_topic, b"zombie-2", partition=0)
        await zombie.close()  # must not raise
    assert zombie.transaction_state is TxnState.FATAL_ERROR
    if kafka_broker.name == "kafka":
        messages = [r.getMessage() for r in caplog.records]
        assert any("aborting the open transaction failed: PRODUCER_FENCED" in m for m in messages)


async def test_zombie_is_fenced_on_a_new_partition(kafka_broker: BrokerInfo) -> None:
    skip_without_transactions(kafka_broker)
    topic = new_id("zombie-add")
    await kafka_broker.create_topic(topic, 2)
    tid = new_id("zombie")
    with anyio.fail_after(GUARD):
        async with Producer(kafka_broker.bootstrap, transactional_id=tid) as zombie:
            zombie.begin_transaction()
            await zombie.send(topic, b"z", partition=0)
            async with Producer(kafka_broker.bootstrap, transactional_id=tid):
                pass
            # partition 1 is new to the transaction: AddPartitionsToTxn answers PRODUCER_FENCED
            with pytest.raises(ProducerFencedError):
                await zombie.send(topic, b"z", partition=1)


# -- the exactly-once pipeline, killed and restarted -------------------------------------------


def start_pipeline(bootstrap: str, names: dict[str, str], *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "examples.exactly_once",
            "--bootstrap",
            bootstrap,
            "--input",
            names["input"],
            "--output",
            names["output"],
            "--group",
            names["group"],
            "--transactional-id",
            names["tid"],
            "--max-batch",
            "25",
            *extra,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


async def test_pipeline_killed_mid_transaction_and_restarted_is_exactly_once(
    kafka_broker: BrokerInfo, judge: LogJudge
) -> None:
    """SIGKILL the example while a transaction is open (records written, not committed);
    a new instance with the same transactional id fences it, the broker aborts that
    transaction, and the new instance resumes from the committed offsets."""
    skip_without_transactions(kafka_broker)
    boot = kafka_broker.bootstrap
    names = {k: new_id(k) for k in ("input", "output", "group", "tid")}
    await kafka_broker.create_topic(names["input"], 2)
    await kafka_broker.create_topic(names["output"], 2)
    count = 300
    with anyio.fail_after(GUARD):
        async with Producer(boot, linger_ms=5) as p:
            futures = [
                await p.enqueue(names["input"], b"rec-%04d" % i, key=b"k%d" % i, partition=i % 2)
                for i in range(count)
            ]
            await p.flush()
        inputs = [f.result() for f in futures]
    expected = Counter(
        f"{md.partition}:{md.offset}:".encode() + b"REC-%04d" % i for i, md in enumerate(inputs)
    )

    # kill the first instance inside the pause of its second transaction (its records written,
    # not committed): it says so on stdout before the pause, which outlasts reading that line
    first = start_pipeline(boot, names, "--pause-in-transaction", "3")
    seen: list[str] = []
    try:
        with anyio.fail_after(GUARD):
            assert first.stdout is not None
            stdout = first.stdout
            while not (
                any(line.startswith("committed") for line in seen)
                and seen[-1].startswith("records written")
            ):
                line = (await anyio.to_thread.run_sync(stdout.readline, abandon_on_cancel=True)).decode()
                assert line, f"the pipeline ended early: {''.join(seen)}"
                seen.append(line)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    committed, _, open_records = committed_view(await read_log(boot, names["output"], 2))
    assert 0 < len(committed) < count
    assert open_records, f"no transaction was open when the first instance was killed: {seen}"

    second = start_pipeline(boot, names, "--stop-when-idle", "2")
    try:
        with anyio.fail_after(GUARD):
            while second.poll() is None:
                await anyio.sleep(0.1)
    finally:
        if second.poll() is None:
            second.kill()
    output = second.stdout.read().decode() if second.stdout else ""
    assert second.returncode == 0, output

    view = await judge.view(names["output"], 2)
    assert Counter(view.committed) == expected  # every input exactly once, by content
    assert len(view.committed) == count
    assert view.open_records == 0
    assert view.aborted, "the killed instance's open transaction should have been aborted"
    assert set(view.aborted) <= set(expected)  # ...and its records were redone by the successor
    async with Consumer(bootstrap_servers=boot, group_id=names["group"]) as consumer:
        for p, end in ((0, count // 2), (1, count // 2)):
            tp = TopicPartition(names["input"], p)
            consumer.assign([tp])
            offset = await consumer.committed(tp)
            assert offset is not None and offset.offset == end


# -- the request path under injected faults (mock cluster) ---------------------------------------


async def test_transactional_requests_retry_injected_errors(
    isolated_mock_cluster: BrokerInfo,
) -> None:
    """Retriable coordinator errors on every transactional API, a coordinator move and a
    coordinator broker going down: the transaction still commits. (The mock writes what it
    is sent, so the records are checked at their acknowledged offsets.)"""
    cluster = isolated_mock_cluster.cluster
    assert cluster is not None
    topic = new_id("faults")
    cluster.create_topic(topic, 2)
    tid = new_id("tx")
    cluster.start_request_tracking()
    cluster.push_request_errors(
        INIT_PRODUCER_ID, [COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS]
    )
    cluster.push_request_errors(ADD_PARTITIONS_TO_TXN, [CONCURRENT_TRANSACTIONS, NOT_COORDINATOR])
    cluster.push_request_errors(ADD_OFFSETS_TO_TXN, [CONCURRENT_TRANSACTIONS])
    cluster.push_request_errors(TXN_OFFSET_COMMIT, [NOT_COORDINATOR])
    cluster.push_request_errors(END_TXN, [CONCURRENT_TRANSACTIONS, NOT_COORDINATOR])
    with anyio.fail_after(GUARD):
        async with Producer(
            isolated_mock_cluster.bootstrap, transactional_id=tid, retry_backoff_ms=20
        ) as p:
            async with p.transaction():
                futures = [await p.enqueue(topic, b"v%d" % i, partition=i % 2) for i in range(10)]
                await p.send_offsets_to_transaction(
                    {TopicPartition(topic, 0): 3}, ConsumerGroupMetadata(new_id("g"))
                )
            first = [f.result() for f in futures]
            # move the transaction coordinator, then take its broker down mid-transaction
            cluster.set_coordinator("transaction", tid, 3)
            p.begin_transaction()
            await p.send(topic, b"second", partition=0)
            cluster.broker_down(3)
            cluster.set_coordinator("transaction", tid, 2)
            await p.commit_transaction()
            assert p.transaction_state is TxnState.READY
    tracked = cluster.get_requests()
    txn_apis = {FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN}
    txn_requests = [(broker, api) for broker, api, _ in tracked if api in txn_apis]
    # after the move the second transaction's partition was added on broker 3; with broker 3
    # down, EndTxn went to the new coordinator, broker 2, after a new lookup
    assert [b for b, api in txn_requests if api == ADD_PARTITIONS_TO_TXN][-1] == 3
    assert [b for b, api in txn_requests if api == END_TXN][-1] == 2
    assert txn_requests[-2][1] == FIND_COORDINATOR
    requests = Counter(api for _, api, _ in tracked)
    assert requests[INIT_PRODUCER_ID] >= 3
    assert requests[ADD_PARTITIONS_TO_TXN] >= 3 + 1
    assert requests[ADD_OFFSETS_TO_TXN] >= 2
    assert requests[TXN_OFFSET_COMMIT] >= 2
    assert requests[END_TXN] >= 3 + 1
    assert requests[FIND_COORDINATOR] >= 4  # lookups again after NOT_COORDINATOR and the move
    assert sorted(md.offset for md in first if md.partition == 0) == [0, 1, 2, 3, 4]
