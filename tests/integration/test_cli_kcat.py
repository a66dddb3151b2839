"""The CLI as a kcat user expects it (against Apache Kafka): `consume --format json | produce
--format json` copies a topic exactly (binary values and header values included), -X for
any client setting, kcat's -o forms, several topics or a regex, and Schema Registry decoding."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from typing import Any

import anyio
import pytest

from kafkaio import Admin, Consumer, NewTopic, Producer, TopicPartition
from kafkaio.testing.broker_info import BrokerInfo

pytestmark = pytest.mark.integration

KAFKAIO = [sys.executable, "-m", "kafkaio"]


def run(*args: str, stdin: bytes = b"", timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*KAFKAIO, *args], input=stdin, capture_output=True, timeout=timeout, check=False
    )


def _create(bootstrap: str, *topics: str, partitions: int = 2) -> None:
    async def create() -> None:
        async with Admin(bootstrap) as admin:
            await admin.create_topics([NewTopic(t, partitions, 1) for t in topics])

    anyio.run(create)


def _records(bootstrap: str, topic: str, total: int, partitions: int = 2) -> list[tuple[Any, ...]]:
    """The `total` records of `topic`: (partition, offset, timestamp, key, value, headers)."""

    async def read() -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            c.assign(tps)
            with anyio.fail_after(30):
                while len(out) < total:
                    for batch in (await c.getmany(timeout_ms=300)).values():
                        out += [
                            (r.partition, r.offset, r.timestamp, r.key, r.value, list(r.headers))
                            for r in batch
                        ]
        return sorted(out)

    return anyio.run(read)


def test_consume_json_piped_to_produce_json_copies_a_topic_exactly(
    broker: BrokerInfo,
) -> None:
    b = ("-b", broker.bootstrap)
    source, copy = f"src-{uuid.uuid4().hex[:8]}", f"copy-{uuid.uuid4().hex[:8]}"
    _create(broker.bootstrap, source, copy)
    originals = [
        (0, b"k\xc3", b"\xff\xfe\x00binary\x80", [("bin", b"\x00\xff"), ("txt", b"ok")]),
        (1, None, "текст ✓".encode(), [("empty", b""), ("null", None)]),
        (0, "ключ".encode(), b"", []),
        (1, b"plain", None, [("dup", b"1"), ("dup", b"\x80")]),
        (0, None, b'{"base64": "not really"}', []),
    ]

    async def produce() -> None:
        async with Producer(broker.bootstrap) as producer:
            for i, (partition, key, value, headers) in enumerate(originals):
                await producer.send(
                    source,
                    value,
                    key=key,
                    partition=partition,
                    headers=headers or None,
                    timestamp_ms=1_700_000_000_000 + i,
                )

    anyio.run(produce)
    dumped = run(*b, "consume", source, "-o", "beginning", "-e", "--format", "json")
    assert dumped.returncode == 0, dumped.stderr
    loaded = run(*b, "produce", copy, "--format", "json", stdin=dumped.stdout)
    assert loaded.returncode == 0, loaded.stderr
    want = [r[:1] + r[2:] for r in _records(broker.bootstrap, source, 5)]
    got = [r[:1] + r[2:] for r in _records(broker.bootstrap, copy, 5)]
    assert got == want and len(got) == len(originals)


def test_offsets_as_kcat_writes_them(mock_cluster: BrokerInfo, unique_topic: str) -> None:
    """On librdkafka's mock cluster: Tansu reports wrong end offsets for batches of several
    records (see the broker notes), which -N counts from."""
    b = ("-b", mock_cluster.bootstrap)
    assert mock_cluster.cluster is not None
    mock_cluster.cluster.create_topic(unique_topic, 1)
    lines = b"".join(b"v%d\n" % i for i in range(10))
    assert run(*b, "produce", unique_topic, stdin=lines).returncode == 0

    def values(*start: str) -> list[str]:
        done = run(*b, "consume", unique_topic, *start, "-e")
        assert done.returncode == 0, done.stderr
        return done.stdout.decode().split()

    assert values("-o", "beginning") == [f"v{i}" for i in range(10)]
    assert values("-o", "7") == ["v7", "v8", "v9"]
    assert values("-o", "-2") == ["v8", "v9"]
    assert values("-o", "end") == []
    stored = run(*b, "consume", unique_topic, "-o", "stored", "-e")
    assert stored.returncode == 2 and b"-o stored" in stored.stderr and b"-g" in stored.stderr
    bad = run(*b, "consume", unique_topic, "-o", "yesterday")
    assert bad.returncode == 2 and b"beginning, end, stored" in bad.stderr


def test_offset_by_timestamp(kafka_broker: BrokerInfo, unique_topic: str) -> None:
    if kafka_broker.name in ("tansu", "mock"):
        pytest.skip(
            f"{kafka_broker.name} does not look offsets up by timestamp (Tansu 0.6 answers "
            "offset 0 with its append time, librdkafka's mock cluster no offset)"
        )
    broker = kafka_broker
    b = ("-b", broker.bootstrap)
    _create(broker.bootstrap, unique_topic, partitions=1)

    async def produce() -> None:
        async with Producer(broker.bootstrap) as producer:
            for i in range(10):
                await producer.send(
                    unique_topic, b"v%d" % i, timestamp_ms=1_700_000_000_000 + i * 1000
                )

    anyio.run(produce)
    done = run(*b, "consume", unique_topic, "-o", "s@1700000005000", "-e")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [b"v5", b"v6", b"v7", b"v8", b"v9"]
    old = run(*b, "consume", unique_topic, "--timestamp", "1700000008500", "-e")
    assert old.stdout.split() == [b"v9"]


def test_several_topics_and_a_regex(broker: BrokerInfo) -> None:
    b = ("-b", broker.bootstrap)
    stem = f"multi-{uuid.uuid4().hex[:8]}"
    a, c, other = f"{stem}-a", f"{stem}-c", f"x{stem}"
    _create(broker.bootstrap, a, c, other, partitions=1)
    for topic in (a, c, other):
        assert run(*b, "produce", topic, stdin=topic.encode() + b"\n").returncode == 0
    both = run(*b, "consume", a, other, "-o", "beginning", "-e")
    assert both.returncode == 0, both.stderr
    assert sorted(both.stdout.decode().split()) == sorted([a, other])
    regex = run(*b, "consume", f"^{stem}-.*", "-o", "beginning", "-e")
    assert regex.returncode == 0, regex.stderr
    assert sorted(regex.stdout.decode().split()) == sorted([a, c])
    group = run(
        *b, "consume", f"^{stem}-", "-g", f"{stem}-g", "--session-timeout-ms", "2000",
        "-o", "beginning", "-e",
    )  # as a group member: the consumer subscribes to the pattern
    assert group.returncode == 0, group.stderr
    assert sorted(group.stdout.decode().split()) == sorted([a, c])
    none = run(*b, "consume", "^nothing-matches-this-.*", "-e")
    assert none.returncode == 2 and b"no topic matches" in none.stderr


def test_dash_x_sets_any_client_option(broker: BrokerInfo, unique_topic: str) -> None:
    b = ("-b", broker.bootstrap)
    _create(broker.bootstrap, unique_topic, partitions=1)
    produced = run(
        *b,
        "produce",
        unique_topic,
        "-X",
        "linger.ms=1",
        "-X",
        "client.id=copy-tool",
        "-X",
        "enable_idempotence=true",
        stdin=b"a\nb\n",
    )
    assert produced.returncode == 0, produced.stderr
    consumed = run(*b, "consume", unique_topic, "-o", "beginning", "-e", "-X", "max.poll.records=1")
    assert consumed.stdout.split() == [b"a", b"b"]
    typo = run(*b, "produce", unique_topic, "-X", "lingr.ms=1", stdin=b"a\n")
    assert typo.returncode == 2 and b"did you mean 'linger_ms'" in typo.stderr
    wrong = run(*b, "consume", unique_topic, "-X", "linger.ms=1", "-e")
    assert wrong.returncode == 2 and b"Consumer has no option 'linger_ms'" in wrong.stderr


def test_consume_decodes_avro_through_the_schema_registry(
    broker: BrokerInfo, schema_registry: str, unique_topic: str
) -> None:
    from kafkaio.schema_registry import AvroSerializer, SchemaRegistryClient

    schema = {
        "type": "record",
        "name": "Order",
        "fields": [{"name": "id", "type": "int"}, {"name": "item", "type": "string"}],
    }
    _create(broker.bootstrap, unique_topic, partitions=1)

    async def produce() -> None:
        async with SchemaRegistryClient(schema_registry) as registry:
            async with Producer(
                broker.bootstrap,
                key_serializer=str.encode,
                value_serializer=AvroSerializer(registry, schema),
            ) as producer:
                for i in range(3):
                    await producer.send(unique_topic, {"id": i, "item": f"é{i}"}, key=f"k{i}")

    anyio.run(produce)
    b = ("-b", broker.bootstrap)
    base = (*b, "consume", unique_topic, "-o", "beginning", "-e", "-r", schema_registry)
    as_json = run(*base, "-s", "value=avro", "--format", "json")
    assert as_json.returncode == 0, as_json.stderr
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [(r["key"], r["value"]) for r in rows] == [
        (f"k{i}", {"id": i, "item": f"é{i}"}) for i in range(3)
    ]
    raw = run(*base, "-s", "avro", "-K", " ")
    assert raw.stdout.decode().splitlines()[0] == 'k0 {"id": 0, "item": "é0"}'
    missing = run(*b, "consume", unique_topic, "-s", "avro", "-e")
    assert missing.returncode == 2 and b"-r URL" in missing.stderr
    wrong = run(*base, "-s", "value=json")
    assert wrong.returncode == 1 and b"AVRO schema, not JSON" in wrong.stderr


def test_stored_offsets_of_a_group(apache_kafka: BrokerInfo, unique_topic: str) -> None:
    """-o stored -g G starts where the group committed (kcat's -o stored with -G), commits
    what it printed, so a second run prints nothing; a partition the group never committed
    starts at the end (the reset kcat uses for stored without a commit)."""
    b = ("-b", apache_kafka.bootstrap)
    _create(apache_kafka.bootstrap, unique_topic, partitions=2)
    group = f"g-{uuid.uuid4().hex[:8]}"

    async def produce_and_commit() -> None:
        async with Producer(apache_kafka.bootstrap) as producer:
            for partition in (0, 1):
                for i in range(10):
                    await producer.send(unique_topic, b"p%dv%d" % (partition, i), partition=partition)
        async with Consumer(bootstrap_servers=apache_kafka.bootstrap, group_id=group) as c:
            await c.commit({TopicPartition(unique_topic, 0): 6})

    anyio.run(produce_and_commit)
    first = run(*b, "consume", unique_topic, "-g", group, "-o", "stored", "-e")
    assert first.returncode == 0, first.stderr
    assert sorted(first.stdout.decode().split()) == ["p0v6", "p0v7", "p0v8", "p0v9"]
    again = run(*b, "consume", unique_topic, "-g", group, "-o", "stored", "-e")
    assert again.returncode == 0, again.stderr
    assert again.stdout == b""
