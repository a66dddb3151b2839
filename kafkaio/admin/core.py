"""The Admin client's plumbing: connections, metadata, routing and retries.

Routes requests to the controller, a group's coordinator, partition leaders or any broker;
retries retriable errors with backoff until each call's deadline, per item where it can.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

import anyio

from kafkaio.backoff import ExponentialBackoff
from kafkaio.config import split_connection_options
from kafkaio.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NotControllerError,
    NotCoordinatorError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kafkaio.metadata.cluster import ClusterMetadata, TopicPartition
from kafkaio.metadata.coordinators import CoordinatorType, lookup_request, parse_lookup
from kafkaio.metrics import HealthSnapshot
from kafkaio.net.connection import Connection
from kafkaio.net.manager import ConnectionManager, parse_bootstrap_servers
from kafkaio.protocol import messages as m
from kafkaio.runtime.shell import AsyncClient, ClientShell, timeout_ms_arg

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from kafkaio.options import AdminOptions

log = logging.getLogger("kafkaio.admin")

T = TypeVar("T")
K = TypeVar("K")
R = TypeVar("R")

ADMIN_OPTIONS = ("default_api_timeout_ms", "retry_backoff_ms", "retry_backoff_max_ms")

_COORDINATOR_ERRORS = (NotCoordinatorError, CoordinatorNotAvailableError)


class _GroupRouter(TypedDict):
    prepare: Callable[[list[str]], Awaitable[None]]
    route: Callable[[str], int | KafkaError]


def broker_error(code: int, message: str | None = None, **context: Any) -> KafkaError | None:
    """The error for a response's error code, or None for 0 (NONE)."""
    if code == 0:
        return None
    detail = message if message and message.strip().rstrip(".").lower() != "no error" else None
    return error_for_code(code)(detail, **context)


class MissingTopicOrPartition(UnknownTopicOrPartitionError):
    """UNKNOWN_TOPIC_OR_PARTITION taken as final: the topic or partition does not exist and
    retrying will not help (as the Java admin reports it)."""

    retriable = False


def missing_is_final(err: KafkaError | None) -> KafkaError | None:
    """`err`, with UNKNOWN_TOPIC_OR_PARTITION made final (not retried)."""
    if type(err) is UnknownTopicOrPartitionError:
        return MissingTopicOrPartition(err.message, **err.context)
    return err


def name_list(names: Iterable[str], what: str) -> list[str]:
    """`names` as a list without repeats; a bare str (taken as its characters) is refused."""
    if isinstance(names, str):
        raise KafkaConfigError(f"{what} must be a list of names, not the str {names!r}")
    return list(dict.fromkeys(names))


class AdminCore(AsyncClient):
    """Connections, cluster metadata, coordinator cache and the retry loops of ``Admin``."""

    def __init__(
        self, bootstrap_servers: str | Sequence[str], **options: Unpack[AdminOptions]
    ) -> None:
        options.setdefault("client_id", "kafkaio-admin")
        parse_bootstrap_servers(bootstrap_servers)  # a wrong value fails here, not in start()
        conn_config, own = split_connection_options(options, ADMIN_OPTIONS, "Admin")
        self._timeout_ms = float(own.get("default_api_timeout_ms", 60_000))
        if self._timeout_ms <= 0:
            raise KafkaConfigError("default_api_timeout_ms must be positive")
        self._backoff = ExponentialBackoff(
            float(own.get("retry_backoff_ms", 100)), float(own.get("retry_backoff_max_ms", 1000))
        )
        self._connections = ConnectionManager(bootstrap_servers, conn_config)
        self._shell = ClientShell(
            "admin client", bootstrap_servers, conn_config, connections=self._connections
        )
        self._cluster = ClusterMetadata()
        self._metadata_version = 0
        self._metadata_stale = True
        self._coordinators: dict[str, int] = {}
        self._extra_nodes: dict[int, tuple[str, int]] = {}

    async def start(self) -> None:
        """Connect and load cluster metadata: raises BootstrapError when no broker answers
        within default_api_timeout_ms (a fatal error, such as a refused login, as it is).
        An admin client starts once."""

        async def connect(_connections: ConnectionManager) -> None:
            await self._retrying("connect", self._refresh_metadata, None)

        await self._shell.start(self._timeout_ms, connect)

    async def close(self, timeout_ms: float | None = None) -> None:
        """Close every connection; the client cannot be used afterwards. Nothing is left to
        flush, so ``timeout_ms`` (accepted as on every client) changes nothing. Safe to call
        twice, from another task than start() and under a cancel scope."""
        timeout_ms_arg(timeout_ms, None, None, "Admin.close")
        await self._shell.close(timeout_ms)

    def health(self) -> HealthSnapshot:
        """The admin client's connections now (for health endpoints)."""
        return HealthSnapshot(
            self._connections.config.client_id or "",
            "admin",
            self._shell.running,
            self._shell.connection_states(),
        )

    @property
    def cluster(self) -> ClusterMetadata:
        """The last cluster metadata snapshot this client loaded."""
        return self._cluster

    # -- metadata and routing -------------------------------------------------------------

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
        self._metadata_stale = False
        self._publish_nodes()
        return self._cluster

    def _publish_nodes(self) -> None:
        nodes = dict(self._extra_nodes)
        nodes.update({b.node_id: (b.host, b.port) for b in self._cluster.brokers.values()})
        self._connections.update_nodes(nodes)

    async def _metadata_for(
        self, topics: Iterable[str], partitions: Iterable[TopicPartition] = ()
    ) -> ClusterMetadata:
        """Metadata covering `topics`, refreshed if stale, if a topic is missing, or if one
        of `partitions` is (added since the last refresh, e.g. by another client)."""
        wanted = sorted(set(topics))
        known = self._cluster.topics
        if (
            self._metadata_stale
            or any(t not in known or known[t].error for t in wanted)
            or any(self._cluster.partition(tp) is None for tp in partitions)
        ):
            await self._refresh_metadata(wanted)
        return self._cluster

    async def _node(self, node_id: int) -> Connection:
        return await self._connections.get(node_id)

    async def _any(self) -> Connection:
        return await self._connections.least_loaded()

    async def _controller(self) -> Connection:
        if self._metadata_stale or self._cluster.controller_id is None:
            await self._refresh_metadata()
        controller = self._cluster.controller_id
        if controller is None or self._cluster.broker(controller) is None:
            return await self._connections.least_loaded()  # e.g. KRaft: any broker forwards
        return await self._connections.get(controller)

    async def _send_to_controller(self, request: Any) -> Any:
        conn = await self._controller()
        return await conn.send(request)

    async def _broker_ids(self) -> list[int]:
        if self._metadata_stale or not self._cluster.brokers:
            await self._refresh_metadata()
        return sorted(self._cluster.brokers)

    # -- coordinators ---------------------------------------------------------------------

    async def _find_coordinators(self, group_ids: Iterable[str]) -> dict[str, int | KafkaError]:
        """Coordinator node of each group (cached), or the error FindCoordinator gave."""
        out: dict[str, int | KafkaError] = {}
        wanted = list(dict.fromkeys(group_ids))
        missing = [g for g in wanted if g not in self._coordinators]
        for g in wanted:
            if g in self._coordinators:
                out[g] = self._coordinators[g]
        if not missing:
            return out
        conn = await self._any()
        version = conn.version_for(m.FindCoordinatorRequest)
        batches = [missing] if version >= 4 else [[g] for g in missing]
        for batch in batches:
            response = await conn.send(
                lookup_request(CoordinatorType.GROUP, batch), version=version
            )
            for key, found in parse_lookup(response, CoordinatorType.GROUP, batch).items():
                if isinstance(found, KafkaError):
                    out[key] = found
                    continue
                self._coordinators[key] = found.node_id
                out[key] = found.node_id
                if found.node_id not in self._connections.nodes:
                    self._extra_nodes[found.node_id] = (found.host, found.port)
                    self._publish_nodes()
        return out

    def _group_router(self) -> _GroupRouter:
        """`prepare` and `route` arguments of `_fan_out` for items that are group ids."""
        lookup: dict[str, int | KafkaError] = {}

        async def prepare(pending: list[str]) -> None:
            lookup.clear()
            lookup.update(await self._find_coordinators(pending))

        def route(group_id: str) -> int | KafkaError:
            return lookup.get(
                group_id,
                CoordinatorNotAvailableError("no coordinator found", group_id=group_id),
            )

        return {"prepare": prepare, "route": route}

    async def _coordinator(self, group_id: str) -> Connection:
        found = (await self._find_coordinators([group_id]))[group_id]
        if isinstance(found, KafkaError):
            raise found
        return await self._connections.get(found)

    # -- retries --------------------------------------------------------------------------

    def _after_retriable(self, exc: KafkaError) -> None:
        """Forget what a retriable error says is stale: coordinators or metadata."""
        if isinstance(exc, (*_COORDINATOR_ERRORS, CoordinatorLoadInProgressError)):
            if not isinstance(exc, CoordinatorLoadInProgressError):
                self._coordinators.clear()
        if isinstance(exc, (NotControllerError, KafkaConnectionError)) or exc.invalid_metadata:
            self._metadata_stale = True
            if isinstance(exc, KafkaConnectionError):
                self._coordinators.clear()

    def _timeout_s(self, timeout_ms: float | None) -> float:
        return (self._timeout_ms if timeout_ms is None else timeout_ms) / 1000.0

    async def _retrying(
        self,
        what: str,
        attempt: Callable[..., Awaitable[T]],
        timeout_ms: float | None,
    ) -> T:
        """Run `attempt` until it succeeds, raises a non-retriable error, or the deadline."""
        timeout = self._timeout_s(timeout_ms)
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
                self._after_retriable(exc)
                delay = self._backoff.delay_ms(failures) / 1000.0
                failures += 1
                if anyio.current_time() + delay >= deadline:
                    raise KafkaTimeoutError(
                        f"Admin.{what} kept failing until its deadline ({timeout:g} s); "
                        f"last error: {exc}"
                    ) from exc
                log.info("Admin.%s: retrying after %s", what, exc)
                await anyio.sleep(delay)

    async def _fan_out(
        self,
        what: str,
        items: Iterable[K],
        *,
        prepare: Callable[[list[K]], Awaitable[None]],
        route: Callable[[K], int | KafkaError],
        send: Callable[[int, list[K]], Awaitable[Mapping[K, R | KafkaError]]],
        failed: Callable[[K, KafkaError], R],
        timeout_ms: float | None,
    ) -> dict[K, R]:
        """Send items to the nodes `route` picks (one request per node, concurrently).

        `prepare(pending)` runs before each round (metadata, coordinators); `route(item)`
        gives a node id or an error; `send(node, items)` returns each item's result, or a
        KafkaError to retry it. Retriable errors are retried with backoff until the
        deadline; then, and for non-retriable errors, `failed(item, error)` is the result.
        Each node's answer counts on its own: at the deadline only the items of nodes that
        have not answered fail (with their last error, else KafkaTimeoutError).
        """
        timeout = self._timeout_s(timeout_ms)
        deadline = anyio.current_time() + timeout
        timeout_error = KafkaTimeoutError(f"Admin.{what} did not complete within {timeout:g} s")
        pending = list(dict.fromkeys(items))
        results: dict[K, R] = {}
        last: dict[K, KafkaError] = {}
        failures = 0
        while pending:
            retry: list[K] = []
            by_node: dict[int, list[K]] = {}
            outcomes: dict[int, Mapping[K, R | KafkaError] | KafkaError | None] = {}
            try:
                with anyio.fail_after(max(deadline - anyio.current_time(), 0.001)):
                    await prepare(pending)
            except TimeoutError:
                for item in pending:
                    results[item] = failed(item, last.get(item, timeout_error))
                break
            except KafkaError as exc:  # prepare failed: every pending item shares the error
                for item in pending:
                    self._settle(item, exc, results, last, retry, failed)
            else:
                for item in pending:
                    node = route(item)
                    if isinstance(node, KafkaError):
                        self._settle(item, node, results, last, retry, failed)
                    else:
                        by_node.setdefault(node, []).append(item)
                outcomes = await self._send_all(by_node, send, deadline)
            for node, node_items in by_node.items():
                outcome = outcomes.get(node)
                for item in node_items:
                    if outcome is None:  # no answer before the deadline
                        results[item] = failed(item, last.get(item, timeout_error))
                        continue
                    answer = (
                        outcome.get(item, _missing(item))
                        if isinstance(outcome, Mapping)
                        else outcome
                    )
                    if isinstance(answer, KafkaError):
                        self._settle(item, answer, results, last, retry, failed)
                    else:
                        results[item] = answer
            pending = retry
            if not pending:
                break
            delay = self._backoff.delay_ms(failures) / 1000.0
            failures += 1
            if anyio.current_time() + delay >= deadline:
                for item in pending:
                    results[item] = failed(item, last[item])
                break
            log.info("Admin.%s: retrying %d items after %s", what, len(pending), last[pending[0]])
            await anyio.sleep(delay)
        return results

    def _settle(
        self,
        item: K,
        error: KafkaError,
        results: dict[K, R],
        last: dict[K, KafkaError],
        retry: list[K],
        failed: Callable[[K, KafkaError], R],
    ) -> None:
        if error.retriable:
            self._after_retriable(error)
            last[item] = error
            retry.append(item)
        else:
            results[item] = failed(item, error)

    @staticmethod
    async def _send_all(
        by_node: dict[int, list[K]],
        send: Callable[[int, list[K]], Awaitable[Mapping[K, R | KafkaError]]],
        deadline: float,
    ) -> dict[int, Mapping[K, R | KafkaError] | KafkaError | None]:
        """Each node's answer (or error); None for a node that did not answer in time."""
        outcomes: dict[int, Mapping[K, R | KafkaError] | KafkaError | None] = {}

        async def one(node: int, node_items: list[K]) -> None:
            outcomes[node] = None
            with anyio.move_on_after(max(deadline - anyio.current_time(), 0.001)):
                try:
                    outcomes[node] = await send(node, node_items)
                except KafkaError as exc:
                    outcomes[node] = exc

        async with anyio.create_task_group() as tg:
            for node, node_items in by_node.items():
                tg.start_soon(one, node, node_items)
        return outcomes


def _missing(item: object) -> KafkaError:
    return UnknownServerError(f"the broker's response did not mention {item!r}")
