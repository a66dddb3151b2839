"""kafkaio.Admin: create, delete, list and describe topics; describe the cluster.

Each call is routed to the right broker (the controller for topic changes), retried on
retriable errors with backoff until its deadline, and answers per item: one topic failing
does not hide what happened to the others.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar

import anyio

from kafkaio.admin.types import ClusterDescription, CreateTopicResult, NewTopic
from kafkaio.backoff import ExponentialBackoff
from kafkaio.config import split_connection_options
from kafkaio.errors import (
    BrokerResponseError,
    KafkaConfigError,
    KafkaError,
    KafkaTimeoutError,
    NotControllerError,
    error_for_code,
)
from kafkaio.metadata.cluster import ClusterMetadata, TopicInfo
from kafkaio.net.connection import Connection
from kafkaio.net.manager import ConnectionManager
from kafkaio.protocol import messages as m

log = logging.getLogger("kafkaio.admin")

T = TypeVar("T")

ADMIN_OPTIONS = ("default_api_timeout_ms", "retry_backoff_ms", "retry_backoff_max_ms")


def _error(code: int, message: str | None = None, **context: Any) -> BrokerResponseError | None:
    return None if code == 0 else error_for_code(code)(message, **context)


class Admin:
    """An admin client. Use ``async with Admin(bootstrap_servers=...) as admin``.

    Options: every connection option (client_id, request_timeout_ms, security_protocol,
    ssl_context, sasl_*...) plus default_api_timeout_ms (60000), retry_backoff_ms (100) and
    retry_backoff_max_ms (1000).
    """

    def __init__(self, bootstrap_servers: str | Sequence[str], **options: Any) -> None:
        options.setdefault("client_id", "kafkaio-admin")
        conn_config, own = split_connection_options(options, ADMIN_OPTIONS, "Admin")
        self._timeout_ms = float(own.get("default_api_timeout_ms", 60_000))
        if self._timeout_ms <= 0:
            raise KafkaConfigError("default_api_timeout_ms must be positive")
        self._backoff = ExponentialBackoff(
            float(own.get("retry_backoff_ms", 100)), float(own.get("retry_backoff_max_ms", 1000))
        )
        self._connections = ConnectionManager(bootstrap_servers, conn_config)
        self._cluster = ClusterMetadata()
        self._metadata_version = 0

    async def __aenter__(self) -> Admin:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect and load cluster metadata."""
        await self._retrying("connect", self._refresh_metadata, None)

    async def close(self) -> None:
        await self._connections.close()

    # -- topics ---------------------------------------------------------------------------

    async def create_topics(
        self,
        topics: Sequence[NewTopic],
        *,
        timeout_ms: float | None = None,
        validate_only: bool = False,
    ) -> dict[str, CreateTopicResult]:
        """Create topics on the controller; returns each topic's outcome (error or None)."""
        timeout = self._timeout_ms if timeout_ms is None else timeout_ms
        request = m.CreateTopicsRequest(
            topics=[
                m.CreateTopicsRequest.CreatableTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
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
                for t in topics
            ],
            timeout_ms=int(timeout),
            validate_only=validate_only,
        )

        async def attempt() -> dict[str, CreateTopicResult]:
            response = await self._send_to_controller(request)
            results = {}
            for r in response.topics:
                err = _error(r.error_code, r.error_message, topic=r.name)
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
        created = [n for n, r in results.items() if r.error is None]
        if created:
            log.info("created topics %s", ", ".join(created))
        return results

    async def delete_topics(
        self, names: Sequence[str], *, timeout_ms: float | None = None
    ) -> dict[str, BrokerResponseError | None]:
        """Delete topics; returns each topic's error, or None where it was deleted."""
        timeout = self._timeout_ms if timeout_ms is None else timeout_ms
        request = m.DeleteTopicsRequest(
            topic_names=list(names),
            topics=[m.DeleteTopicsRequest.DeleteTopicState(name=n) for n in names],
            timeout_ms=int(timeout),
        )

        async def attempt() -> dict[str, BrokerResponseError | None]:
            response = await self._send_to_controller(request)
            results: dict[str, BrokerResponseError | None] = {}
            for r in response.responses:
                err = _error(r.error_code, r.error_message, topic=r.name)
                if isinstance(err, NotControllerError):
                    raise err
                results[r.name or str(r.topic_id)] = err
            return results

        return await self._retrying("delete_topics", attempt, timeout)

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

        async def attempt() -> ClusterMetadata:
            return await self._refresh_metadata(names)

        cluster = await self._retrying("describe_topics", attempt, None)
        if names is None:
            return dict(cluster.topics)
        return {n: cluster.topics[n] for n in names if n in cluster.topics}

    async def describe_cluster(self) -> ClusterDescription:
        """The cluster id, the controller and the brokers."""
        cluster = await self._retrying("describe_cluster", self._refresh_metadata, None)
        return ClusterDescription(
            cluster.cluster_id,
            cluster.controller_id,
            tuple(sorted(cluster.brokers.values(), key=lambda b: b.node_id)),
        )

    # -- plumbing -------------------------------------------------------------------------

    async def _refresh_metadata(self, topics: Sequence[str] | None = None) -> ClusterMetadata:
        conn = await self._connections.least_loaded()
        request = m.MetadataRequest(
            topics=None
            if topics is None
            else [m.MetadataRequest.MetadataRequestTopic(name=n) for n in topics],
            allow_auto_topic_creation=False,
        )
        response = await conn.send(request)
        self._metadata_version += 1
        self._cluster = self._cluster.with_response(
            response,
            anyio.current_time() * 1000,
            full=topics is None,
            version=self._metadata_version,
        )
        self._connections.update_nodes(
            {b.node_id: (b.host, b.port) for b in self._cluster.brokers.values()}
        )
        return self._cluster

    async def _controller(self) -> Connection:
        if self._cluster.controller_id is None or self._cluster.broker(
            self._cluster.controller_id
        ) is None:
            await self._refresh_metadata()
        controller = self._cluster.controller_id
        if controller is None or controller < 0:
            return await self._connections.least_loaded()
        return await self._connections.get(controller)

    async def _send_to_controller(self, request: Any) -> Any:
        conn = await self._controller()
        return await conn.send(request)

    async def _retrying(
        self,
        what: str,
        attempt: Callable[..., Awaitable[T]],
        timeout_ms: float | None,
    ) -> T:
        """Run `attempt` until it succeeds, a non-retriable error, or the deadline."""
        timeout = (self._timeout_ms if timeout_ms is None else timeout_ms) / 1000.0
        deadline = anyio.current_time() + timeout
        failures = 0
        while True:
            try:
                with anyio.fail_after(max(deadline - anyio.current_time(), 0.001)):
                    return await attempt()
            except TimeoutError:
                raise KafkaTimeoutError(
                    f"Admin.{what} did not complete within {timeout:g} s; check that the "
                    "brokers are reachable, or pass a larger timeout_ms"
                ) from None
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                if isinstance(exc, NotControllerError) or exc.invalid_metadata:
                    self._cluster = ClusterMetadata()  # forget the stale controller
                delay = self._backoff.delay_ms(failures) / 1000.0
                failures += 1
                if anyio.current_time() + delay >= deadline:
                    raise KafkaTimeoutError(
                        f"Admin.{what} kept failing until its deadline ({timeout:g} s); "
                        f"last error: {exc}"
                    ) from exc
                log.info("Admin.%s: retrying after %s", what, exc)
                await anyio.sleep(delay)
