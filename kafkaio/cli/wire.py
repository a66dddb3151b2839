"""Raw Produce and Fetch for the command-line tool: record batches to partition leaders.

Leaders come from the Admin client's metadata; NOT_LEADER-style errors refresh and retry.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import anyio

from kafkaio.admin import Admin
from kafkaio.errors import (
    KafkaError,
    KafkaTimeoutError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kafkaio.metadata.cluster import TopicInfo
from kafkaio.net.config import ConnectionConfig
from kafkaio.net.connection import Connection
from kafkaio.net.manager import ConnectionManager
from kafkaio.protocol import messages as m
from kafkaio.records import BatchBuilder, Compression, Record, iter_batches

Headers = list[tuple[str, bytes | None]]
_RETRY_S = 0.2
_LeaderCall = Callable[[Connection], Awaitable[object]]


@dataclass(slots=True)
class OutRecord:
    """A record to produce: key, value, headers and an optional timestamp (ms)."""

    key: bytes | None
    value: bytes | None
    headers: Headers = field(default_factory=list)
    timestamp: int | None = None


def build_batches(
    records: Sequence[OutRecord], compression: Compression, batch_size: int = 256 * 1024
) -> list[bytes]:
    """Encode records into RecordBatch v2 blobs of about `batch_size` bytes."""
    now = int(time.time() * 1000)
    out: list[bytes] = []
    builder = BatchBuilder(compression=compression, batch_size=batch_size)
    for r in records:
        ts = now if r.timestamp is None else r.timestamp
        if builder.append(ts, r.key, r.value, r.headers) is None:
            out.append(builder.build())
            builder = BatchBuilder(compression=compression, batch_size=batch_size)
            builder.append(ts, r.key, r.value, r.headers)
    if builder.record_count:
        out.append(builder.build())
    return out


class Wire:
    """Produce to and fetch from partition leaders; `admin` supplies the metadata."""

    def __init__(self, admin: Admin, bootstrap: str, config: ConnectionConfig) -> None:
        self.admin = admin
        self._connections = ConnectionManager(bootstrap, config)
        self._topics: dict[str, TopicInfo] = {}

    async def close(self) -> None:
        await self._connections.close()

    async def topic(self, name: str, *, refresh: bool = False) -> TopicInfo:
        """The topic's partitions and leaders; raises if it does not exist."""
        if refresh or name not in self._topics:
            info = (await self.admin.describe_topics([name])).get(name)
            if info is None or info.error:
                code = info.error if info is not None else UnknownTopicOrPartitionError.code
                raise error_for_code(code)(f"topic {name!r} does not exist", topic=name)
            self._topics[name] = info
            self._connections.update_nodes(
                {b.node_id: (b.host, b.port) for b in self.admin.cluster.brokers.values()}
            )
        return self._topics[name]

    async def _leader(self, topic: str, partition: int, refresh: bool) -> Connection:
        info = await self.topic(topic, refresh=refresh)
        for p in info.partitions:
            if p.partition == partition:
                if p.leader is None or p.leader < 0:
                    raise error_for_code(5)(None, topic=topic, partition=partition)
                return await self._connections.get(p.leader)
        raise UnknownTopicOrPartitionError(
            f"topic {topic!r} has {len(info.partitions)} partitions, no partition {partition}",
            topic=topic,
            partition=partition,
        )

    async def _with_leader_retry(
        self, topic: str, partition: int, timeout: float, call: _LeaderCall
    ) -> object:
        deadline = anyio.current_time() + timeout
        refresh = False
        while True:
            try:
                conn = await self._leader(topic, partition, refresh)
                return await call(conn)
            except KafkaError as exc:
                retriable = exc.retriable and not (
                    isinstance(exc, UnknownTopicOrPartitionError) and not exc.invalid_metadata
                )
                if not retriable or anyio.current_time() + _RETRY_S >= deadline:
                    if retriable:
                        raise KafkaTimeoutError(
                            f"{topic}-{partition}: still failing after {timeout:g} s: {exc}"
                        ) from exc
                    raise
                refresh = True
                await anyio.sleep(_RETRY_S)

    async def produce(
        self,
        topic: str,
        partition: int,
        batches: Sequence[bytes],
        *,
        acks: int = -1,
        timeout: float = 30.0,
    ) -> int:
        """Send the batches (one Produce request); returns the first base offset (-1 for
        acks=0)."""

        async def call(conn: Connection) -> int:
            request = m.ProduceRequest(
                acks=acks,
                timeout_ms=int(timeout * 1000),
                topic_data=[
                    m.ProduceRequest.TopicProduceData(
                        name=topic,
                        partition_data=[
                            m.ProduceRequest.PartitionProduceData(
                                index=partition, records=b"".join(batches)
                            )
                        ],
                    )
                ],
            )
            if acks == 0:
                await conn.send_no_response(request)
                return -1
            response = await conn.send(request)
            part = response.responses[0].partition_responses[0]
            if part.error_code:
                raise error_for_code(part.error_code)(
                    part.error_message, topic=topic, partition=partition
                )
            return int(part.base_offset)

        result = await self._with_leader_retry(topic, partition, timeout, call)
        assert isinstance(result, int)
        return result

    async def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_wait_ms: int = 500,
        max_bytes: int = 4 * 1024 * 1024,
        timeout: float = 30.0,
    ) -> tuple[list[Record], int]:
        """One Fetch from `offset`: the records at or after it and the high watermark."""

        async def call(conn: Connection) -> tuple[list[Record], int]:
            version = min(conn.version_for(m.FetchRequest), 12)  # by name, not topic id
            request = m.FetchRequest(
                replica_id=-1,
                max_wait_ms=max_wait_ms,
                min_bytes=1,
                max_bytes=max_bytes,
                isolation_level=0,
                topics=[
                    m.FetchRequest.FetchTopic(
                        topic=topic,
                        topic_id=uuid.UUID(int=0),
                        partitions=[
                            m.FetchRequest.FetchPartition(
                                partition=partition,
                                fetch_offset=offset,
                                partition_max_bytes=max_bytes,
                            )
                        ],
                    )
                ],
            )
            response = await conn.send(request, version=version)
            if response.error_code:
                raise error_for_code(response.error_code)(None, topic=topic)
            part = response.responses[0].partitions[0]
            if part.error_code:
                raise error_for_code(part.error_code)(None, topic=topic, partition=partition)
            records = [
                r
                for batch in iter_batches(part.records or b"", topic=topic, partition=partition)
                if not batch.is_control
                for r in batch
                if r.offset >= offset
            ]
            return records, int(part.high_watermark)

        result = await self._with_leader_retry(topic, partition, timeout, call)
        assert isinstance(result, tuple)
        return result
