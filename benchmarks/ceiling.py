"""The "broker ceiling" pseudo-clients of the produce suite: kafkaio's protocol layer sends
pre-built batches with no per-record client work (child process), 5 requests in flight (the
broker's limit) or 1 (the limit of a client that keeps one batch per partition in flight, as
aiokafka does for per-partition order, with one partition as here).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchmarks.common import payloads
from benchmarks.isolate import Meter, Metrics
from benchmarks.report import note

if TYPE_CHECKING:
    from benchmarks.clients import ProduceSpec

IN_FLIGHT = 5  # requests in flight, as the producers' max_in_flight_requests_per_connection

CEILING_NOTE = (
    "broker ceiling: kafkaio's protocol layer sending pre-built batches of batch_size "
    "uncompressed bytes with 5 requests in flight, no client work per record: the broker's "
    "pace for 5 tasks that each await their answer before the next send, not a hard limit "
    "(a client that writes each request the moment its batch fills can pass it; kafkaio "
    "did at 1 KiB on Tansu) (its wall time covers the sends only, not client start)"
)
ORDERED_CEILING_NOTE = (
    "broker ceiling, 1 in flight: the same pre-built batches one request at a time, the most "
    "this broker takes from a client that keeps one batch per partition in flight (aiokafka "
    "does, so that a retry cannot reorder a partition's records without idempotence; "
    "kafkaio sends full batches ahead, confluent-kafka pipelines), one partition as here"
)


@dataclass(frozen=True, slots=True)
class Plan:
    """The Produce requests of one run: `full` requests of `per_batch` records each, then
    one request with the `rest` (absent when 0)."""

    full_batch: bytes
    per_batch: int
    full: int
    rest_batch: bytes | None
    rest: int


def _batch(spec: ProduceSpec, values: list[bytes], limit: int | None) -> tuple[bytes, int]:
    """One batch of `values` in turn, filled to spec.batch_size uncompressed bytes (at most
    `limit` records), stamped with the current time."""
    from kafkaio.records import BatchBuilder

    builder = BatchBuilder(compression=spec.codec, batch_size=spec.batch_size)
    while limit is None or builder.record_count < limit:
        value = values[builder.record_count % len(values)]
        if builder.append(time.time_ns() // 1_000_000, None, value) is None:
            break
    return builder.build(), builder.record_count


def plan(spec: ProduceSpec) -> Plan:
    """Batches holding spec.records records in total, the way aiokafka and librdkafka size
    them (by uncompressed bytes). One batch object is reused: the broker assigns offsets."""
    values = payloads(spec.size)
    full_batch, per_batch = _batch(spec, values, spec.records)
    full, rest = divmod(spec.records, per_batch)
    rest_batch = _batch(spec, values, rest)[0] if rest else None
    return Plan(full_batch, per_batch, full, rest_batch, rest)


def _request(topic: str, partition: int, acks: int, batch: bytes) -> Any:
    from kafkaio.protocol import messages as m

    return m.ProduceRequest(
        acks=acks,
        timeout_ms=30_000,
        topic_data=[
            m.ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    m.ProduceRequest.PartitionProduceData(index=partition, records=batch)
                ],
            )
        ],
    )


def _check(response: Any, topic: str) -> None:
    """Raise the broker's error if any partition of a Produce response has one."""
    from kafkaio.errors import raise_for_code

    for topic_response in response.responses:
        for part in topic_response.partition_responses:
            raise_for_code(part.error_code, part.error_message, topic=topic, partition=part.index)


async def _leader(bootstrap: str, topic: str, partition: int) -> tuple[str, int]:
    """Host and port of the partition's leader (Tansu is one broker; a cluster may not be)."""
    from kafkaio.admin import Admin

    async with Admin(bootstrap) as admin:
        info = (await admin.describe_topics([topic]))[topic]
        leader = info.partitions[partition].leader
        node = admin.cluster.brokers.get(leader) if leader is not None else None
        if node is None:
            raise RuntimeError(
                f"no leader known for {topic}[{partition}]: check the cluster at {bootstrap}"
            )
        return node.host, node.port


async def _ceiling(bootstrap: str, topic: str, spec: ProduceSpec, in_flight: int) -> Metrics:
    from kafkaio.net import Connection, ConnectionConfig

    partition = 0
    acks = -1 if spec.acks == "all" else 1  # plain batches: no producer id, no sequences
    work = plan(spec)
    requests = [_request(topic, partition, acks, work.full_batch)] * work.full
    if work.rest_batch is not None:
        requests.append(_request(topic, partition, acks, work.rest_batch))
    host, port = await _leader(bootstrap, topic, partition)
    config = ConnectionConfig(max_in_flight_requests_per_connection=in_flight)
    conn = await Connection.connect(host, port, config)
    try:
        warm_up = _batch(spec, [b"warm-up"], 1)[0]
        _check(await conn.send(_request(topic, partition, acks, warm_up)), topic)
        queue = iter(requests)  # shared by the workers: each takes the next request

        async def worker() -> None:
            for request in queue:
                _check(await conn.send(request), topic)

        with Meter() as meter:
            await asyncio.gather(*(worker() for _ in range(in_flight)))  # Python 3.10
    finally:
        await conn.close()
    return meter.throughput(spec.records, spec.size)


def measure_ceiling(
    bootstrap: str, topic: str, spec: ProduceSpec, in_flight: int = IN_FLIGHT
) -> Metrics:
    """Child: send spec.records values to partition 0 as pre-built batches, `in_flight`
    requests at a time; wall and CPU time cover the sends only."""
    note(CEILING_NOTE if in_flight == IN_FLIGHT else ORDERED_CEILING_NOTE)
    return asyncio.run(_ceiling(bootstrap, topic, spec, in_flight))
