"""Shared builders for the consumer's sans-I/O tests: metadata snapshots, record blobs,
Fetch/ListOffsets responses, and a consumer state wired like the real one."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from crc32c import crc32c

from kafkaio.consumer.config import ConsumerConfig
from kafkaio.consumer.fetch_buffer import FetchBuffer, FetchCollector
from kafkaio.consumer.fetcher import FetchManager
from kafkaio.consumer.subscription import OffsetResetStrategy, SubscriptionState
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.metadata.manager import MetadataManager
from kafkaio.protocol import messages as m
from kafkaio.records import BatchBuilder, Compression
from kafkaio.records.record import ControlRecordType

TOPIC = "t"
TOPIC_ID = uuid.UUID(int=0xABC)
# partition -> leader: 0 and 2 on node 1, 1 on node 2
LEADERS = {0: 1, 1: 2, 2: 1}


def tp(partition: int, topic: str = TOPIC) -> TopicPartition:
    return TopicPartition(topic, partition)


def metadata_response(
    leaders: dict[int, int] | None = None,
    *,
    topic: str = TOPIC,
    topic_id: uuid.UUID | None = TOPIC_ID,
    epoch: int = 5,
) -> m.MetadataResponse:
    leaders = LEADERS if leaders is None else leaders
    return m.MetadataResponse(
        brokers=[
            m.MetadataResponse.MetadataResponseBroker(node_id=n, host="127.0.0.1", port=9000 + n)
            for n in (1, 2, 3)
        ],
        topics=[
            m.MetadataResponse.MetadataResponseTopic(
                name=topic,
                topic_id=topic_id or uuid.UUID(int=0),
                partitions=[
                    m.MetadataResponse.MetadataResponsePartition(
                        partition_index=p, leader_id=leader, leader_epoch=epoch
                    )
                    for p, leader in leaders.items()
                ],
            )
        ],
    )


def make_metadata(now: float = 0.0, **kwargs: object) -> MetadataManager:
    md = MetadataManager(retry_backoff_ms=100, backoff_jitter=0.0)
    md.set_topics([TOPIC])
    md.poll(now)  # one request in flight
    md.on_response(now, metadata_response(**kwargs))  # type: ignore[arg-type]
    return md


def batch(
    base_offset: int,
    values: Sequence[bytes],
    *,
    producer_id: int = -1,
    transactional: bool = False,
    compression: Compression = Compression.NONE,
    timestamp: int = 1_000,
) -> bytes:
    builder = BatchBuilder(
        compression=compression,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        is_transactional=transactional,
        batch_size=1 << 20,
    )
    for i, v in enumerate(values):
        builder.append(timestamp + i, f"k{base_offset + i}".encode(), v, None)
    return builder.build(base_offset)


def control_batch(base_offset: int, producer_id: int, marker: ControlRecordType) -> bytes:
    """A transaction marker batch, made as tests/unit/records does (control bit + CRC)."""
    builder = BatchBuilder(is_transactional=True, producer_id=producer_id, producer_epoch=0)
    builder.append(5, struct.pack(">hh", 0, marker), struct.pack(">hi", 0, 0))
    raw = bytearray(builder.build(base_offset))
    attributes = struct.unpack_from(">h", raw, 21)[0] | 0x20
    struct.pack_into(">h", raw, 21, attributes)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    return bytes(raw)


def values(start: int, count: int) -> list[bytes]:
    return [f"v{i}".encode() for i in range(start, start + count)]


def partition_data(
    partition: int,
    records: bytes = b"",
    *,
    error_code: int = 0,
    high_watermark: int = 100,
    last_stable_offset: int = 100,
    log_start_offset: int = 0,
    aborted: Sequence[tuple[int, int]] | None = None,
) -> m.FetchResponse.PartitionData:
    return m.FetchResponse.PartitionData(
        partition_index=partition,
        error_code=error_code,
        high_watermark=high_watermark,
        last_stable_offset=last_stable_offset,
        log_start_offset=log_start_offset,
        aborted_transactions=[
            m.FetchResponse.AbortedTransaction(producer_id=pid, first_offset=first)
            for pid, first in (aborted or ())
        ],
        records=records,
    )


def fetch_response(*parts: m.FetchResponse.PartitionData, by_id: bool = True) -> m.FetchResponse:
    return m.FetchResponse(
        responses=[
            m.FetchResponse.FetchableTopicResponse(
                topic="" if by_id else TOPIC,
                topic_id=TOPIC_ID if by_id else uuid.UUID(int=0),
                partitions=list(parts),
            )
        ]
    )


@dataclass
class Rig:
    """Subscription, metadata, buffer, fetcher and collector wired as in the Consumer."""

    config: ConsumerConfig
    subscriptions: SubscriptionState
    metadata: MetadataManager
    buffer: FetchBuffer
    fetcher: FetchManager
    collector: FetchCollector
    errors: list[BaseException] = field(default_factory=list)


def make_rig(
    *,
    reset: str = "earliest",
    isolation_level: str = "read_uncommitted",
    metadata: MetadataManager | None = None,
    **options: object,
) -> Rig:
    config = ConsumerConfig(
        auto_offset_reset=reset,
        isolation_level=isolation_level,
        retry_backoff_ms=100,
        **options,  # type: ignore[arg-type]
    )
    subs = SubscriptionState(OffsetResetStrategy.parse(reset))
    md = metadata or make_metadata()
    buffer = FetchBuffer()
    errors: list[BaseException] = []
    fetcher = FetchManager(subs, md, buffer, config, errors.append, rng=lambda: 0.5)
    collector = FetchCollector(
        subs,
        buffer,
        read_committed=config.isolation == 1,
        key_deserializer=config.key_deserializer,
        value_deserializer=config.value_deserializer,
    )
    return Rig(config, subs, md, buffer, fetcher, collector, errors)
