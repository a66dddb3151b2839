"""The measured clients: how each library produces, consumes (assign mode), sends paced
stamped records for latency, and runs as a group member. Everything here runs in the
child process of one measurement (see isolate.py); the suites only pick names.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import importlib
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.ceiling import measure_ceiling
from benchmarks.common import (
    APACHE,
    GROUP_HEARTBEAT_MS,
    GROUP_SESSION_TIMEOUT_MS,
    MOCK,
    latency_summary,
    payload,
    payloads,
    process_cpu_seconds,
    stamped,
    unstamp,
)
from benchmarks.isolate import Meter, Metrics, Phases
from benchmarks.report import CEILING, ORDERED_CEILING, note

KAFKAIO = "kafkaio"
KAFKAIO_ITER = "kafkaio (async for)"
KAFKAIO_ENQUEUE = "kafkaio (await enqueue)"
AIOKAFKA = "aiokafka"
CONFLUENT = "confluent-kafka (sync)"
CONFLUENT_AIO = "confluent-kafka (aio)"
# librdkafka with the in-flight limit of kafkaio and Java (5; librdkafka's own default without
# idempotence is 1,000,000): how much of its lead on one partition is deeper pipelining
CONFLUENT_5 = "confluent-kafka (sync, 5 in flight)"
JAVA = "Java (kafka-clients)"  # Kafka's perf tools in a JVM: the reference on Apache Kafka
KAFKA_PYTHON = "kafka-python"
PEERS = (KAFKAIO, AIOKAFKA, CONFLUENT, CONFLUENT_AIO, KAFKA_PYTHON)  # kafkaio first
# CEILING ("broker ceiling") and ORDERED_CEILING (one request in flight), from report:
# produce only, pre-built batches, see ceiling.py

# modules each client imports: loaded in the child before the clock starts (kafkaio loads
# its modules on first use, so its clients list what they use, and anyio its asyncio
# backend, about 12 ms of a first producer's start; see also _prepare)
_KAFKAIO_MODULES = (
    "kafkaio",
    "kafkaio.producer",
    "kafkaio.consumer",
    "kafkaio.admin",
    "anyio._backends._asyncio",
)
_CEILING_MODULES = ("kafkaio.admin", "kafkaio.net", "kafkaio.protocol.messages", "kafkaio.records")
_IMPORTS = {
    KAFKAIO: _KAFKAIO_MODULES,
    KAFKAIO_ITER: _KAFKAIO_MODULES,
    KAFKAIO_ENQUEUE: _KAFKAIO_MODULES,
    JAVA: (),
    AIOKAFKA: ("aiokafka",),
    CONFLUENT: ("confluent_kafka",),
    CONFLUENT_AIO: ("confluent_kafka.aio",),
    CONFLUENT_5: ("confluent_kafka",),
    KAFKA_PYTHON: ("kafka",),
    CEILING: _CEILING_MODULES,
    ORDERED_CEILING: _CEILING_MODULES,
}


# clients that cannot talk to a broker: (broker spec, client) -> why (a note says so)
UNABLE = {
    (MOCK, KAFKA_PYTHON): (
        "kafka-python 3.0.12 is not measured on librdkafka's mock cluster: the mock answers "
        "its ApiVersions v4 request with UNSUPPORTED_VERSION in the v0 layout (KIP-511), which "
        "kafka-python cannot decode, so it never connects"
    ),
}


def _java_unable(broker: str | None) -> str | None:
    """Why the Java row is not measured on `broker` (None: it is)."""
    if broker != APACHE:
        return f"{JAVA}: the JVM reference row is measured on Apache Kafka (--broker apache)"
    from benchmarks import java

    reason = java.unavailable_reason()
    return None if reason is None else f"{JAVA} is not measured: {reason}"


def available(names: tuple[str, ...], broker: str | None = None) -> tuple[str, ...]:
    """The clients of `names` whose library is installed and that can use `broker` (a
    BenchBroker spec); a note for each one left out."""
    out = []
    for name in names:
        unable = UNABLE.get((broker, name))
        if name == JAVA:
            unable = _java_unable(broker)
        if unable is not None:
            note(unable)
            continue
        try:
            for module in _IMPORTS[name]:
                importlib.import_module(module)
        except ImportError as exc:
            note(f"{name} is not measured: {exc}")
            continue
        out.append(name)
    return tuple(out)


def _prepare(client: str) -> None:
    for module in _IMPORTS[client]:
        importlib.import_module(module)
    if "kafkaio" in _IMPORTS[client]:
        # the protocol message modules load on first use too: as every peer does at import
        # time, load them all before the clock starts
        from kafkaio.protocol import messages

        messages.load_all()


# -- produce throughput -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProduceSpec:
    size: int  # value bytes
    codec: str  # none, gzip, snappy, lz4, zstd
    acks: str  # "1" or "all"; "all" turns idempotence on where the broker allows it
    records: int
    linger_ms: int = 5
    batch_size: int = 16384


AIOKAFKA_NO_IDEMPOTENCE = (
    "aiokafka 0.14's InitProducerId gets UNKNOWN_SERVER_ERROR from Tansu 0.6, so with "
    "acks=all aiokafka runs without idempotence (the other clients run with it)"
)


async def _produce_kafkaio(
    bootstrap: str, topic: str, values: list[bytes], spec: ProduceSpec
) -> None:
    """produce() without awaiting; a record it cannot buffer now (WouldBlockError: the
    buffer is full) goes to enqueue(), which waits for room. The loop awaits once every
    1,024 records besides, as an application awaits its sources (confluent-kafka's loop
    calls poll(0) every 1,000)."""
    from kafkaio.producer import WouldBlockError

    async with _kafkaio_producer(bootstrap, spec) as producer:
        await producer.send(topic, b"warm-up")
        produce, enqueue = producer.produce, producer.enqueue
        n = len(values)
        for i in range(spec.records):
            try:
                produce(topic, values[i % n])
            except WouldBlockError:
                await enqueue(topic, values[i % n])
            if not i & 1023:
                await asyncio.sleep(0)
        await producer.flush()


async def _produce_kafkaio_enqueue(
    bootstrap: str, topic: str, values: list[bytes], spec: ProduceSpec
) -> None:
    """Every record through ``await enqueue()`` (the coroutine API)."""
    async with _kafkaio_producer(bootstrap, spec) as producer:
        await producer.send(topic, b"warm-up")
        enqueue = producer.enqueue
        n = len(values)
        for i in range(spec.records):
            await enqueue(topic, values[i % n])
        await producer.flush()


def _kafkaio_producer(bootstrap: str, spec: ProduceSpec) -> Any:
    from kafkaio.producer import Producer

    return Producer(
        bootstrap,
        acks=spec.acks,
        compression_type=spec.codec,
        linger_ms=spec.linger_ms,
        batch_size=spec.batch_size,
        enable_idempotence=spec.acks == "all",
    )


async def _produce_aiokafka(
    bootstrap: str, topic: str, values: list[bytes], spec: ProduceSpec
) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError as AioKafkaError

    def make(idempotence: bool) -> AIOKafkaProducer:
        return AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks=-1 if spec.acks == "all" else 1,
            compression_type=None if spec.codec == "none" else spec.codec,
            linger_ms=spec.linger_ms,
            max_batch_size=spec.batch_size,
            enable_idempotence=idempotence,
        )

    producer = make(spec.acks == "all")
    try:
        await producer.start()
    except AioKafkaError:
        await producer.stop()
        note(AIOKAFKA_NO_IDEMPOTENCE)
        producer = make(False)
        await producer.start()
    try:
        await (await producer.send(topic, b"warm-up"))
        send = producer.send
        n = len(values)
        for i in range(spec.records):
            await send(topic, values[i % n])
        await producer.flush()
    finally:
        await producer.stop()


def _confluent_producer_conf(bootstrap: str, spec: ProduceSpec) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": spec.acks,
        "compression.type": spec.codec,
        "linger.ms": spec.linger_ms,
        "batch.size": spec.batch_size,
        "enable.idempotence": spec.acks == "all",
        "queue.buffering.max.messages": 1_000_000,
    }


def _produce_confluent(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    spec: ProduceSpec,
    in_flight: int | None = None,
) -> None:
    from confluent_kafka import Producer

    conf = _confluent_producer_conf(bootstrap, spec)
    if in_flight is not None:
        conf["max.in.flight.requests.per.connection"] = in_flight
    producer = Producer(conf)
    producer.produce(topic, b"warm-up")
    producer.flush(30)
    produce, poll = producer.produce, producer.poll
    n = len(values)
    for i in range(spec.records):
        while True:
            try:
                produce(topic, values[i % n])
                break
            except BufferError:
                poll(0.001)
        if i % 1000 == 0:
            poll(0)
    if producer.flush(120):
        raise RuntimeError("confluent-kafka did not deliver everything within 120 s")


async def _produce_confluent_aio(
    bootstrap: str, topic: str, values: list[bytes], spec: ProduceSpec
) -> None:
    from confluent_kafka.aio import AIOProducer

    producer = AIOProducer(_confluent_producer_conf(bootstrap, spec))
    try:
        await (await producer.produce(topic, b"warm-up"))
        produce = producer.produce
        n = len(values)
        for i in range(spec.records):
            await produce(topic, values[i % n])
        await producer.flush()
    finally:
        await producer.close()


def _produce_kafka_python(
    bootstrap: str, topic: str, values: list[bytes], spec: ProduceSpec
) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all" if spec.acks == "all" else 1,
        compression_type=None if spec.codec == "none" else spec.codec,
        linger_ms=spec.linger_ms,
        batch_size=spec.batch_size,
        enable_idempotence=spec.acks == "all",
    )
    try:
        producer.send(topic, b"warm-up").get(30)
        send = producer.send
        n = len(values)
        for i in range(spec.records):
            send(topic, values[i % n])
        producer.flush(120)
    finally:
        producer.close()


def _sync(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    def run(*args: Any) -> Any:
        return asyncio.run(fn(*args))  # type: ignore[arg-type]

    return run


PRODUCERS: dict[str, Callable[[str, str, list[bytes], ProduceSpec], None]] = {
    KAFKAIO: _sync(_produce_kafkaio),
    KAFKAIO_ENQUEUE: _sync(_produce_kafkaio_enqueue),
    AIOKAFKA: _sync(_produce_aiokafka),
    CONFLUENT: _produce_confluent,
    CONFLUENT_5: functools.partial(_produce_confluent, in_flight=5),
    CONFLUENT_AIO: _sync(_produce_confluent_aio),
    KAFKA_PYTHON: _produce_kafka_python,
}


def measure_produce(client: str, bootstrap: str, topic: str, spec: ProduceSpec) -> Metrics:
    """Child: `client` produces spec.records values and waits for every ack (wall time
    includes client start and the final flush). The broker ceiling times its sends only."""
    _prepare(client)
    if client == CEILING:
        return measure_ceiling(bootstrap, topic, spec)
    if client == ORDERED_CEILING:
        return measure_ceiling(bootstrap, topic, spec, in_flight=1)
    if client == JAVA:
        from benchmarks import java

        return java.produce(
            bootstrap, topic, spec.size, spec.codec, spec.acks, spec.records,
            spec.linger_ms, spec.batch_size,
        )
    values = payloads(spec.size)
    with Meter() as meter:
        PRODUCERS[client](bootstrap, topic, values, spec)
    return meter.throughput(spec.records, spec.size)


# -- consume throughput (assign mode, from the beginning) ---------------------------------


async def _consume_kafkaio(
    bootstrap: str,
    topic: str,
    partitions: int,
    wanted: int,
    phases: Phases,
    group: str | None = None,
) -> int:
    from kafkaio import Consumer, TopicPartition

    n = 0
    async with Consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", **_group_options(group)
    ) as consumer:
        if group:
            consumer.subscribe([topic])
        else:
            consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        while n < wanted:
            batches = await consumer.getmany(timeout_ms=1000)
            if batches:
                phases.first()
            for records in batches.values():
                for r in records:
                    n += len(r.value) > 0  # touch every record as an application would
        phases.mark("last")
    phases.mark("closed")
    return n


async def _consume_kafkaio_iter(
    bootstrap: str,
    topic: str,
    partitions: int,
    wanted: int,
    phases: Phases,
    group: str | None = None,
) -> int:
    from kafkaio import Consumer, TopicPartition

    n = 0
    async with Consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", **_group_options(group)
    ) as consumer:
        if group:
            consumer.subscribe([topic])
        else:
            consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        async for r in consumer:
            if n == 0:
                phases.first()
            n += len(r.value) > 0
            if n >= wanted:
                break
        phases.mark("last")
    phases.mark("closed")
    return n


async def _consume_aiokafka(
    bootstrap: str,
    topic: str,
    partitions: int,
    wanted: int,
    phases: Phases,
    group: str | None = None,
) -> int:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    n = 0
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", **_group_options(group)
    )
    await consumer.start()
    try:
        if group:
            consumer.subscribe([topic])
        else:
            consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        while n < wanted:
            batches = await consumer.getmany(timeout_ms=1000)
            if batches:
                phases.first()
            for records in batches.values():
                for r in records:
                    n += len(r.value) > 0
        phases.mark("last")
    finally:
        await consumer.stop()
    phases.mark("closed")
    return n


def _group_options(group: str | None) -> dict[str, Any]:
    """A group member's options for kafkaio and aiokafka (none for assign mode): the group,
    the benchmarks' session timeouts (see common.GROUP_SESSION_TIMEOUT_MS), no auto-commit."""
    if not group:
        return {}
    return {
        "group_id": group,
        "session_timeout_ms": GROUP_SESSION_TIMEOUT_MS,
        "heartbeat_interval_ms": GROUP_HEARTBEAT_MS,
        "enable_auto_commit": False,
    }


def _confluent_consumer_conf(
    bootstrap: str, group: str | None = None, **extra: Any
) -> dict[str, Any]:
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group or f"bench-{time.monotonic_ns()}",  # required, unused by assign()
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        **extra,
    }
    if group:
        conf["session.timeout.ms"] = GROUP_SESSION_TIMEOUT_MS
        conf["heartbeat.interval.ms"] = GROUP_HEARTBEAT_MS
    return conf


def _consume_confluent(
    bootstrap: str,
    topic: str,
    partitions: int,
    wanted: int,
    phases: Phases,
    group: str | None = None,
) -> int:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(_confluent_consumer_conf(bootstrap, group))
    n = 0
    try:
        if group:
            consumer.subscribe([topic])
        else:
            consumer.assign(
                [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
            )
        while n < wanted:
            messages = consumer.consume(num_messages=1000, timeout=1.0)
            if messages:
                phases.first()
            for message in messages:
                if message.error() is None:
                    n += len(message.value() or b"") > 0
        phases.mark("last")
    finally:
        consumer.close()
    phases.mark("closed")
    return n


async def _consume_confluent_aio(
    bootstrap: str,
    topic: str,
    partitions: int,
    wanted: int,
    phases: Phases,
    group: str | None = None,
) -> int:
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition
    from confluent_kafka.aio import AIOConsumer

    consumer = AIOConsumer(_confluent_consumer_conf(bootstrap, group))
    n = 0
    try:
        if group:
            await consumer.subscribe([topic])
        else:
            await consumer.assign(
                [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
            )
        while n < wanted:
            messages = await consumer.consume(num_messages=1000, timeout=1.0)
            if messages:
                phases.first()
            for message in messages:
                if message.error() is None:
                    n += len(message.value() or b"") > 0
        phases.mark("last")
    finally:
        await consumer.close()
    phases.mark("closed")
    return n


def _consume_kafka_python(
    bootstrap: str,
    topic: str,
    partitions: int,
    wanted: int,
    phases: Phases,
    group: str | None = None,
) -> int:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **({"group_id": group} if group else {}),
    )
    n = 0
    try:
        if group:
            consumer.subscribe([topic])
        else:
            consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        while n < wanted:
            polled = consumer.poll(timeout_ms=1000)
            if polled:
                phases.first()
            for records in polled.values():
                for r in records:
                    n += len(r.value) > 0
        phases.mark("last")
    finally:
        consumer.close()
    phases.mark("closed")
    return n


CONSUMERS: dict[str, Callable[..., int]] = {
    KAFKAIO: _sync(_consume_kafkaio),
    KAFKAIO_ITER: _sync(_consume_kafkaio_iter),
    AIOKAFKA: _sync(_consume_aiokafka),
    CONFLUENT: _consume_confluent,
    CONFLUENT_AIO: _sync(_consume_confluent_aio),
    KAFKA_PYTHON: _consume_kafka_python,
}


def measure_consume(
    client: str,
    bootstrap: str,
    topic: str,
    partitions: int,
    records: int,
    size: int,
    group: str | None = None,
) -> Metrics:
    """Child: `client` assigns every partition (or, with `group`, subscribes as the only
    member of that new group) and reads `records` records from the start.

    Throughput and CPU per record are the steady state, from the first record to the last;
    start-up (construction, connecting, assigning, the first fetch) and close are reported
    apart (``startup_s``, ``close_s``), as is the whole run (``whole_msg_per_s``)."""
    if client == JAVA:
        from benchmarks import java

        if group is None:
            raise ValueError(f"{JAVA} consumes as a group member only (ConsumerPerformance)")
        return java.consume(bootstrap, topic, records, size, group)
    _prepare(client)
    gc.collect()
    phases = Phases()
    phases.mark("created")
    got = CONSUMERS[client](bootstrap, topic, partitions, records, phases, group)
    if got < records:
        raise RuntimeError(f"{client} read {got} records from {topic}, expected {records}")
    return phases.metrics(records, size)


# -- latency: produce→ack and produce→consume at a steady rate ----------------------------


class LatencyRecorder:
    """Send times by sequence number; ack and end-to-end latencies (ns) as they arrive.
    Thread-safe enough for one producer thread, one ack thread and one consumer thread.
    Without `consume` the run has no consumer: it is ready at the first ack (not the first
    record received) and done when every record is acknowledged."""

    def __init__(self, filler: bytes, total: int, consume: bool = True) -> None:
        self.filler = filler
        self.total = total
        self.consume = consume
        self.sent: list[int] = [0] * total
        self.ack_ns: list[int | None] = [None] * total
        self.e2e_ns: list[int | None] = [None] * total
        self.received = 0
        self.acks = 0
        self.deadline = float("inf")  # perf_counter seconds; set once sending is done
        self.ready = threading.Event()  # the first record came back (received, or acked)

    def value(self, seq: int) -> bytes:
        """The stamped record value for `seq` (its send time is now)."""
        v = stamped(self.filler, seq)
        self.sent[seq] = unstamp(v)[0]
        return v

    def acked(self, seq: int) -> None:
        self.ack_ns[seq] = time.perf_counter_ns() - self.sent[seq]
        self.acks += 1
        if not self.consume:
            self.ready.set()

    def consumed(self, value: bytes, now_ns: int) -> None:
        sent, seq = unstamp(value)
        if 0 <= seq < self.total and self.e2e_ns[seq] is None:
            self.e2e_ns[seq] = now_ns - sent
            self.received += 1
        self.ready.set()

    def done(self) -> bool:
        back = self.received if self.consume else self.acks
        return back >= self.total or time.perf_counter() > self.deadline

    def finish_sending(self, grace_s: float = 30.0) -> None:
        self.deadline = time.perf_counter() + grace_s

    @property
    def series(self) -> dict[str, list[int | None]]:
        """The measured series by metric prefix: acks, and end to end with a consumer."""
        if self.consume:
            return {"ack_": self.ack_ns, "e2e_": self.e2e_ns}
        return {"ack_": self.ack_ns}

    def summary(self, skip: int) -> Metrics:
        out: Metrics = {}
        for prefix, values in self.series.items():
            kept = values[skip:]
            ms = [v / 1e6 for v in kept if v is not None]
            for key, value in latency_summary(ms).items():
                out[prefix + key] = value
            out[prefix + "missing"] = float(len(kept) - len(ms))
        return out


def _consumed_or_note(rec: LatencyRecorder, message: Any, client: str) -> None:
    """A confluent-kafka message: a latency sample, or a note of the error it carries."""
    error = message.error()
    if error is None:
        rec.consumed(message.value(), time.perf_counter_ns())
    else:
        note(f"{client}, latency consumer: {error.name()} ({error.str()})")


async def _paced_async(
    rec: LatencyRecorder, send: Callable[[int], Awaitable[None]], rate: int
) -> None:
    """send(seq) for seq 1..total-1 at `rate` per second (seq 0 is the readiness probe)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    for seq in range(1, rec.total):
        delay = start + seq / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        await send(seq)


def _paced_sync(
    rec: LatencyRecorder, send: Callable[[int], None], rate: int, idle: Callable[[float], Any]
) -> None:
    start = time.perf_counter()
    for seq in range(1, rec.total):
        delay = start + seq / rate - time.perf_counter()
        if delay > 0:
            idle(delay)
        send(seq)


async def _until_first(rec: LatencyRecorder, timeout: float = 60.0) -> None:
    deadline = time.perf_counter() + timeout
    while not rec.ready.is_set():
        if time.perf_counter() > deadline:
            raise TimeoutError(f"the first record did not come back within {timeout:.0f} s")
        await asyncio.sleep(0.01)


def _consumer_task(
    rec: LatencyRecorder, consume: Callable[[], Awaitable[None]]
) -> asyncio.Task[None] | None:
    """The run's consumer as a task, or None when the producer runs alone."""
    return asyncio.create_task(consume()) if rec.consume else None


def _consumer_thread(rec: LatencyRecorder, consume: Callable[[], None]) -> threading.Thread | None:
    """The run's consumer in a started thread, or None when the producer runs alone."""
    if not rec.consume:
        return None
    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    return thread


async def _until_done(rec: LatencyRecorder, consumer: asyncio.Task[None] | None) -> None:
    rec.finish_sending()
    while not rec.done():
        await asyncio.sleep(0.01)
    if consumer is not None:
        await consumer


def _until_done_sync(rec: LatencyRecorder, consumer: threading.Thread | None) -> None:
    rec.finish_sending()
    if consumer is not None:
        consumer.join()


def _wait_first_sync(rec: LatencyRecorder, idle: Callable[[float], Any]) -> None:
    deadline = time.perf_counter() + 60
    while not rec.ready.is_set():
        if time.perf_counter() > deadline:
            raise TimeoutError("the first record did not come back within 60 s")
        idle(0.01)


async def _latency_kafkaio(
    bootstrap: str, topic: str, rec: LatencyRecorder, rate: int, fetch_wait_ms: int
) -> None:
    from kafkaio import Consumer, Producer, TopicPartition

    async def consume() -> None:
        async with Consumer(
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=fetch_wait_ms,
        ) as consumer:
            consumer.assign([TopicPartition(topic, 0)])
            while not rec.done():
                batches = await consumer.getmany(timeout_ms=100)
                now = time.perf_counter_ns()
                for records in batches.values():
                    for r in records:
                        rec.consumed(r.value, now)

    async with Producer(bootstrap, acks="1", linger_ms=0) as producer:
        task = _consumer_task(rec, consume)

        async def send(seq: int) -> None:
            future = await producer.enqueue(topic, rec.value(seq))
            future.add_done_callback(lambda _, seq=seq: rec.acked(seq))

        await send(0)
        await _until_first(rec)
        await _paced_async(rec, send, rate)
        await _until_done(rec, task)


async def _latency_aiokafka(
    bootstrap: str, topic: str, rec: LatencyRecorder, rate: int, fetch_wait_ms: int
) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def consume() -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=fetch_wait_ms,
        )
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            while not rec.done():
                batches = await consumer.getmany(timeout_ms=100)
                now = time.perf_counter_ns()
                for records in batches.values():
                    for r in records:
                        rec.consumed(r.value, now)
        finally:
            await consumer.stop()

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
    await producer.start()
    try:
        task = _consumer_task(rec, consume)

        async def send(seq: int) -> None:
            future = await producer.send(topic, rec.value(seq))
            future.add_done_callback(lambda _, seq=seq: rec.acked(seq))

        await send(0)
        await _until_first(rec)
        await _paced_async(rec, send, rate)
        await _until_done(rec, task)
    finally:
        await producer.stop()


async def _latency_confluent_aio(
    bootstrap: str, topic: str, rec: LatencyRecorder, rate: int, fetch_wait_ms: int
) -> None:
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition
    from confluent_kafka.aio import AIOConsumer, AIOProducer

    async def consume() -> None:
        consumer = AIOConsumer(
            _confluent_consumer_conf(bootstrap, **{"fetch.wait.max.ms": fetch_wait_ms})
        )
        try:
            await consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            while not rec.done():  # poll, not consume(): that waits for a full batch
                message = await consumer.poll(0.1)
                if message is not None:
                    _consumed_or_note(rec, message, CONFLUENT_AIO)
        finally:
            await consumer.close()

    producer = AIOProducer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    try:
        task = _consumer_task(rec, consume)

        async def send(seq: int) -> None:
            future = await producer.produce(topic, rec.value(seq))
            future.add_done_callback(lambda _, seq=seq: rec.acked(seq))

        await send(0)
        await producer.flush()
        await _until_first(rec)
        await _paced_async(rec, send, rate)
        await producer.flush()
        await _until_done(rec, task)
    finally:
        await producer.close()


def _latency_confluent(
    bootstrap: str, topic: str, rec: LatencyRecorder, rate: int, fetch_wait_ms: int
) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    def consume() -> None:
        consumer = Consumer(
            _confluent_consumer_conf(bootstrap, **{"fetch.wait.max.ms": fetch_wait_ms})
        )
        try:
            consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            while not rec.done():  # poll, not consume(): that waits for a full batch
                message = consumer.poll(0.1)
                if message is not None:
                    _consumed_or_note(rec, message, CONFLUENT)
        finally:
            consumer.close()

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    thread = _consumer_thread(rec, consume)

    def send(seq: int) -> None:
        producer.produce(topic, rec.value(seq), on_delivery=lambda err, msg: rec.acked(seq))
        producer.poll(0)

    send(0)
    _wait_first_sync(rec, producer.poll)
    _paced_sync(rec, send, rate, producer.poll)
    producer.flush(30)
    _until_done_sync(rec, thread)


def _latency_kafka_python(
    bootstrap: str, topic: str, rec: LatencyRecorder, rate: int, fetch_wait_ms: int
) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    def consume() -> None:
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=fetch_wait_ms,
        )
        try:
            consumer.assign([TopicPartition(topic, 0)])
            while not rec.done():
                batches = consumer.poll(timeout_ms=100)
                now = time.perf_counter_ns()
                for records in batches.values():
                    for r in records:
                        rec.consumed(r.value, now)
        finally:
            consumer.close()

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
    thread = _consumer_thread(rec, consume)
    try:

        def send(seq: int) -> None:
            producer.send(topic, rec.value(seq)).add_callback(lambda _: rec.acked(seq))

        send(0)
        _wait_first_sync(rec, time.sleep)
        _paced_sync(rec, send, rate, time.sleep)
        producer.flush(30)
        _until_done_sync(rec, thread)
    finally:
        producer.close()


LATENCY: dict[str, Callable[[str, str, LatencyRecorder, int, int], None]] = {
    KAFKAIO: _sync(_latency_kafkaio),
    AIOKAFKA: _sync(_latency_aiokafka),
    CONFLUENT: _latency_confluent,
    CONFLUENT_AIO: _sync(_latency_confluent_aio),
    KAFKA_PYTHON: _latency_kafka_python,
}


def measure_latency(
    client: str,
    bootstrap: str,
    topic: str,
    rate: int,
    seconds: float,
    size: int,
    skip: int,
    fetch_wait_ms: int,
    broker_pid: int | None = None,
    consume: bool = True,
) -> Metrics:
    """Child: one producer and one consumer of `client` (one partition, linger 0, acks=1);
    the producer sends stamped records at `rate`/s for `seconds`, the consumer (long-poll
    `fetch_wait_ms`) notes when each arrives; without `consume`, the producer alone (acks
    only). The first `skip` records are left out. Also the CPU this process and the broker
    process (`broker_pid`, when embedded) used, in % of one core over the run."""
    _prepare(client)
    rec = LatencyRecorder(payload(size), int(rate * seconds) + skip + 1, consume)
    broker_cpu = process_cpu_seconds(broker_pid)
    wall, cpu = time.perf_counter(), time.process_time()
    LATENCY[client](bootstrap, topic, rec, rate, fetch_wait_ms)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    out = rec.summary(skip + 1)
    # the CPU both sides used while it ran: on a 2-core machine they share the cores
    usage = {"client_cpu_pct": 100 * cpu / wall}
    broker_end = process_cpu_seconds(broker_pid)
    if broker_cpu is not None and broker_end is not None:
        usage["broker_cpu_pct"] = 100 * (broker_end - broker_cpu) / wall
    for prefix in rec.series:
        out.update({prefix + key: value for key, value in usage.items()})
    return out


# -- group members (rebalance, group size) ----------------------------------------------

Seen = Callable[[int, int, float], None]  # partition, records, perf_counter seconds
# how a member's assignment changed: "assigned", "revoked" or "lost", the partitions (of the
# one topic), perf_counter seconds; from the client's rebalance callbacks
Moved = Callable[[str, set[int], float], None]
CLASSIC, CONSUMER_PROTOCOL = "classic", "consumer"  # group protocols (KIP-848: consumer)


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """How a group member joins: the group protocol (CLASSIC, or CONSUMER_PROTOCOL: KIP-848,
    the broker assigns and sets the heartbeat and session), the classic assignor and timeouts,
    and `moved`, told of every change of the member's assignment, if given."""

    strategy: str = "range"
    protocol: str = CLASSIC
    session_timeout_ms: int = GROUP_SESSION_TIMEOUT_MS
    heartbeat_interval_ms: int = GROUP_HEARTBEAT_MS
    moved: Moved | None = None

    def tell(self, change: str, partitions: Any) -> None:
        """Report a change of `partitions` (objects with a partition, or ints) to `moved`."""
        if self.moved is not None:
            numbers = {p if isinstance(p, int) else p.partition for p in partitions}
            self.moved(change, numbers, time.perf_counter())


def _listener_kafkaio(spec: MemberSpec) -> Any:
    from kafkaio.consumer import RebalanceListener

    class Listener(RebalanceListener):
        def on_partitions_assigned(self, assigned: set[Any]) -> None:
            spec.tell("assigned", assigned)

        def on_partitions_revoked(self, revoked: set[Any]) -> None:
            spec.tell("revoked", revoked)

        def on_partitions_lost(self, lost: set[Any]) -> None:
            spec.tell("lost", lost)

    return Listener()


async def _member_kafkaio(
    bootstrap: str, topic: str, group: str, spec: MemberSpec, seen: Seen, stop: threading.Event
) -> None:
    from kafkaio import Consumer

    protocol: dict[str, Any] = (
        {"group_protocol": CONSUMER_PROTOCOL}
        if spec.protocol == CONSUMER_PROTOCOL
        else {
            "session_timeout_ms": spec.session_timeout_ms,
            "heartbeat_interval_ms": spec.heartbeat_interval_ms,
            "partition_assignment_strategy": spec.strategy,
        }
    )
    async with Consumer(
        bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="latest", **protocol
    ) as consumer:
        consumer.subscribe([topic], listener=_listener_kafkaio(spec))
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=100)
            now = time.perf_counter()
            for tp, records in batches.items():
                seen(tp.partition, len(records), now)


def _classic_only(client: str, spec: MemberSpec) -> None:
    if spec.protocol != CLASSIC:
        raise ValueError(f"{client} has no group_protocol={spec.protocol!r} (KIP-848)")


async def _member_aiokafka(
    bootstrap: str, topic: str, group: str, spec: MemberSpec, seen: Seen, stop: threading.Event
) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    _classic_only(AIOKAFKA, spec)

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            spec.tell("revoked", revoked)

        def on_partitions_assigned(self, assigned: Any) -> None:
            spec.tell("assigned", assigned)

    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="latest",
        session_timeout_ms=spec.session_timeout_ms,
        heartbeat_interval_ms=spec.heartbeat_interval_ms,
        partition_assignment_strategy=(assignors[spec.strategy],),
    )
    consumer.subscribe([topic], listener=Listener())
    await consumer.start()
    try:
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=100)
            now = time.perf_counter()
            for tp, records in batches.items():
                seen(tp.partition, len(records), now)
    finally:
        await consumer.stop()


def _confluent_member_conf(bootstrap: str, group: str, spec: MemberSpec) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "latest",
    }
    if spec.protocol == CONSUMER_PROTOCOL:  # the broker sets heartbeats and assigns
        conf["group.protocol"] = CONSUMER_PROTOCOL
    else:
        conf["session.timeout.ms"] = spec.session_timeout_ms
        conf["heartbeat.interval.ms"] = spec.heartbeat_interval_ms
        conf["partition.assignment.strategy"] = spec.strategy
    return conf


def _confluent_callbacks(spec: MemberSpec) -> dict[str, Any]:
    """subscribe()'s rebalance callbacks (confluent-kafka then assigns as it would without
    them: incrementally for cooperative assignors and the consumer protocol)."""
    if spec.moved is None:
        return {}
    return {
        "on_assign": lambda _, partitions: spec.tell("assigned", partitions),
        "on_revoke": lambda _, partitions: spec.tell("revoked", partitions),
        "on_lost": lambda _, partitions: spec.tell("lost", partitions),
    }


def _member_confluent(
    bootstrap: str, topic: str, group: str, spec: MemberSpec, seen: Seen, stop: threading.Event
) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(_confluent_member_conf(bootstrap, group, spec))
    consumer.subscribe([topic], **_confluent_callbacks(spec))
    try:
        while not stop.is_set():  # poll, not consume(): that waits for a full batch
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                seen(message.partition() or 0, 1, time.perf_counter())
    finally:
        consumer.close()


async def _member_confluent_aio(
    bootstrap: str, topic: str, group: str, spec: MemberSpec, seen: Seen, stop: threading.Event
) -> None:
    from confluent_kafka.aio import AIOConsumer

    consumer = AIOConsumer(_confluent_member_conf(bootstrap, group, spec))
    await consumer.subscribe([topic])
    try:
        while not stop.is_set():  # poll, not consume(): that waits for a full batch
            message = await consumer.poll(0.1)
            if message is not None and message.error() is None:
                seen(message.partition() or 0, 1, time.perf_counter())
    finally:
        await consumer.close()


def _member_kafka_python(
    bootstrap: str, topic: str, group: str, spec: MemberSpec, seen: Seen, stop: threading.Event
) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    _classic_only(KAFKA_PYTHON, spec)
    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="latest",
        session_timeout_ms=spec.session_timeout_ms,
        heartbeat_interval_ms=spec.heartbeat_interval_ms,
        partition_assignment_strategy=(assignors[spec.strategy],),
    )
    try:
        while not stop.is_set():
            batches = consumer.poll(timeout_ms=100)
            now = time.perf_counter()
            for tp, records in batches.items():
                seen(tp.partition, len(records), now)
    finally:
        consumer.close()


# client: (member function, is it a coroutine function)
MEMBERS: dict[str, tuple[Callable[..., Any], bool]] = {
    KAFKAIO: (_member_kafkaio, True),
    AIOKAFKA: (_member_aiokafka, True),
    CONFLUENT: (_member_confluent, False),
    CONFLUENT_AIO: (_member_confluent_aio, True),
    KAFKA_PYTHON: (_member_kafka_python, False),
}


async def run_member(
    client: str,
    bootstrap: str,
    topic: str,
    group: str,
    spec: MemberSpec,
    seen: Seen,
    stop: threading.Event,
) -> None:
    """One group member of `client` until `stop` is set (then it leaves the group). A
    member of a synchronous client runs in a thread of its own (not the loop's executor,
    whose few threads would hold back a group of many members)."""
    fn, is_async = MEMBERS[client]
    if is_async:
        await fn(bootstrap, topic, group, spec, seen, stop)
        return
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def finish(error: BaseException | None) -> None:
        if not done.done():
            done.set_exception(error) if error is not None else done.set_result(None)

    def member() -> None:
        error: BaseException | None = None
        try:
            fn(bootstrap, topic, group, spec, seen, stop)
        except BaseException as exc:  # handed to the awaiting task
            error = exc
        loop.call_soon_threadsafe(finish, error)

    thread = threading.Thread(target=member, name=f"{client} member", daemon=True)
    thread.start()
    await done
