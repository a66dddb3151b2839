"""Several batches of a partition in flight (max_in_flight_requests_per_connection > 1) on
a broker that checks sequence numbers (Tansu), while answers are lost: an idempotent
producer loses no record, writes none twice, and keeps each partition's order. (On Apache
Kafka the blackhole dropped no Produce answer in 4 of 22 runs, only new connections'
ApiVersions answers, with no Produce sent for 0.6 s: not reliable there yet. Idempotent
retries on Apache Kafka: tests/faults/test_apache_faults.py.)

A proxy before the broker drops every response for a moment ("blackhole"): the requests in
flight time out, their connection closes, and their batches are retried one at a time, in
sequence order; Tansu answers DUPLICATE_SEQUENCE_NUMBER for those it had written and
OUT_OF_ORDER_SEQUENCE_NUMBER for a batch sent after one it had not.
"""

from __future__ import annotations

import anyio
import pytest

from kafkaio import Admin, NewTopic, Producer
from kafkaio.producer.future import DeliveryFuture
from kafkaio.testing.broker_info import BrokerInfo
from tests.chaos._hostile_proxy import HostileProxy
from tests.integration.test_producer import consume

pytestmark = pytest.mark.integration

PARTITIONS = 1  # every request carries a batch of the same partition
RECORDS = 6000
VALUE = 1000  # bytes: a 16 KiB batch holds about 16, so full batches are sent ahead
GUARD_S = 60


async def test_pipelined_batches_keep_order_when_answers_are_lost(
    tansu_broker: BrokerInfo, unique_topic: str
) -> None:
    host, port = tansu_broker.bootstrap.rsplit(":", 1)
    with anyio.fail_after(GUARD_S):
        async with Admin(tansu_broker.bootstrap) as admin:
            await admin.create_topics([NewTopic(unique_topic, PARTITIONS, 1)])
        async with (
            HostileProxy(host, int(port)) as proxy,
            Producer(
                proxy.bootstrap,
                linger_ms=5,
                request_timeout_ms=600,
                retry_backoff_ms=20,
                retry_backoff_max_ms=100,
                delivery_timeout_ms=30_000,
                enable_idempotence=True,
            ) as producer,
        ):
            assert producer.config.max_in_flight == 5
            futures: list[DeliveryFuture] = []
            for i in range(RECORDS):
                value = b"%08d" % i + b"." * (VALUE - 8)
                futures.append(await producer.enqueue(unique_topic, value, partition=0))
                if i % 100 == 0:
                    await anyio.sleep(0.002)  # spread the records over time
                if i == RECORDS // 3:
                    proxy.mode = "blackhole"  # the answers to what is sent now are lost
                elif i == RECORDS // 2:
                    # keep the answers lost until at least two Produce answers were (the
                    # broker may not answer within the records' few milliseconds; bounded:
                    # the assertions below say if it never happened)
                    with anyio.move_on_after(5):
                        while proxy.hostile_produce_answers < 2:
                            await anyio.sleep(0.005)
                    proxy.mode = "pass"
            await producer.flush()
            for future in futures:
                future.result()  # every record acknowledged (raises otherwise)
        assert proxy.hostile_produce_answers >= 2, "no Produce answers lost: it proved nothing"
        # one partition: several Produce requests unanswered means several of its batches
        assert proxy.max_produce_in_flight > 1, "batches were never pipelined"
        consumed = await consume(tansu_broker.bootstrap, unique_topic, PARTITIONS, RECORDS)
    indexes = {p: [int(m.value[:8]) for m in ms] for p, ms in consumed.items()}
    assert sum(len(v) for v in indexes.values()) == RECORDS  # none lost, none twice
    for partition, seen in indexes.items():
        assert seen == list(range(partition, RECORDS, PARTITIONS)), f"partition {partition}"
