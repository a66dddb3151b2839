"""The web examples (examples/fastapi_app.py, examples/aiohttp_app.py) and the ConsumerRunner
helper against Apache Kafka (the FastAPI example on Tansu too, the broker of `make demo`): produce over HTTP, the background consumer sees every record, health
shows lag per partition, shutdown commits what was handled and leaves the group."""

from __future__ import annotations

import importlib.util
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import anyio
import pytest

from kafkaio import Admin, Consumer, Producer, TopicPartition
from kafkaio.integrations import ConsumerRunner, RunnerState
from kafkaio.testing import BrokerInfo

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 2
COUNT = 8
# Tansu holds a group's first join for the rebalance timeout: keep it short there.
GROUP_OPTIONS = {
    "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 500,
    "rebalance_timeout_ms": 1000,
}

T = TypeVar("T")


def _load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"kafkaio_example_{name}", ROOT / "examples" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pydantic look the module up
    spec.loader.exec_module(module)
    return module


def _wait_sync(fetch: Callable[[], T], ready: Callable[[T], bool], seconds: float = 30) -> T:
    deadline = time.monotonic() + seconds
    while True:
        value = fetch()
        if ready(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not ready after {seconds} s: {value!r}")
        time.sleep(0.05)


async def _group_state(
    bootstrap: str, group: str, topic: str, partitions: int = PARTITIONS
) -> tuple[dict[int, int | None], Any]:
    """The group's committed offsets per partition and its description."""
    async with Admin(bootstrap) as admin:
        offsets = await admin.list_group_offsets(
            group, [TopicPartition(topic, p) for p in range(partitions)]
        )
        description = (await admin.describe_groups([group]))[group]
    return {tp.partition: o.offset for tp, o in offsets.items()}, description


def _expected_recent(topic: str) -> list[tuple[int, int, str, str]]:
    return sorted((i % PARTITIONS, i // PARTITIONS, f"k{i}", f"v{i}") for i in range(COUNT))


def _as_tuples(recent: list[dict[str, Any]]) -> list[tuple[int, int, str, str]]:
    return sorted((r["partition"], r["offset"], r["key"], r["value"]) for r in recent)


def _check_health(body: dict[str, Any], topic: str) -> None:
    assert body["status"] == "ok" and body["ready"] is True
    consumer = body["consumer"]
    assert consumer["state"] == "running" and consumer["healthy"] is True
    assert consumer["handled"] == COUNT and consumer["handler_errors"] == 0
    assert consumer["total_lag"] == 0
    assert [
        (p["topic"], p["partition"], p["position"], p["lag"]) for p in consumer["partitions"]
    ] == [(topic, p, COUNT // PARTITIONS, 0) for p in range(PARTITIONS)]


# -- FastAPI -------------------------------------------------------------------------------


@pytest.mark.parametrize("broker", ["kafka", "tansu"], indirect=True)
def test_fastapi_example(broker: BrokerInfo, unique_topic: str) -> None:
    testclient = pytest.importorskip("fastapi.testclient", reason="fastapi/httpx not installed")
    module = _load_example("fastapi_app")
    anyio.run(broker.create_topic, unique_topic, PARTITIONS)
    group = f"{unique_topic}-group"
    app = module.create_app(
        broker.bootstrap, unique_topic, group_id=group, consumer_options=GROUP_OPTIONS
    )
    with testclient.TestClient(app) as client:
        acks = []
        for i in range(COUNT):
            response = client.post(
                "/produce", json={"key": f"k{i}", "value": f"v{i}", "partition": i % PARTITIONS}
            )
            assert response.status_code == 200, response.text
            acks.append(response.json())
        assert [(a["topic"], a["partition"], a["offset"]) for a in acks] == [
            (unique_topic, i % PARTITIONS, i // PARTITIONS) for i in range(COUNT)
        ]
        bad = client.post("/produce", json={"value": "x", "partition": 7})
        assert bad.status_code == 400 and "partition 7" in bad.json()["detail"]

        recent = _wait_sync(lambda: client.get("/recent").json(), lambda r: len(r) >= COUNT)
        assert _as_tuples(recent) == _expected_recent(unique_topic)
        health = _wait_sync(
            lambda: client.get("/health"), lambda r: r.json()["consumer"]["total_lag"] == 0
        )
        assert health.status_code == 200
        _check_health(health.json(), unique_topic)
        ready = client.get("/ready")
        assert ready.status_code == 200 and ready.json()["ready"] is True
    # shutdown committed the handled records and left the group
    committed, description = anyio.run(_group_state, broker.bootstrap, group, unique_topic)
    assert committed == {p: COUNT // PARTITIONS for p in range(PARTITIONS)}
    assert description.members == ()


# -- aiohttp -------------------------------------------------------------------------------


async def test_aiohttp_example(broker: BrokerInfo, unique_topic: str) -> None:
    test_utils = pytest.importorskip("aiohttp.test_utils", reason="aiohttp is not installed")
    module = _load_example("aiohttp_app")
    await broker.create_topic(unique_topic, PARTITIONS)
    group = f"{unique_topic}-group"
    app = module.create_app(
        broker.bootstrap, unique_topic, group_id=group, consumer_options=GROUP_OPTIONS
    )
    with anyio.fail_after(60):
        async with test_utils.TestClient(test_utils.TestServer(app)) as client:
            for i in range(COUNT):
                response = await client.post(
                    "/produce", json={"key": f"k{i}", "value": f"v{i}", "partition": i % PARTITIONS}
                )
                assert response.status == 200, await response.text()
                ack = await response.json()
                assert (ack["partition"], ack["offset"]) == (i % PARTITIONS, i // PARTITIONS)
            bad = await client.post("/produce", json={"value": "x", "partition": "zero"})
            assert bad.status == 400
            while True:
                recent = await (await client.get("/recent")).json()
                health = await client.get("/health")
                body = await health.json()
                if len(recent) >= COUNT and body["consumer"]["total_lag"] == 0:
                    break
                await anyio.sleep(0.05)
            assert _as_tuples(recent) == _expected_recent(unique_topic)
            assert health.status == 200
            _check_health(body, unique_topic)
            ready = await client.get("/ready")
            assert ready.status == 200 and (await ready.json())["ready"] is True
    committed, description = await _group_state(broker.bootstrap, group, unique_topic)
    assert committed == {p: COUNT // PARTITIONS for p in range(PARTITIONS)}
    assert description.members == ()


# -- ConsumerRunner ------------------------------------------------------------------------


async def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    async with Producer(bootstrap) as producer:
        for value in values:
            await producer.send(topic, value, partition=0)


async def test_runner_skip_policy_logs_handler_errors_and_goes_on(
    broker: BrokerInfo, unique_topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    await broker.create_topic(unique_topic, 1)
    values = [b"a", b"b", b"bad", b"c"]
    await _produce(broker.bootstrap, unique_topic, values)
    seen: list[bytes] = []

    async def handler(record: Any) -> None:
        if record.value == b"bad":
            raise ValueError("cannot handle this one")
        seen.append(record.value)

    consumer = Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
    caplog.set_level(logging.ERROR, logger="kafkaio.integrations")
    with anyio.fail_after(30):
        async with ConsumerRunner(consumer, handler, on_error="skip", retries=0) as runner:
            consumer.assign([TopicPartition(unique_topic, 0)])
            while runner.status().handled + runner.status().handler_errors < len(values):
                await anyio.sleep(0.02)
            status = runner.status()
            assert status.state == "running" and status.healthy
        assert runner.state is RunnerState.STOPPED
    assert seen == [b"a", b"b", b"c"]
    assert (status.handled, status.handler_errors, status.skipped) == (3, 1, 1)
    assert status.last_error is not None and "cannot handle this one" in status.last_error
    assert any(
        f"handler failed for {unique_topic}[0] offset 2" in r.getMessage() for r in caplog.records
    )


async def test_runner_stop_on_error_commits_only_handled_records(
    broker: BrokerInfo, unique_topic: str
) -> None:
    await broker.create_topic(unique_topic, 1)
    await _produce(broker.bootstrap, unique_topic, [b"a", b"b", b"bad", b"c", b"d"])
    group = f"{unique_topic}-group"
    seen: list[bytes] = []
    handler = _poison_at_bad(seen)

    consumer = _group_consumer(broker.bootstrap, unique_topic, group)
    with anyio.fail_after(30):
        async with ConsumerRunner(consumer, handler, stop_on_error=True) as runner:
            while runner.state is RunnerState.RUNNING:
                await anyio.sleep(0.02)
            status = runner.status()
            assert runner.state is RunnerState.FAILED and not status.healthy
            _, during = await _group_state(broker.bootstrap, group, unique_topic, 1)
            assert len(during.members) == 1  # still a member until the runner stops
        assert runner.state is RunnerState.FAILED
    assert seen == [b"a", b"b"]
    committed, description = await _group_state(broker.bootstrap, group, unique_topic, 1)
    assert committed == {0: 2}  # the poison record is read again by the next member
    assert description.members == ()


def _poison_at_bad(seen: list[bytes]) -> Callable[[Any], None]:
    """A handler that keeps values in `seen` and raises for the value b"bad"."""

    def handler(record: Any) -> None:
        if record.value == b"bad":
            raise ValueError("poison record")
        seen.append(record.value)

    return handler


def _group_consumer(bootstrap: str, topic: str, group: str) -> Consumer:
    return Consumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **GROUP_OPTIONS,
    )


async def test_runner_default_retries_then_stops_at_the_record_without_losing_it(
    broker: BrokerInfo, unique_topic: str
) -> None:
    """The default policy: a failing handler is retried (3 times, with backoff), then the
    loop stops at the record, which is not committed: the next member reads it again."""
    from kafkaio.backoff import ExponentialBackoff

    await broker.create_topic(unique_topic, 1)
    await _produce(broker.bootstrap, unique_topic, [b"a", b"flaky", b"bad", b"c"])
    group = f"{unique_topic}-group"
    calls: list[bytes] = []

    def handler(record: Any) -> None:
        calls.append(record.value)
        if record.value == b"flaky" and calls.count(b"flaky") < 2:
            raise ConnectionError("downstream busy")  # passes on the retry
        if record.value == b"bad":
            raise ValueError("poison record")

    consumer = _group_consumer(broker.bootstrap, unique_topic, group)
    with anyio.fail_after(30):
        async with ConsumerRunner(
            consumer, handler, retry_backoff=ExponentialBackoff(10, 20)
        ) as runner:
            while runner.state is RunnerState.RUNNING:
                await anyio.sleep(0.02)
            status = runner.status()
    assert calls == [b"a", b"flaky", b"flaky", b"bad", b"bad", b"bad", b"bad"]
    assert runner.state is RunnerState.FAILED and not status.healthy
    assert (status.handled, status.handler_errors, status.retries) == (2, 5, 4)
    committed, _ = await _group_state(broker.bootstrap, group, unique_topic, 1)
    assert committed == {0: 2}  # "bad" (offset 2) is not committed: nothing is lost


async def test_runner_dead_letter_policy_sends_the_record_with_its_origin(
    broker: BrokerInfo, unique_topic: str
) -> None:
    from kafkaio.integrations.runner import DLT_EXCEPTION, DLT_MESSAGE, DLT_OFFSET, DLT_TOPIC

    await broker.create_topic(unique_topic, 1)
    dead = f"{unique_topic}-dlt"
    await broker.create_topic(dead, 1)
    async with Producer(broker.bootstrap) as producer:
        for value in (b"a", b"bad", b"c"):
            await producer.send(unique_topic, value, key=b"k-" + value, headers=[("h", b"1")])
    group = f"{unique_topic}-group"
    seen: list[bytes] = []
    handler = _poison_at_bad(seen)

    consumer = _group_consumer(broker.bootstrap, unique_topic, group)
    with anyio.fail_after(30):
        async with Producer(broker.bootstrap) as dlt_producer:
            async with ConsumerRunner(
                consumer,
                handler,
                on_error="dead_letter",
                retries=1,
                retry_backoff=None,
                dead_letter_topic=dead,
                dead_letter_producer=dlt_producer,
            ) as runner:
                while runner.status().handled < 2:
                    await anyio.sleep(0.02)
                status = runner.status()
    assert seen == [b"a", b"c"] and status.dead_lettered == 1 and status.healthy
    committed, _ = await _group_state(broker.bootstrap, group, unique_topic, 1)
    assert committed == {0: 3}
    async with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as reader:
        reader.assign([TopicPartition(dead, 0)])
        with anyio.fail_after(20):
            while not (batch := await reader.getmany(timeout_ms=300)):
                pass
    (record,) = batch[TopicPartition(dead, 0)]
    headers = dict(record.headers)
    assert (record.key, record.value, headers["h"]) == (b"k-bad", b"bad", b"1")
    assert headers[DLT_TOPIC] == unique_topic.encode() and headers[DLT_OFFSET] == b"1"
    assert headers[DLT_EXCEPTION] == b"ValueError" and headers[DLT_MESSAGE] == b"poison record"


def test_runner_refuses_a_dead_letter_policy_without_its_topic() -> None:
    from kafkaio.errors import KafkaConfigError

    consumer = Consumer(bootstrap_servers="127.0.0.1:1")
    with pytest.raises(KafkaConfigError, match="dead_letter_topic and dead_letter_producer"):
        ConsumerRunner(consumer, print, on_error="dead_letter")
    with pytest.raises(KafkaConfigError, match="on_error is 'ignore'"):
        ConsumerRunner(consumer, print, on_error="ignore")


async def test_runner_is_alive_but_not_ready_until_it_has_partitions(
    broker: BrokerInfo, unique_topic: str
) -> None:
    """Liveness vs readiness: a running loop without partitions (a group member still
    joining, or nothing assigned yet) is healthy but not ready; its client likewise."""
    await broker.create_topic(unique_topic, 1)
    consumer = Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
    with anyio.fail_after(30):
        async with ConsumerRunner(consumer, print) as runner:
            status = runner.status()
            assert status.healthy and not status.ready
            assert status.as_dict()["ready"] is False
            assert consumer.health().healthy and not consumer.health().ready
            consumer.assign([TopicPartition(unique_topic, 0)])
            assert runner.status().ready and consumer.health().ready
            assert consumer.health().as_dict()["ready"] is True
