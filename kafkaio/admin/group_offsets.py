"""Admin calls on a group's committed offsets: list (OffsetFetch), alter (OffsetCommit as
an outsider, for empty groups), delete (OffsetDelete) and lag against the end offsets."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kafkaio.admin.core import AdminCore, broker_error, missing_is_final
from kafkaio.admin.group_types import CommittedOffset, PartitionLag
from kafkaio.admin.offsets import OffsetsMixin, by_topic
from kafkaio.admin.types import OffsetSpec
from kafkaio.errors import KafkaConfigError, KafkaError, KafkaProtocolError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.protocol import messages as m
from kafkaio.structs import OffsetAndMetadata


def offset_fetch_request(
    group_id: str, partitions: list[TopicPartition] | None, require_stable: bool
) -> Any:
    """An OffsetFetch request filled for both layouts: v0-7 (group_id/topics), v8+ (groups)."""
    topics = None if partitions is None else by_topic(partitions)
    return m.OffsetFetchRequest(
        group_id=group_id,
        topics=None
        if topics is None
        else [
            m.OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
            for t, ps in topics.items()
        ],
        groups=[
            m.OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id=group_id,
                topics=None
                if topics is None
                else [
                    m.OffsetFetchRequest.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                    for t, ps in topics.items()
                ],
            )
        ],
        require_stable=require_stable,
    )


def parse_offset_fetch(
    response: m.OffsetFetchResponse, version: int, group_id: str
) -> dict[TopicPartition, Any]:
    """{tp: CommittedOffset} from either layout; raises the group-level error, if any."""
    # the two layouts' topic entries have the same fields (name, partitions...)
    topics: Sequence[Any]
    if version >= 8:
        group = next((g for g in response.groups if g.group_id == group_id), None)
        if group is None:
            raise KafkaError(f"OffsetFetch response did not mention group {group_id!r}")
        code, topics = group.error_code, group.topics
    else:
        code, topics = (response.error_code if version >= 2 else 0), response.topics
    err = broker_error(code, None, group_id=group_id)
    if err is not None:
        raise err
    out: dict[TopicPartition, CommittedOffset] = {}
    for t in topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            perr = broker_error(p.error_code, None, topic=t.name, partition=p.partition_index)
            epoch = p.committed_leader_epoch if version >= 5 else -1
            out[tp] = CommittedOffset(
                None if p.committed_offset < 0 else p.committed_offset,
                p.metadata or "",
                None if epoch < 0 else epoch,
                perr,
            )
    return out


class GroupOffsetsMixin(OffsetsMixin, AdminCore):
    async def list_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, CommittedOffset]:
        """The group's committed offsets (all partitions it has offsets for, when None).

        Raises the group-level error (e.g. GROUP_AUTHORIZATION_FAILED); partition errors
        come back per partition.
        """
        wanted = None if partitions is None else sorted(set(partitions))

        async def attempt() -> dict[TopicPartition, CommittedOffset]:
            conn = await self._coordinator(group_id)
            version = conn.version_for(m.OffsetFetchRequest)
            try:
                response = await conn.send(
                    offset_fetch_request(group_id, wanted, require_stable), version=version
                )
                result = parse_offset_fetch(response, version, group_id)
            except KafkaProtocolError:
                if wanted is not None or version >= 8:
                    raise
                # Some brokers (librdkafka's mock) answer "all partitions" before v8 with a
                # null topic array: ask for every known partition instead.
                result = await self._fetch_every_partition(group_id, version, require_stable)
            for committed in result.values():
                if committed.error is not None and committed.error.retriable:
                    raise committed.error  # e.g. UNSTABLE_OFFSET_COMMIT: try again
            return result

        return await self._retrying("list_group_offsets", attempt, timeout_ms)

    async def _fetch_every_partition(
        self, group_id: str, version: int, require_stable: bool
    ) -> dict[TopicPartition, CommittedOffset]:
        cluster = await self._refresh_metadata()
        every = [
            TopicPartition(t.name, p.partition)
            for t in cluster.topics.values()
            if not t.is_internal
            for p in t.partitions
        ]
        conn = await self._coordinator(group_id)
        response = await conn.send(
            offset_fetch_request(group_id, every, require_stable), version=version
        )
        found = parse_offset_fetch(response, version, group_id)
        return {tp: c for tp, c in found.items() if c.offset is not None or c.error is not None}

    async def alter_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Set the group's committed offsets (OffsetCommit with generation -1 and no member,
        as Java's alterConsumerGroupOffsets). The group must be empty: a group with active
        members answers UNKNOWN_MEMBER_ID per partition, a missing topic or partition
        UNKNOWN_TOPIC_OR_PARTITION."""
        values = {
            tp: v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(v)
            for tp, v in offsets.items()
        }
        for tp, v in values.items():
            if v.offset < 0:
                raise KafkaConfigError(f"offset {v.offset} for {tp}: offsets must be >= 0")
        request = m.OffsetCommitRequest(
            group_id=group_id,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            retention_time_ms=-1,
            topics=[
                m.OffsetCommitRequest.OffsetCommitRequestTopic(
                    name=topic,
                    partitions=[
                        m.OffsetCommitRequest.OffsetCommitRequestPartition(
                            partition_index=p,
                            committed_offset=v.offset,
                            committed_leader_epoch=-1 if v.leader_epoch is None else v.leader_epoch,
                            committed_metadata=v.metadata,
                        )
                        for p in partitions
                        for v in (values[TopicPartition(topic, p)],)
                    ],
                )
                for topic, partitions in by_topic(list(values)).items()
            ],
        )

        async def attempt() -> dict[TopicPartition, KafkaError | None]:
            conn = await self._coordinator(group_id)
            response = await conn.send(request)
            out: dict[TopicPartition, KafkaError | None] = {}
            for t in response.topics:
                for p in t.partitions:
                    err = missing_is_final(
                        broker_error(
                            p.error_code,
                            None,
                            group_id=group_id,
                            topic=t.name,
                            partition=p.partition_index,
                        )
                    )
                    if err is not None and err.retriable:
                        raise err  # coordinator moved or loading: the whole commit again
                    out[TopicPartition(t.name, p.partition_index)] = err
            return out

        return await self._retrying("alter_group_offsets", attempt, timeout_ms)

    async def delete_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition],
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Delete the group's committed offsets for `partitions` (OffsetDelete, Kafka 2.4+).

        Raises the group-level error (e.g. NON_EMPTY_GROUP...); partition errors such as
        GROUP_SUBSCRIBED_TO_TOPIC come back per partition.
        """
        tps = sorted(set(partitions))
        request = m.OffsetDeleteRequest(
            group_id=group_id,
            topics=[
                m.OffsetDeleteRequest.OffsetDeleteRequestTopic(
                    name=topic,
                    partitions=[
                        m.OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=p)
                        for p in ps
                    ],
                )
                for topic, ps in by_topic(tps).items()
            ],
        )

        async def attempt() -> dict[TopicPartition, KafkaError | None]:
            conn = await self._coordinator(group_id)
            response = await conn.send(request)
            err = broker_error(response.error_code, None, group_id=group_id)
            if err is not None:
                raise err
            return {
                TopicPartition(t.name, p.partition_index): broker_error(
                    p.error_code, None, topic=t.name, partition=p.partition_index
                )
                for t in response.topics
                for p in t.partitions
            }

        return await self._retrying("delete_group_offsets", attempt, timeout_ms)

    async def group_lag(
        self,
        group_id: str,
        *,
        isolation_level: str = "read_uncommitted",
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, PartitionLag]:
        """Lag of every partition the group has a committed offset for: the end offset
        (ListOffsets latest) minus the committed offset, at least 0."""
        committed = await self.list_group_offsets(group_id, timeout_ms=timeout_ms)
        with_offsets = {tp: c for tp, c in committed.items() if c.offset is not None}
        ends = await self.list_offsets(
            dict.fromkeys(with_offsets, OffsetSpec.LATEST),
            isolation_level=isolation_level,
            timeout_ms=timeout_ms,
        )
        out: dict[TopicPartition, PartitionLag] = {}
        for tp in sorted(committed):
            c = committed[tp]
            end = ends.get(tp)
            end_offset = None if end is None else end.offset
            lag = None
            if c.offset is not None and end_offset is not None:
                lag = max(end_offset - c.offset, 0)
            error = c.error or (end.error if end is not None else None)
            out[tp] = PartitionLag(tp, c.offset, end_offset, lag, error)
        return out
