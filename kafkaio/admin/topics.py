"""Admin topic calls: create, delete, list and describe topics, and add partitions.

Topic changes go to the controller; a NOT_CONTROLLER answer refreshes metadata and retries.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from kafkaio.admin.core import AdminCore, broker_error, name_list
from kafkaio.admin.types import CreateTopicResult, NewPartitions, NewTopic
from kafkaio.errors import KafkaConfigError, KafkaError, NotControllerError
from kafkaio.metadata.cluster import ClusterMetadata, TopicInfo
from kafkaio.protocol import messages as m
from kafkaio.validate import check_topic

log = logging.getLogger("kafkaio.admin")


class TopicsMixin(AdminCore):
    async def create_topics(
        self,
        topics: Sequence[NewTopic],
        *,
        timeout_ms: float | None = None,
        validate_only: bool = False,
    ) -> dict[str, CreateTopicResult]:
        """Create topics on the controller; returns each topic's outcome (error or None).

        A topic listed twice is sent once (the broker refuses repeated names); two
        different specs for one name raise KafkaConfigError.
        """
        timeout = self._timeout_ms if timeout_ms is None else timeout_ms
        unique: dict[str, NewTopic] = {}
        for t in topics:
            check_topic(t.name)  # before sending: some brokers create a topic named ""
            if unique.setdefault(t.name, t) != t:
                raise KafkaConfigError(f"create_topics got two different specs for {t.name!r}")
        request = m.CreateTopicsRequest(
            topics=[
                m.CreateTopicsRequest.CreatableTopic(
                    name=t.name,
                    num_partitions=-1 if t.replica_assignment else t.num_partitions,
                    replication_factor=-1 if t.replica_assignment else t.replication_factor,
                    assignments=[
                        m.CreateTopicsRequest.CreatableReplicaAssignment(
                            partition_index=p, broker_ids=list(b)
                        )
                        for p, b in sorted(t.replica_assignment.items())
                    ],
                    configs=[
                        m.CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                        for k, v in t.configs.items()
                    ],
                )
                for t in unique.values()
            ],
            timeout_ms=int(timeout),
            validate_only=validate_only,
        )

        async def attempt() -> dict[str, CreateTopicResult]:
            response = await self._send_to_controller(request)
            results = {}
            for r in response.topics:
                err = broker_error(r.error_code, r.error_message, topic=r.name)
                if isinstance(err, NotControllerError):
                    raise err
                results[r.name] = CreateTopicResult(
                    r.name,
                    err,
                    topic_id=r.topic_id if r.topic_id.int else None,
                    num_partitions=r.num_partitions,
                    replication_factor=r.replication_factor,
                )
            return results

        results = await self._retrying("create_topics", attempt, timeout)
        self._metadata_stale = True
        created = [n for n, r in results.items() if r.error is None]
        if created:
            log.info("created topics %s", ", ".join(created))
        return results

    async def delete_topics(
        self, names: Sequence[str], *, timeout_ms: float | None = None
    ) -> dict[str, KafkaError | None]:
        """Delete topics; returns each topic's error, or None where it was deleted."""
        timeout = self._timeout_ms if timeout_ms is None else timeout_ms
        names = name_list(names, "delete_topics names")
        request = m.DeleteTopicsRequest(
            topic_names=list(names),
            topics=[m.DeleteTopicsRequest.DeleteTopicState(name=n) for n in names],
            timeout_ms=int(timeout),
        )

        async def attempt() -> dict[str, KafkaError | None]:
            response = await self._send_to_controller(request)
            results: dict[str, KafkaError | None] = {}
            for r in response.responses:
                err = broker_error(r.error_code, r.error_message, topic=r.name)
                if isinstance(err, NotControllerError):
                    raise err
                results[r.name or str(r.topic_id)] = err
            return results

        results = await self._retrying("delete_topics", attempt, timeout)
        self._metadata_stale = True
        return results

    async def create_partitions(
        self,
        new_partitions: Mapping[str, int | NewPartitions],
        *,
        timeout_ms: float | None = None,
        validate_only: bool = False,
    ) -> dict[str, KafkaError | None]:
        """Grow topics to a new partition count (CreatePartitions); each topic's error."""
        timeout = self._timeout_ms if timeout_ms is None else timeout_ms
        specs = {
            name: spec if isinstance(spec, NewPartitions) else NewPartitions(spec)
            for name, spec in new_partitions.items()
        }
        request = m.CreatePartitionsRequest(
            topics=[
                m.CreatePartitionsRequest.CreatePartitionsTopic(
                    name=name,
                    count=spec.total_count,
                    assignments=None
                    if spec.assignments is None
                    else [
                        m.CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=list(b))
                        for b in spec.assignments
                    ],
                )
                for name, spec in specs.items()
            ],
            timeout_ms=int(timeout),
            validate_only=validate_only,
        )

        async def attempt() -> dict[str, KafkaError | None]:
            response = await self._send_to_controller(request)
            results: dict[str, KafkaError | None] = {}
            for r in response.results:
                err = broker_error(r.error_code, r.error_message, topic=r.name)
                if isinstance(err, NotControllerError):
                    raise err
                results[r.name] = err
            return results

        results = await self._retrying("create_partitions", attempt, timeout)
        self._metadata_stale = True
        return results

    async def list_topics(self, *, include_internal: bool = False) -> list[str]:
        """Names of the cluster's topics, sorted."""
        cluster = await self._retrying("list_topics", self._refresh_metadata, None)
        return sorted(
            name for name, t in cluster.topics.items() if include_internal or not t.is_internal
        )

    async def describe_topics(self, names: Sequence[str] | None = None) -> dict[str, TopicInfo]:
        """Partitions, leaders, replicas and topic ids of `names` (all topics when None).

        A topic that does not exist is returned with its error code set
        (UNKNOWN_TOPIC_OR_PARTITION) rather than raising, so one bad name hides nothing.
        """
        if names is not None:
            names = name_list(names, "describe_topics names")

        async def attempt() -> ClusterMetadata:
            return await self._refresh_metadata(names)

        cluster = await self._retrying("describe_topics", attempt, None)
        if names is None:
            return dict(cluster.topics)
        return {n: cluster.topics[n] for n in names if n in cluster.topics}
