"""One lifecycle for every client (kafkaio.runtime.shell), in the shapes applications use:
start() and close() in different tasks (a FastAPI lifespan split into startup and shutdown
hooks, aiohttp's on_startup / on_cleanup), close() under a cancel scope, clients closed in
the order they started, on asyncio and trio. Afterwards no socket of the process is left
open, calls raise ClientClosedError, and a second close() is harmless.

Before the shell, 8 of 12 such shapes failed: "Attempted to exit cancel scope in a different
task", RuntimeError under move_on_after, "Nursery misnesting" on trio, 2 sockets left open.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from kafkaio import Admin, Consumer, Producer, TopicPartition
from kafkaio.errors import (
    BootstrapError,
    ClientClosedError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from kafkaio.testing import BrokerInfo

pytestmark = pytest.mark.integration

BACKENDS = ["asyncio", "trio"]
KINDS = ["producer", "consumer", "admin"]
GUARD_S = 60


def sockets() -> int:
    """Sockets this process holds open now."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return count


def make(kind: str, bootstrap: str) -> Any:
    if kind == "producer":
        return Producer(bootstrap)
    if kind == "consumer":
        return Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    return Admin(bootstrap)


async def use(kind: str, client: Any, topic: str) -> None:
    """Something the client really does on the broker."""
    if kind == "producer":
        await client.send(topic, b"v")
    elif kind == "consumer":
        client.assign([TopicPartition(topic, 0)])
        await client.getmany(timeout_ms=200)
    else:
        await client.list_topics()


async def called_after_close(kind: str, client: Any, topic: str) -> BaseException:
    try:
        await use(kind, client, topic)
    except BaseException as exc:  # noqa: BLE001 - returned for the test to judge
        return exc
    raise AssertionError(f"the closed {kind} still worked")


def run(backend: str, scenario: Callable[[], Awaitable[None]]) -> None:
    async def guarded() -> None:
        with anyio.fail_after(GUARD_S):
            await scenario()

    anyio.run(guarded, backend=backend)


@pytest.fixture
def topic(broker: BrokerInfo) -> str:
    name = f"kafkaio-lifecycle-{uuid.uuid4().hex[:8]}"
    anyio.run(broker.create_topic, name)
    return name


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", KINDS)
def test_start_in_one_task_close_in_another(
    broker: BrokerInfo, topic: str, kind: str, backend: str
) -> None:
    """A FastAPI lifespan split into startup and shutdown hooks, or aiohttp's on_startup and
    on_cleanup: start() returns in a task that then ends; close() runs in another."""

    async def scenario() -> None:
        before = sockets()
        client = make(kind, broker.bootstrap)
        async with anyio.create_task_group() as startup:
            startup.start_soon(client.start)
        await use(kind, client, topic)
        async with anyio.create_task_group() as shutdown:
            shutdown.start_soon(client.close)
        assert isinstance(await called_after_close(kind, client, topic), KafkaError)
        await client.close()  # harmless
        assert sockets() == before

    run(backend, scenario)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("deadline_s", [0.0, 0.05, 5.0])
def test_close_under_a_cancel_scope(
    broker: BrokerInfo, topic: str, kind: str, backend: str, deadline_s: float
) -> None:
    """close() inside anyio.move_on_after: its steps may be cut short, but the network task
    stops and every connection closes all the same."""

    async def scenario() -> None:
        before = sockets()
        client = make(kind, broker.bootstrap)
        await client.start()
        await use(kind, client, topic)
        with anyio.move_on_after(deadline_s):
            await client.close()
        await client.close()
        assert sockets() == before
        error = await called_after_close(kind, client, topic)
        assert isinstance(error, (ClientClosedError, KafkaError)), error

    run(backend, scenario)


@pytest.mark.parametrize("backend", BACKENDS)
def test_clients_closed_in_the_order_they_started(
    broker: BrokerInfo, topic: str, backend: str
) -> None:
    """start p; start c; start a; close p; close c; close a (not the reverse order)."""

    async def scenario() -> None:
        before = sockets()
        clients = [(kind, make(kind, broker.bootstrap)) for kind in KINDS]
        for _, client in clients:
            await client.start()
        for kind, client in clients:
            await use(kind, client, topic)
        for _, client in clients:
            await client.close()
        assert sockets() == before

    run(backend, scenario)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", KINDS)
def test_a_failed_start_says_so_the_same_way_and_leaves_nothing_open(
    kind: str, backend: str
) -> None:
    """No broker at the address: every client raises BootstrapError, which is both a
    KafkaConnectionError and a KafkaTimeoutError (what the clients raised before), and no
    socket or task is left behind; starting again is refused."""

    async def scenario() -> None:
        before = sockets()
        quick: dict[str, Any] = {"request_timeout_ms": 300, "reconnect_backoff_ms": 20}
        if kind == "producer":
            client: Any = Producer("127.0.0.1:1", max_block_ms=600, **quick)
        elif kind == "consumer":
            client = Consumer(
                bootstrap_servers="127.0.0.1:1",
                default_api_timeout_ms=600,
                fetch_max_wait_ms=100,
                **quick,
            )
        else:
            client = Admin("127.0.0.1:1", default_api_timeout_ms=600, **quick)
        with pytest.raises(BootstrapError) as raised:
            await client.start()
        assert isinstance(raised.value, KafkaConnectionError)
        assert isinstance(raised.value, KafkaTimeoutError)
        assert "127.0.0.1:1" in str(raised.value)
        assert sockets() == before
        with pytest.raises(KafkaError, match="started once"):
            await client.start()
        await client.close()

    run(backend, scenario)


def test_the_deprecated_close_timeout_in_seconds_still_works(
    broker: BrokerInfo, topic: str
) -> None:
    async def scenario() -> None:
        producer = Producer(broker.bootstrap)
        await producer.start()
        await producer.send(topic, b"v")
        with pytest.warns(DeprecationWarning, match="timeout_ms"):
            await producer.close(timeout=1.0)
        assert isinstance(await called_after_close("producer", producer, topic), KafkaError)

    run("asyncio", scenario)
