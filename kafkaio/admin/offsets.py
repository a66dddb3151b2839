"""Admin partition-offset calls: ListOffsets (earliest, latest, max timestamp, by time)
and DeleteRecords, grouped by partition leader with one request per broker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkaio.admin.core import AdminCore, MissingTopicOrPartition, broker_error
from kafkaio.admin.types import DeletedRecords, ListedOffset, OffsetSpec
from kafkaio.errors import (
    KafkaConfigError,
    KafkaError,
    LeaderNotAvailableError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    error_for_code,
)
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.protocol import messages as m

_ISOLATION = {"read_uncommitted": 0, "read_committed": 1}
# ListOffsets version needed for each special spec (KIP-734: max timestamp).
_MIN_VERSION: dict[int, int] = {int(OffsetSpec.MAX_TIMESTAMP): 7}


def by_topic(tps: list[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in sorted(tps):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def parse_listed_offset(p: Any, version: int, tp: TopicPartition) -> ListedOffset | KafkaError:
    """A ListOffsets partition answer; a retriable error is returned bare (to retry)."""
    err = broker_error(p.error_code, None, topic=tp.topic, partition=tp.partition)
    if err is not None:
        return err if err.retriable else ListedOffset(None, error=err)
    if version == 0:
        offset = p.old_style_offsets[0] if p.old_style_offsets else -1
        return ListedOffset(None if offset < 0 else offset)
    return ListedOffset(
        None if p.offset < 0 else p.offset,
        None if p.timestamp < 0 else p.timestamp,
        None if version < 4 or p.leader_epoch < 0 else p.leader_epoch,
    )


class OffsetsMixin(AdminCore):
    async def list_offsets(
        self,
        specs: Mapping[TopicPartition, OffsetSpec | int],
        *,
        isolation_level: str = "read_uncommitted",
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, ListedOffset]:
        """Look up offsets: OffsetSpec.EARLIEST / LATEST / MAX_TIMESTAMP, or an int >= 0 for
        the first offset whose timestamp is at or after it (ms). One request per leader."""
        if isolation_level not in _ISOLATION:
            raise KafkaConfigError(
                f"isolation_level must be one of {', '.join(_ISOLATION)}, got {isolation_level!r}"
            )
        for tp, spec in specs.items():
            if int(spec) < OffsetSpec.MAX_TIMESTAMP:
                raise KafkaConfigError(
                    f"offset spec {spec!r} for {tp}: use an OffsetSpec or a timestamp >= 0"
                )

        async def send(
            node: int, tps: list[TopicPartition]
        ) -> dict[TopicPartition, ListedOffset | KafkaError]:
            conn = await self._node(node)
            version = conn.version_for(m.ListOffsetsRequest)
            out: dict[TopicPartition, ListedOffset | KafkaError] = {}
            sendable = []
            for tp in tps:
                needs = _MIN_VERSION.get(int(specs[tp]), 0)
                if version < needs:
                    out[tp] = ListedOffset(
                        None,
                        error=UnsupportedVersionError(
                            f"{OffsetSpec(specs[tp]).name} needs ListOffsets v{needs}+, but "
                            f"{conn} speaks v{version}",
                            api="ListOffsets",
                            topic=tp.topic,
                            partition=tp.partition,
                        ),
                    )
                else:
                    sendable.append(tp)
            if not sendable:
                return out
            cluster = self._cluster
            request = m.ListOffsetsRequest(
                replica_id=-1,
                isolation_level=_ISOLATION[isolation_level],
                topics=[
                    m.ListOffsetsRequest.ListOffsetsTopic(
                        name=topic,
                        partitions=[
                            m.ListOffsetsRequest.ListOffsetsPartition(
                                partition_index=p,
                                current_leader_epoch=_epoch(cluster.leader_epoch(tp)),
                                timestamp=int(specs[tp]),
                                max_num_offsets=1,
                            )
                            for p in partitions
                            for tp in (TopicPartition(topic, p),)
                        ],
                    )
                    for topic, partitions in by_topic(sendable).items()
                ],
                timeout_ms=int(self._timeout_ms),
            )
            response = await conn.send(request, version=version)
            for t in response.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    out[tp] = parse_listed_offset(p, version, tp)
            return out

        return await self._fan_out(
            "list_offsets",
            list(specs),
            prepare=self._prepare_leaders,
            route=self._route_leader,
            send=send,
            failed=lambda _tp, e: ListedOffset(None, error=e),
            timeout_ms=timeout_ms,
        )

    async def delete_records(
        self,
        before: Mapping[TopicPartition, int],
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, DeletedRecords]:
        """Delete each partition's records before the given offset (-1: the high watermark);
        returns the new low watermarks. One request per leader."""

        async def send(
            node: int, tps: list[TopicPartition]
        ) -> dict[TopicPartition, DeletedRecords | KafkaError]:
            conn = await self._node(node)
            request = m.DeleteRecordsRequest(
                topics=[
                    m.DeleteRecordsRequest.DeleteRecordsTopic(
                        name=topic,
                        partitions=[
                            m.DeleteRecordsRequest.DeleteRecordsPartition(
                                partition_index=p, offset=before[TopicPartition(topic, p)]
                            )
                            for p in partitions
                        ],
                    )
                    for topic, partitions in by_topic(tps).items()
                ],
                timeout_ms=int(self._timeout_ms),
            )
            response = await conn.send(request)
            out: dict[TopicPartition, DeletedRecords | KafkaError] = {}
            for t in response.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    err = broker_error(p.error_code, None, topic=tp.topic, partition=tp.partition)
                    if err is None:
                        out[tp] = DeletedRecords(p.low_watermark)
                    else:
                        out[tp] = err if err.retriable else DeletedRecords(None, err)
            return out

        return await self._fan_out(
            "delete_records",
            list(before),
            prepare=self._prepare_leaders,
            route=self._route_leader,
            send=send,
            failed=lambda _tp, e: DeletedRecords(None, e),
            timeout_ms=timeout_ms,
        )

    # -- leader routing -------------------------------------------------------------------

    async def _prepare_leaders(self, pending: list[TopicPartition]) -> None:
        await self._metadata_for({tp.topic for tp in pending}, pending)

    def _route_leader(self, tp: TopicPartition) -> int | KafkaError:
        cluster = self._cluster
        leader = cluster.leader_for(tp)
        if leader is not None:
            return leader
        topic = cluster.topics.get(tp.topic)
        if topic is not None and topic.error:
            if topic.error == UnknownTopicOrPartitionError.code:
                # As the Java admin: a topic the metadata does not know fails at once.
                return MissingTopicOrPartition(
                    "the topic does not exist", topic=tp.topic, partition=tp.partition
                )
            return error_for_code(topic.error)(None, topic=tp.topic)
        if topic is not None and cluster.partition(tp) is None:
            return MissingTopicOrPartition(
                f"topic {tp.topic!r} has {len(topic.partitions)} partitions",
                topic=tp.topic,
                partition=tp.partition,
            )
        return LeaderNotAvailableError(None, topic=tp.topic, partition=tp.partition)


def _epoch(epoch: int | None) -> int:
    return -1 if epoch is None else epoch
