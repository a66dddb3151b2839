"""Admin cluster calls: describe the cluster (DescribeCluster, else Metadata) and the
brokers' log directories (DescribeLogDirs, per broker)."""

from __future__ import annotations

from collections.abc import Sequence

from kafkaio.admin.core import AdminCore, broker_error
from kafkaio.admin.types import BrokerLogDirs, ClusterDescription, LogDirDescription, ReplicaLogInfo
from kafkaio.errors import KafkaError
from kafkaio.metadata.cluster import BrokerNode
from kafkaio.protocol import messages as m


class ClusterMixin(AdminCore):
    async def describe_cluster(self, *, timeout_ms: float | None = None) -> ClusterDescription:
        """The cluster id, the controller and the brokers (DescribeCluster where the broker
        has it, else Metadata)."""

        async def attempt() -> ClusterDescription:
            conn = await self._any()
            if not conn.supports(m.DescribeClusterRequest):
                cluster = await self._refresh_metadata()
                controller = cluster.controller_id
                return ClusterDescription(
                    cluster.cluster_id,
                    None if controller is None or controller < 0 else controller,
                    tuple(sorted(cluster.brokers.values(), key=lambda b: b.node_id)),
                )
            response = await conn.send(
                m.DescribeClusterRequest(
                    include_cluster_authorized_operations=False, endpoint_type=1
                )
            )
            err = broker_error(response.error_code, response.error_message)
            if err is not None:
                raise err
            return ClusterDescription(
                response.cluster_id,
                None if response.controller_id < 0 else response.controller_id,
                tuple(
                    sorted(
                        (BrokerNode(b.broker_id, b.host, b.port, b.rack) for b in response.brokers),
                        key=lambda b: b.node_id,
                    )
                ),
            )

        return await self._retrying("describe_cluster", attempt, timeout_ms)

    async def describe_log_dirs(
        self, broker_ids: Sequence[int] | None = None, *, timeout_ms: float | None = None
    ) -> dict[int, BrokerLogDirs]:
        """Each broker's log directories with the size and lag of every replica in them."""
        ids = list(broker_ids) if broker_ids is not None else None
        if ids is None:
            ids = await self._retrying("describe_log_dirs", self._broker_ids, timeout_ms)

        async def prepare(_pending: list[int]) -> None:
            if self._metadata_stale:
                await self._refresh_metadata()

        async def send(node: int, _items: list[int]) -> dict[int, BrokerLogDirs | KafkaError]:
            conn = await self._node(node)
            version = conn.version_for(m.DescribeLogDirsRequest)
            response = await conn.send(m.DescribeLogDirsRequest(topics=None), version=version)
            top = broker_error(response.error_code, None, broker=node) if version >= 3 else None
            if top is not None:
                return {node: top if top.retriable else BrokerLogDirs(node, top)}
            dirs = tuple(
                LogDirDescription(
                    path=d.log_dir,
                    error=broker_error(d.error_code, None, log_dir=d.log_dir),
                    replicas={
                        (t.name, p.partition_index): ReplicaLogInfo(
                            p.partition_size, p.offset_lag, p.is_future_key
                        )
                        for t in d.topics
                        for p in t.partitions
                    },
                    total_bytes=d.total_bytes if version >= 4 and d.total_bytes >= 0 else None,
                    usable_bytes=d.usable_bytes if version >= 4 and d.usable_bytes >= 0 else None,
                )
                for d in response.results
            )
            return {node: BrokerLogDirs(node, None, dirs)}

        return await self._fan_out(
            "describe_log_dirs",
            ids,
            prepare=prepare,
            route=lambda node: node,
            send=send,
            failed=lambda node, e: BrokerLogDirs(node, e),
            timeout_ms=timeout_ms,
        )
