"""Raw Produce and Fetch over one Connection, for tests, the demo and benchmarks.

No batching, retries or group logic: the Producer and Consumer do that. These helpers send
pre-built record batches to a partition leader and read a partition back from an offset.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence

from kafkaio.errors import raise_for_code
from kafkaio.net.connection import Connection
from kafkaio.protocol import messages as m
from kafkaio.records import BatchBuilder, Compression, Record, iter_batches


def build_batches(
    records: Sequence[tuple[bytes | None, bytes | None]],
    *,
    compression: Compression = Compression.NONE,
    batch_size: int = 64 * 1024,
    timestamp_ms: int = 1_700_000_000_000,
    headers: list[tuple[str, bytes | None]] | None = None,
) -> list[bytes]:
    """Encode (key, value) pairs into RecordBatch v2 blobs of about `batch_size` bytes."""
    batches: list[bytes] = []
    builder = BatchBuilder(compression=compression, batch_size=batch_size)
    for i, (key, value) in enumerate(records):
        if builder.append(timestamp_ms + i, key, value, headers) is None:
            batches.append(builder.build())
            builder = BatchBuilder(compression=compression, batch_size=batch_size)
            builder.append(timestamp_ms + i, key, value, headers)
    if builder.record_count:
        batches.append(builder.build())
    return batches


async def produce(
    conn: Connection,
    topic: str,
    partition: int,
    batches: Sequence[bytes],
    *,
    acks: int = -1,
    timeout_ms: int = 30_000,
) -> list[int]:
    """Send each batch in its own Produce request; returns the base offsets assigned."""
    offsets: list[int] = []
    for batch in batches:
        request = m.ProduceRequest(
            acks=acks,
            timeout_ms=timeout_ms,
            topic_data=[
                m.ProduceRequest.TopicProduceData(
                    name=topic,
                    partition_data=[
                        m.ProduceRequest.PartitionProduceData(index=partition, records=batch)
                    ],
                )
            ],
        )
        response = await conn.send(request)
        part = response.responses[0].partition_responses[0]
        raise_for_code(part.error_code, part.error_message, topic=topic, partition=partition)
        offsets.append(part.base_offset)
    return offsets


async def fetch(
    conn: Connection,
    topic: str,
    partition: int,
    offset: int,
    *,
    topic_id: uuid.UUID | None = None,
    max_bytes: int = 1024 * 1024,
    max_wait_ms: int = 100,
) -> tuple[list[Record], int]:
    """One Fetch from `offset`; returns the records at or after it and the high watermark."""
    version = conn.version_for(m.FetchRequest)
    request = m.FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=max_bytes,
        topics=[
            m.FetchRequest.FetchTopic(
                topic=topic,
                topic_id=topic_id or uuid.UUID(int=0),
                partitions=[
                    m.FetchRequest.FetchPartition(
                        partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes
                    )
                ],
            )
        ],
    )
    if version >= 13 and topic_id is None:
        version = 12  # fetch by name
    response = await conn.send(request, version=version)
    raise_for_code(response.error_code)
    part = response.responses[0].partitions[0]
    raise_for_code(part.error_code, topic=topic, partition=partition)
    records = [
        r
        for batch in iter_batches(part.records or b"", topic=topic, partition=partition)
        if not batch.is_control
        for r in batch
        if r.offset >= offset
    ]
    return records, part.high_watermark


async def fetch_all(
    conn: Connection, topic: str, partition: int, count: int, *, start: int = 0
) -> list[Record]:
    """Fetch from `start` until `count` records have been read."""
    out: list[Record] = []
    offset = start
    while len(out) < count:
        records, _hw = await fetch(conn, topic, partition, offset)
        if records:
            out.extend(records)
            offset = records[-1].offset + 1
    return out[:count]


def keys_values(records: Sequence[Record]) -> Iterator[tuple[bytes | None, bytes | None]]:
    return ((r.key, r.value) for r in records)
