"""Transactions v2 (KIP-890) on Apache Kafka 4.4, judged by Java's consumer.

The test broker finalizes ``transaction.version`` 2: Java's 4.4 producer then runs
transactions v2 (EndTxn v5, a new producer epoch after every transaction, partitions added by
the produce request itself), while kafkaio speaks the version 1 protocol (EndTxn v4 at most,
AddPartitionsToTxn before producing, Produce v11) under the broker's server-side checks
(KIP-890 part 1). One transactional id passes between the two, and each fences the other's
open transaction; what reaches the log is read by Java's consumer at both isolation levels.
"""

from __future__ import annotations

from collections import Counter

import anyio
import anyio.to_thread
import pytest

from kafkaio import Producer
from kafkaio.errors import InvalidProducerEpochError, ProducerFencedError
from kafkaio.net import Connection, ConnectionConfig
from kafkaio.net.manager import parse_bootstrap_servers
from kafkaio.producer.transaction_state import TxnState
from kafkaio.producer.transactions import END_TXN_MAX_VERSION
from kafkaio.protocol import messages as m
from kafkaio.testing import BrokerInfo
from kafkaio.testing.java import JavaClients, JavaLog, java_value

pytestmark = pytest.mark.integration


async def finalized_features(bootstrap: str) -> dict[str, int]:
    """The cluster's finalized feature levels, from the broker's ApiVersions answer."""
    host, port = parse_bootstrap_servers(bootstrap)[0]
    conn = await Connection.connect(host, port, ConnectionConfig())
    try:
        response = await conn.send(
            m.ApiVersionsRequest(client_software_name="kafkaio-tests", client_software_version="1")
        )
    finally:
        await conn.close()
    assert response.error_code == 0 and response.finalized_features_epoch >= 0, response
    return {f.name: f.max_version_level for f in response.finalized_features}


async def _log(java: JavaClients, bootstrap: str, topic: str) -> JavaLog:
    return await anyio.to_thread.run_sync(lambda: java.read_log(bootstrap, topic))


def _committed_and_aborted(
    transactions: tuple[tuple[int, int, bool], ...],
) -> tuple[set[bytes], set[bytes]]:
    committed = {java_value(i) for a, b, ok in transactions if ok for i in range(a, b + 1)}
    aborted = {java_value(i) for a, b, ok in transactions if not ok for i in range(a, b + 1)}
    return committed, aborted


async def test_the_test_broker_runs_transactions_v2_and_kafkaio_speaks_version_1(
    apache_kafka: BrokerInfo,
) -> None:
    """What the tests below rest on: the cluster finalizes transaction.version 2 (a 4.x
    cluster formatted with the default features), and kafkaio's producer stays on the
    version 1 protocol, which a transactions v2 broker still serves."""
    features = await finalized_features(apache_kafka.bootstrap)
    assert features.get("transaction.version") == 2
    assert END_TXN_MAX_VERSION == 4  # EndTxn v5 is the transactions v2 request
    assert apache_kafka.api_versions[m.EndTxnRequest.API_KEY][1] >= 5  # the broker has it


async def test_one_transactional_id_passes_between_java_v2_and_kafkaio(
    apache_kafka: BrokerInfo, java_clients: JavaClients, unique_topic: str
) -> None:
    """Java (transactions v2: a new epoch after each transaction) commits and aborts under
    a transactional id, then kafkaio (version 1) takes the id over and commits and aborts,
    then Java takes it back. Java's read_committed consumer returns exactly the committed
    records of all three, each once; no transaction is left open."""
    await apache_kafka.create_topic(unique_topic, partitions=2)
    tid = f"v2-{unique_topic}"
    boot = apache_kafka.bootstrap

    def java(start: int) -> tuple[set[bytes], set[bytes]]:
        report = java_clients.produce(
            boot, unique_topic, 100, start=start, key_mod=7, transactional_id=tid,
            txn_size=25, abort_every=2, quiet=True,
        )  # fmt: skip
        assert (report.failed, len(report.transactions)) == (0, 4), report.errors
        return _committed_and_aborted(report.transactions)

    java_committed, java_aborted = await anyio.to_thread.run_sync(java, 0)
    kio_committed = {b"kio-c-%d" % i for i in range(20)}
    kio_aborted = {b"kio-a-%d" % i for i in range(20)}
    with anyio.fail_after(60):
        async with Producer(boot, transactional_id=tid, linger_ms=1) as producer:
            async with producer.transaction():
                for value in sorted(kio_committed):
                    await producer.enqueue(unique_topic, value, key=value)
            producer.begin_transaction()
            for value in sorted(kio_aborted):
                await producer.enqueue(unique_topic, value, key=value)
            await producer.flush()
            await producer.abort_transaction()
            async with producer.transaction():  # still usable after the abort
                await producer.send(unique_topic, b"kio-last", partition=1)
    kio_committed.add(b"kio-last")
    again_committed, again_aborted = await anyio.to_thread.run_sync(java, 100)
    log = await _log(java_clients, boot, unique_topic)
    committed = java_committed | kio_committed | again_committed
    aborted = java_aborted | kio_aborted | again_aborted
    assert (len(committed), len(aborted)) == (121, 120)
    assert Counter(log.values()) == Counter(committed)  # each committed record once
    assert Counter(log.values(log.aborted)) == Counter(aborted)
    assert log.open_records == []


async def test_a_java_v2_producer_fences_kafkaio_and_aborts_its_transaction(
    apache_kafka: BrokerInfo, java_clients: JavaClients, unique_topic: str
) -> None:
    """kafkaio has a transaction open when a Java producer (transactions v2) starts under
    the same transactional id: Java's initTransactions aborts kafkaio's transaction and
    fences it; kafkaio's next request fails as fenced and the producer cannot go on, and
    only Java's records are committed."""
    await apache_kafka.create_topic(unique_topic, partitions=2)
    tid = f"v2-fence-{unique_topic}"
    boot = apache_kafka.bootstrap
    with anyio.fail_after(120):
        async with Producer(boot, transactional_id=tid, linger_ms=1) as zombie:
            zombie.begin_transaction()
            for p in (0, 1):
                await zombie.send(unique_topic, b"zombie-%d" % p, partition=p)
            report = await anyio.to_thread.run_sync(
                lambda: java_clients.produce(
                    boot, unique_topic, 30, transactional_id=tid, txn_size=10, quiet=True
                )
            )
            assert (report.failed, len(report.transactions)) == (0, 3), report.errors
            with pytest.raises((ProducerFencedError, InvalidProducerEpochError)):
                await zombie.send(unique_topic, b"zombie-late", partition=0)
                await zombie.commit_transaction()
            if zombie.transaction_state is TxnState.ABORTABLE_ERROR:
                with pytest.raises(ProducerFencedError):
                    await zombie.abort_transaction()
            assert zombie.transaction_state is TxnState.FATAL_ERROR
    log = await _log(java_clients, boot, unique_topic)
    assert Counter(log.values()) == Counter(java_value(i) for i in range(30))
    assert Counter(log.values(log.aborted)) == Counter([b"zombie-0", b"zombie-1"])
    assert log.open_records == []
