"""examples/fastapi_avro.py under uvicorn (a real server process) with Apache Kafka and the test
Schema Registry: orders posted as JSON are produced as Confluent-framed Avro (readable by
confluent-kafka's deserializer), consumed back as models, and shutdown commits them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from kafkaio import Admin, Consumer, TopicPartition
from kafkaio.testing import BrokerInfo
from kafkaio.testing._probe import free_loopback_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 2
ORDERS = [
    {"order_id": f"o-{i}", "customer": f"c{i % 3}", "amount_cents": 100 * i, "items": ["x"] * i}
    for i in range(6)
]


def _wait(url: str, seconds: float = 60) -> httpx.Response:
    deadline = time.monotonic() + seconds
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = httpx.get(url, timeout=2)
            if last.status_code == 200:
                return last
        except httpx.TransportError as exc:
            last = exc
        time.sleep(0.1)
    raise AssertionError(f"{url} not 200 after {seconds} s: {last!r}")


def _raw_records(bootstrap: str, topic: str, count: int) -> list[Any]:
    async def read() -> list[Any]:
        out: list[Any] = []
        async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            with anyio.fail_after(30):
                while len(out) < count:
                    for batch in (await c.getmany(timeout_ms=300)).values():
                        out.extend(batch)
        return out

    return anyio.run(read)


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int | None]:
    async def fetch() -> dict[int, int | None]:
        async with Admin(bootstrap) as admin:
            offsets = await admin.list_group_offsets(
                group, [TopicPartition(topic, p) for p in range(PARTITIONS)]
            )
        return {tp.partition: o.offset for tp, o in offsets.items()}

    return anyio.run(fetch)


def test_fastapi_avro_example_under_uvicorn(
    broker: BrokerInfo, schema_registry: str, unique_topic: str
) -> None:
    pytest.importorskip("uvicorn", reason="uvicorn is not installed")
    from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentRegistry
    from confluent_kafka.schema_registry.avro import AvroDeserializer as ConfluentAvro
    from confluent_kafka.serialization import MessageField, SerializationContext

    anyio.run(broker.create_topic, unique_topic, PARTITIONS)
    port = free_loopback_port()
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP": broker.bootstrap,
        "KAFKA_TOPIC": unique_topic,
        "SCHEMA_REGISTRY_URL": schema_registry,
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "examples.fastapi_avro:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait(base + "/health")
        assert _wait(base + "/ready").json()["ready"] is True
        placed = []
        for order in ORDERS:
            response = httpx.post(base + "/orders", json=order, timeout=30)
            assert response.status_code == 201, response.text
            placed.append(response.json())
        assert {p["topic"] for p in placed} == {unique_topic}
        bad = httpx.post(base + "/orders", json={**ORDERS[0], "amount_cents": -1}, timeout=30)
        assert bad.status_code == 422
        deadline = time.monotonic() + 30
        while len(recent := httpx.get(base + "/orders/recent").json()) < len(ORDERS):
            assert time.monotonic() < deadline, recent
            time.sleep(0.1)
        got = sorted((r["order_id"], r["customer"], r["amount_cents"], r["items"]) for r in recent)
        assert got == sorted(
            (o["order_id"], o["customer"], o["amount_cents"], o["items"]) for o in ORDERS
        )
        assert all(r["note"] is None for r in recent)
    finally:
        server.send_signal(signal.SIGINT)
        try:
            output = server.communicate(timeout=30)[0].decode(errors="replace")
        except subprocess.TimeoutExpired:
            server.kill()
            output = server.communicate()[0].decode(errors="replace")
    assert server.returncode == 0, output
    assert "Application shutdown complete" in output

    # the bytes on the topic are the Confluent wire format: confluent-kafka reads them
    confluent = ConfluentAvro(ConfluentRegistry({"url": schema_registry}))
    raw = _raw_records(broker.bootstrap, unique_topic, len(ORDERS))
    decoded = [
        confluent(r.value, SerializationContext(unique_topic, MessageField.VALUE)) for r in raw
    ]
    assert all(r.value[0] == 0 for r in raw)
    assert sorted(d["order_id"] for d in decoded) == [o["order_id"] for o in ORDERS]
    assert {r.key for r in raw} == {b"c0", b"c1", b"c2"}
    # shutdown committed every handled order
    committed = _committed(broker.bootstrap, "kafkaio-avro-example", unique_topic)
    positions = {p: 0 for p in range(PARTITIONS)}
    for r in raw:
        positions[r.partition] = max(positions[r.partition], r.offset + 1)
    assert {p: committed.get(p) or 0 for p in range(PARTITIONS)} == positions
