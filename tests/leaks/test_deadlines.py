"""Every public await of Producer, Consumer and Admin ends on its deadline with a typed error
when the broker accepts requests and never answers; ``close()`` always completes.

The broker answers discovery only (ApiVersions, Metadata, FindCoordinator) so each call
reaches its own request; a second broker answers nothing at all (start() must give up).
After each scenario no task or socket of the client is left (tests/leaks/_scenario.py).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup  # type: ignore[import-not-found]

from kafkaio import Admin, Consumer, NewTopic, OffsetAndMetadata, Producer, TopicPartition
from kafkaio.admin import AclBindingFilter, ConfigResource, NewPartitions, OffsetSpec
from kafkaio.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from tests.leaks._scenario import outcome_by, run_scenario, typed_error
from tests.leaks._silent_broker import TOPIC, SilentBroker

BACKENDS = ["asyncio", "trio"]
TIMEOUT_ERRORS = (KafkaTimeoutError, KafkaConnectionError)
TP = TopicPartition(TOPIC, 0)
PRODUCER = dict(
    request_timeout_ms=300,
    delivery_timeout_ms=700,
    linger_ms=0,
    max_block_ms=400,
    retry_backoff_ms=20,
    retry_backoff_max_ms=50,
)
CONSUMER = dict(
    request_timeout_ms=400,
    default_api_timeout_ms=500,
    fetch_max_wait_ms=100,
    retry_backoff_ms=20,
    retry_backoff_max_ms=50,
)
ADMIN = dict(request_timeout_ms=300, default_api_timeout_ms=500, retry_backoff_ms=20)

# -- Producer -----------------------------------------------------------------------------

ProducerCall = Callable[[Producer], Awaitable[Any]]
# each call and its deadline (s): delivery_timeout_ms, flush's timeout, max_block_ms
PRODUCER_CALLS: dict[str, tuple[ProducerCall, float]] = {
    "send": (lambda p: p.send(TOPIC, b"v", partition=0), 0.7),
    "enqueue-then-await": (lambda p: _await_future(p), 0.7),
    "flush": (lambda p: _flush(p), 0.5),
    "partitions_for-unknown-topic": (lambda p: p.partitions_for("no-such-topic"), 0.4),
}


async def _await_future(p: Producer) -> Any:
    future = await p.enqueue(TOPIC, b"v", partition=1)
    return await future


async def _flush(p: Producer) -> None:
    await p.enqueue(TOPIC, b"v", partition=0)
    await p.flush(timeout_ms=500)


@pytest.mark.parametrize("call", list(PRODUCER_CALLS))
def test_producer_calls_end_on_their_deadline(call: str) -> None:
    async def scenario(broker: SilentBroker) -> None:
        # Not idempotent: the SilentBroker answers Metadata but drops InitProducerId, so when
        # both go on one connection with InitProducerId first it answers out of order (no
        # Kafka broker does) and the client rightly drops the connection, and a call could end
        # on a missing topic's max_block_ms instead. Produce requests are what this is about.
        producer = Producer(broker.bootstrap, acks=1, enable_idempotence=False, **PRODUCER)
        await producer.start()
        make, deadline = PRODUCER_CALLS[call]
        try:
            error = typed_error(await outcome_by(make(producer), deadline))
        finally:
            await producer.close(timeout_ms=500)
        assert isinstance(error, TIMEOUT_ERRORS), error
        if call.startswith("partitions_for"):  # answered: the topic never shows up
            assert "no-such-topic" in str(error)
        else:
            assert 0 in broker.dropped  # the Produce reached the broker, which did not answer

    run_scenario("asyncio", scenario)


def test_producer_blocked_on_full_buffer_ends_on_max_block_ms() -> None:
    async def scenario(broker: SilentBroker) -> None:
        async with Producer(broker.bootstrap, buffer_memory=4096, **PRODUCER) as producer:

            async def fill() -> None:
                for _ in range(100):  # nothing is ever acked: the budget fills, then blocks
                    await producer.enqueue(TOPIC, bytes(1000), partition=0)

            error = await outcome_by(fill(), PRODUCER["max_block_ms"] / 1000)
            assert isinstance(error, KafkaTimeoutError), error

    run_scenario("asyncio", scenario)


@pytest.mark.parametrize("backend", BACKENDS)
def test_transactional_producer_start_ends_on_its_deadline(backend: str) -> None:
    async def scenario(broker: SilentBroker) -> None:
        producer = Producer(broker.bootstrap, transactional_id="tx-1", **PRODUCER)
        error = await outcome_by(producer.start(), PRODUCER["max_block_ms"] / 1000)
        assert isinstance(error, TIMEOUT_ERRORS), error
        await producer.close()

    run_scenario(backend, scenario)


# -- Consumer -----------------------------------------------------------------------------

ConsumerCall = Callable[[Consumer], Awaitable[Any]]
CONSUMER_CALLS: dict[str, ConsumerCall] = {
    "position": lambda c: c.position(TP, timeout_ms=300),
    "committed": lambda c: c.committed(TP, timeout_ms=300),
    "commit": lambda c: c.commit({TP: OffsetAndMetadata(5)}, timeout_ms=300),
    "seek_to_beginning": lambda c: c.seek_to_beginning(TP, timeout_ms=300),
    "seek_to_end": lambda c: c.seek_to_end(TP, timeout_ms=300),
    "offsets_for_times": lambda c: c.offsets_for_times({TP: 0}, timeout_ms=300),
    "beginning_offsets": lambda c: c.beginning_offsets([TP], timeout_ms=300),
    "end_offsets": lambda c: c.end_offsets([TP], timeout_ms=300),
}


@pytest.mark.parametrize("call", list(CONSUMER_CALLS))
def test_consumer_calls_end_on_their_deadline(call: str) -> None:
    async def scenario(broker: SilentBroker) -> None:
        async with Consumer(bootstrap_servers=broker.bootstrap, group_id="g", **CONSUMER) as c:
            c.assign([TP])
            error = typed_error(await outcome_by(CONSUMER_CALLS[call](c), 0.3))
        assert isinstance(error, TIMEOUT_ERRORS), error
        assert broker.dropped

    run_scenario("asyncio", scenario)


@pytest.mark.parametrize("backend", BACKENDS)
def test_consumer_getmany_returns_empty_and_close_leaves_the_group(backend: str) -> None:
    """A group member whose JoinGroup is never answered: getmany returns {} on time and
    close() (LeaveGroup unanswered too) completes."""

    async def scenario(broker: SilentBroker) -> None:
        async with Consumer(
            TOPIC, bootstrap_servers=broker.bootstrap, group_id="g", **CONSUMER
        ) as c:
            assert await outcome_by(c.getmany(timeout_ms=300), 0.3) == {}
        assert 11 in broker.dropped  # JoinGroup

    run_scenario(backend, scenario)


# -- Admin --------------------------------------------------------------------------------

AdminCall = Callable[[Admin], Awaitable[Any]]
ADMIN_CALLS: dict[str, AdminCall] = {
    "create_topics": lambda a: a.create_topics([NewTopic("x", 1, 1)], timeout_ms=400),
    "delete_topics": lambda a: a.delete_topics(["x"], timeout_ms=400),
    "create_partitions": lambda a: a.create_partitions({TOPIC: NewPartitions(4)}, timeout_ms=400),
    "describe_configs": lambda a: a.describe_configs([ConfigResource.topic(TOPIC)], timeout_ms=400),
    "list_groups": lambda a: a.list_groups(timeout_ms=400),
    "describe_groups": lambda a: a.describe_groups(["g"], timeout_ms=400),
    "delete_groups": lambda a: a.delete_groups(["g"], timeout_ms=400),
    "list_group_offsets": lambda a: a.list_group_offsets("g", timeout_ms=400),
    "alter_group_offsets": lambda a: a.alter_group_offsets("g", {TP: 1}, timeout_ms=400),
    "delete_group_offsets": lambda a: a.delete_group_offsets("g", [TP], timeout_ms=400),
    "group_lag": lambda a: a.group_lag("g", timeout_ms=400),
    "list_offsets": lambda a: a.list_offsets({TP: OffsetSpec.LATEST}, timeout_ms=400),
    "delete_records": lambda a: a.delete_records({TP: 1}, timeout_ms=400),
    "describe_acls": lambda a: a.describe_acls(AclBindingFilter(), timeout_ms=400),
    "describe_cluster": lambda a: a.describe_cluster(timeout_ms=400),
    "describe_log_dirs": lambda a: a.describe_log_dirs(timeout_ms=400),
}


@pytest.mark.parametrize("call", list(ADMIN_CALLS))
def test_admin_calls_end_on_their_deadline(call: str) -> None:
    async def scenario(broker: SilentBroker) -> None:
        async with Admin(broker.bootstrap, **ADMIN) as admin:
            error = typed_error(await outcome_by(ADMIN_CALLS[call](admin), 0.4))
        assert isinstance(error, TIMEOUT_ERRORS), error
        assert broker.dropped

    run_scenario("asyncio", scenario)


# -- a broker that answers nothing: start() gives up, close() completes ---------------------

# each client and the deadline (s) of its start(): max_block_ms, default_api_timeout_ms
STARTS: dict[str, Callable[[str], tuple[Any, float]]] = {
    "producer": lambda b: (Producer(b, **PRODUCER), 0.4),
    "consumer": lambda b: (Consumer(bootstrap_servers=b, **CONSUMER), 0.5),
    "admin": lambda b: (Admin(b, **ADMIN), 0.5),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("client", list(STARTS))
def test_start_against_a_black_hole_fails_cleanly(client: str, backend: str) -> None:
    async def scenario(broker: SilentBroker) -> None:
        instance, deadline = STARTS[client](broker.bootstrap)
        error = await outcome_by(instance.start(), deadline)
        assert isinstance(error, TIMEOUT_ERRORS), error
        await instance.close()  # after a failed start: completes, idempotent
        assert broker.accepted >= 1

    run_scenario(backend, scenario, answer_discovery=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_close_with_undelivered_records_is_bounded(backend: str) -> None:
    """close() with no timeout still ends: records fail after delivery_timeout_ms."""

    async def scenario(broker: SilentBroker) -> None:
        # Not idempotent: the SilentBroker answers Metadata but drops InitProducerId, so when
        # the two share a connection with InitProducerId first (the managers' retry timing
        # decides; trio also shuffles task order), it answers out of order and the client
        # rightly drops the connection, and start() could miss max_block_ms. Plain produce
        # requests are what this test is about.
        producer = Producer(broker.bootstrap, acks=1, enable_idempotence=False, **PRODUCER)
        await producer.start()
        futures = [await producer.enqueue(TOPIC, b"v%d" % i, partition=i % 2) for i in range(50)]
        assert await outcome_by(producer.close(), PRODUCER["delivery_timeout_ms"] / 1000) is None
        for future in futures:
            with pytest.raises(KafkaError):
                future.result()

    run_scenario(backend, scenario)


def test_the_leak_check_catches_a_client_left_open() -> None:
    """The checks above can fail: a producer started in a task and never closed is reported."""
    import asyncio

    async def scenario(broker: SilentBroker) -> None:
        producer = Producer(broker.bootstrap, **PRODUCER)
        started = asyncio.Event()

        async def start_and_forget() -> None:
            await producer.start()
            started.set()
            await asyncio.sleep(60)

        asyncio.get_running_loop().create_task(start_and_forget(), name="forgotten")
        await started.wait()

    with pytest.raises(BaseExceptionGroup) as info:
        run_scenario("asyncio", scenario)
    assert info.group_contains(AssertionError, match="tasks left running")
