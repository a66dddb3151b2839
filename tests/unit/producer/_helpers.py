"""Sans-I/O fixtures for the producer tests: metadata snapshots, a Sender, fake responses.

Time is a plain number of milliseconds passed to ``poll``; nothing sleeps or opens sockets.
"""

from __future__ import annotations

from typing import Any

from kafkaio.backoff import ExponentialBackoff
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.metadata.manager import MetadataManager
from kafkaio.net.config import ConnectionConfig
from kafkaio.producer.accumulator import RecordAccumulator
from kafkaio.producer.config import ProducerConfig
from kafkaio.producer.idempotence import IdempotenceManager
from kafkaio.producer.memory import MemoryBudget
from kafkaio.producer.sender import Sender
from kafkaio.protocol.messages import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafkaio.runtime.requests import PollResult, UnsentRequest

Broker = MetadataResponse.MetadataResponseBroker
Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition


def metadata_response(
    leaders: dict[str, list[int]], brokers: tuple[int, ...] = (1, 2, 3)
) -> MetadataResponse:
    """Topics with one entry per partition: its leader's node id (-1: no leader)."""
    topics = [
        Topic(
            0,
            name,
            None,
            False,
            [Partition(0, i, leader, 0, [leader], [leader], []) for i, leader in enumerate(ls)],
        )
        for name, ls in leaders.items()
    ]
    return MetadataResponse(
        brokers=[Broker(n, "127.0.0.1", 9000 + n, None) for n in brokers],
        cluster_id="c",
        controller_id=brokers[0],
        topics=topics,
    )


def make_metadata(leaders: dict[str, list[int]], now: float = 0.0) -> MetadataManager:
    manager = MetadataManager(retry_backoff_ms=10, retry_backoff_max_ms=10, backoff_jitter=0)
    manager.add_topics(leaders)
    manager.on_response(now, metadata_response(leaders))
    return manager


class Harness:
    """A Sender with its accumulator, metadata and idempotence, driven by hand."""

    def __init__(
        self,
        leaders: dict[str, list[int]] | None = None,
        *,
        idempotent: bool = False,
        required: bool = False,
        conn: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        options.setdefault("linger_ms", 0)
        options.setdefault("retry_backoff_ms", 100)
        options.setdefault("retry_backoff_max_ms", 1000)
        if not idempotent:
            options.setdefault("enable_idempotence", False)
        self.config = ProducerConfig.from_options(options, ConnectionConfig(**(conn or {})))
        self.metadata = make_metadata(leaders or {"t": [1, 2, 3]})
        self.memory = MemoryBudget(self.config.buffer_memory)
        self.acc = RecordAccumulator(
            batch_size=self.config.batch_size,
            compression=self.config.compression_type,
            linger_ms=self.config.linger_ms,
            delivery_timeout_ms=self.config.delivery_timeout_ms,
            memory=self.memory,
            growth=1,  # batches of exactly batch_size: the tests count them
        )
        backoff = ExponentialBackoff(
            self.config.retry_backoff_ms, self.config.retry_backoff_max_ms, jitter=0
        )
        self.idem = IdempotenceManager(
            enabled=self.config.idempotence_wanted, required=required, backoff=backoff
        )
        self.sender = Sender(self.config, self.acc, self.metadata, self.idem, backoff=backoff)

    def append(
        self,
        topic: str,
        partition: int,
        value: bytes = b"v" * 30,
        now: float = 0.0,
        key: bytes | None = None,
    ) -> Any:
        size = 100
        assert self.memory.try_reserve(size)
        return self.acc.append(
            TopicPartition(topic, partition), 1000, key, value, None, now, size
        ).future

    def poll(self, now: float) -> PollResult:
        return self.sender.poll(now)

    def init_producer_id(self, now: float, producer_id: int = 7, epoch: int = 0) -> None:
        """Poll, expect an InitProducerId request, answer it."""
        result = self.poll(now)
        inits = [r for r in result.requests if isinstance(r.request, InitProducerIdRequest)]
        assert len(inits) == 1, result.requests
        inits[0].handler(
            now, InitProducerIdResponse(producer_id=producer_id, producer_epoch=epoch), None
        )


def produce_requests(result: PollResult) -> list[UnsentRequest]:
    return [r for r in result.requests if isinstance(r.request, ProduceRequest)]


def sent_partitions(request: UnsentRequest) -> list[TopicPartition]:
    return [
        TopicPartition(t.name, p.index)
        for t in request.request.topic_data
        for p in t.partition_data
    ]


def sent_batches(request: UnsentRequest) -> list[tuple[TopicPartition, bytes]]:
    return [
        (TopicPartition(t.name, p.index), bytes(p.records))
        for t in request.request.topic_data
        for p in t.partition_data
    ]


def answer(
    request: UnsentRequest,
    now: float,
    errors: dict[TopicPartition, int] | None = None,
    base_offset: int = 0,
    leaders: dict[TopicPartition, tuple[int, int]] | None = None,
    nodes: tuple[int, ...] = (),
) -> None:
    """Answer a ProduceRequest: every partition acked at ``base_offset`` unless in ``errors``.

    ``leaders[tp] = (leader id, epoch)``: the CurrentLeader of an error (KIP-951); ``nodes``:
    the brokers its NodeEndpoints list (at 127.0.0.1:9000 + id).
    """
    errors = errors or {}
    leaders = leaders or {}
    topics: dict[str, list[ProduceResponse.PartitionProduceResponse]] = {}
    for tp in sent_partitions(request):
        leader = leaders.get(tp, (-1, -1))
        topics.setdefault(tp.topic, []).append(
            ProduceResponse.PartitionProduceResponse(
                index=tp.partition,
                error_code=errors.get(tp, 0),
                base_offset=base_offset,
                current_leader=ProduceResponse.LeaderIdAndEpoch(*leader),
            )
        )
    response = ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(name=name, partition_responses=parts)
            for name, parts in topics.items()
        ],
        node_endpoints=[
            ProduceResponse.NodeEndpoint(node_id=n, host="127.0.0.1", port=9000 + n)
            for n in nodes
        ],
    )
    request.handler(now, response, None)
