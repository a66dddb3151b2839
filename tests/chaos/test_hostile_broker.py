"""A broker that turns hostile (garbage, huge or negative sizes, wrong correlation ids,
slow-loris, silence) under Producer, Consumer and Admin: each call fails with a typed error
in bounded time, and the client works again once the broker behaves (a proxy before Apache
Kafka).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from kafkaio import Admin, Consumer, NewTopic, Producer, TopicPartition
from kafkaio.errors import KafkaError
from kafkaio.testing.broker_info import BrokerInfo
from tests.chaos._hostile_proxy import MODES, HostileProxy

pytestmark = pytest.mark.integration
GUARD_S = 15


async def _expect_typed_error(call: Callable[[], Awaitable[Any]]) -> KafkaError:
    try:
        result = await call()
    except KafkaError as exc:
        return exc
    raise AssertionError(f"a hostile broker's answer was accepted: {result!r}")


@pytest.mark.parametrize("mode", MODES)
async def test_clients_fail_cleanly_and_recover(
    apache_kafka: BrokerInfo, unique_topic: str, mode: str
) -> None:
    host, port = apache_kafka.bootstrap.rsplit(":", 1)
    tp = TopicPartition(unique_topic, 0)
    fast = dict(request_timeout_ms=400, retry_backoff_ms=20, retry_backoff_max_ms=100)
    with anyio.fail_after(GUARD_S):
        async with HostileProxy(host, int(port)) as proxy:
            async with (
                Admin(proxy.bootstrap, default_api_timeout_ms=800, **fast) as admin,
                Producer(
                    proxy.bootstrap,
                    delivery_timeout_ms=800,
                    linger_ms=0,
                    max_block_ms=800,
                    enable_idempotence=False,  # the calls are about framing, not sequences
                    **fast,
                ) as producer,
                Consumer(
                    bootstrap_servers=proxy.bootstrap,
                    default_api_timeout_ms=800,
                    fetch_max_wait_ms=100,
                    **fast,
                ) as consumer,
            ):
                await admin.create_topics([NewTopic(unique_topic, 1, 1)])
                await producer.send(unique_topic, b"ok-1", partition=0)
                consumer.assign([tp])
                proxy.mode = mode
                calls: list[Callable[[], Awaitable[Any]]] = [
                    lambda: producer.send(unique_topic, b"x", partition=0),
                    lambda: consumer.end_offsets([tp], timeout_ms=800),
                    lambda: admin.describe_cluster(timeout_ms=800),
                ]
                errors: list[KafkaError] = []

                async def expect(call: Callable[[], Awaitable[Any]]) -> None:
                    errors.append(await _expect_typed_error(call))

                async with anyio.create_task_group() as tg:  # the three at once
                    for call in calls:
                        tg.start_soon(expect, call)
                assert proxy.hostile_frames > 0
                proxy.mode = "pass"
                # recovered: every client works again through the same proxy
                await producer.send(unique_topic, b"ok-2", partition=0)
                ends = await consumer.end_offsets([tp], timeout_ms=5000)
                assert ends[tp] >= 2
                assert (await admin.describe_cluster(timeout_ms=5000)).brokers
    assert len(errors) == 3
    print(f"\nhostile-{mode}", sorted(type(e).__name__ for e in errors))
