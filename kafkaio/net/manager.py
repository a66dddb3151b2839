"""Per-node broker connections: lazy connect, shared attempts, reconnect backoff, idle close.

``ConnectionManager`` owns every connection of a client; metadata tells it where nodes are.
"""

from __future__ import annotations

import copy
import logging
import random
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

import anyio

from kafkaio.backoff import ExponentialBackoff
from kafkaio.clock import monotonic
from kafkaio.errors import (
    ClientClosedError,
    KafkaConfigError,
    KafkaConnectionError,
    KafkaError,
    NotKafkaPeerError,
)
from kafkaio.metrics.connection import ConnectionMetrics
from kafkaio.metrics.health import ConnectionHealth
from kafkaio.net.config import ConnectionConfig
from kafkaio.net.connection import Connection, describe_node

log = logging.getLogger("kafkaio.net")

DEFAULT_PORT = 9092

NodeAddress = tuple[str, int, "str | None"]
"""(host, port, rack) of a broker, as Metadata gives it."""


def parse_bootstrap_servers(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """``"a:9092,b:9093"``, ``["[::1]:9092"]`` -> ``[(host, port), ...]``.

    The port defaults to 9092; IPv6 literals need brackets when a port follows; a
    ``SCHEME://`` prefix (e.g. ``PLAINTEXT://``) is ignored. Duplicates are dropped.
    """
    if isinstance(servers, str):
        items = servers.split(",")
    elif isinstance(servers, (list, tuple)):
        items = list(servers)
    else:
        raise KafkaConfigError(
            f"bootstrap_servers must be a 'host:port' string (comma-separated for several) "
            f"or a list of them, got {servers!r}"
        )
    result: list[tuple[str, int]] = []
    for raw in items:
        if not isinstance(raw, str):
            raise KafkaConfigError(f"bootstrap server {raw!r} is not a 'host:port' string")
        item = raw.strip()
        if "://" in item:
            item = item.split("://", 1)[1]
        if not item:
            continue
        if item.startswith("["):
            host, bracket, rest = item[1:].partition("]")
            if not bracket or (rest and not rest.startswith(":")):
                raise KafkaConfigError(f"bootstrap server {raw!r}: expected '[ipv6]:port'")
            port_text = rest[1:] if rest else str(DEFAULT_PORT)
        elif item.count(":") == 1:
            host, port_text = item.split(":")
        elif ":" in item:
            raise KafkaConfigError(
                f"bootstrap server {raw!r}: write IPv6 addresses in brackets, e.g. '[::1]:9092'"
            )
        else:
            host, port_text = item, str(DEFAULT_PORT)
        try:
            port = int(port_text)
        except ValueError:
            port = -1
        if not host or not 0 < port < 65536:
            raise KafkaConfigError(
                f"bootstrap server {raw!r}: expected 'host:port' with a port in 1-65535"
            )
        if (host, port) not in result:
            result.append((host, port))
    if not result:
        raise KafkaConfigError("bootstrap_servers is empty; give at least one 'host:port'")
    return result


class _Slot:
    """Connection state for one address: the connection, a shared attempt, its backoff."""

    __slots__ = (
        "host",
        "port",
        "node_id",
        "conn",
        "attempt",
        "attempts",
        "failed_attempt",
        "error",
        "failures",
        "next_attempt",
    )

    def __init__(self, host: str, port: int, node_id: int | None) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.conn: Connection | None = None
        self.attempt: anyio.Event | None = None  # set when the attempt under way ends
        self.attempts = 0  # attempts started (a generation counter)
        self.failed_attempt = -1  # generation of the last failed attempt
        self.error: BaseException | None = None
        self.failures = 0  # failures in a row, for backoff
        self.next_attempt = 0.0

    def open_connection(self) -> Connection | None:
        conn = self.conn
        return conn if conn is not None and not conn.closed else None


class ConnectionManager:
    """One connection per broker node, made on first use and shared by all callers.

    Use as ``async with ConnectionManager(...) as manager``, or call :meth:`close`.
    Concurrent :meth:`get` calls for one node share one connect attempt; after a failed
    attempt the node is not tried again until a jittered exponential backoff
    (``reconnect_backoff_ms`` .. ``reconnect_backoff_max_ms``) has passed (callers wait it
    out). Connections unused for ``connections_max_idle_ms`` are closed by :meth:`maintain`
    and replaced on next use.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        config: ConnectionConfig | None = None,
        *,
        rand: Callable[[], float] = random.random,
        metrics: ConnectionMetrics | None = None,
    ) -> None:
        self.config = config if config is not None else ConnectionConfig()
        if self.config.sends_credentials_in_clear:
            log.warning(
                "security_protocol SASL_PLAINTEXT with sasl_mechanism %s sends the %s to the "
                "brokers unencrypted, readable by anyone on the network path; use SASL_SSL",
                self.config.sasl_mechanism,
                "bearer token" if self.config.sasl_mechanism == "OAUTHBEARER" else "password",
            )
        # metrics: connections opened/closed (sensors) and open connections (a gauge)
        self._metrics = metrics
        if metrics is not None:
            metrics.bind_connection_count(lambda now: float(self.connection_count()))
        self.bootstrap_servers = parse_bootstrap_servers(bootstrap_servers)
        self._backoff = ExponentialBackoff(
            self.config.reconnect_backoff_ms, self.config.reconnect_backoff_max_ms
        )
        self._rand = rand
        self._nodes: dict[int, NodeAddress] = {}
        self._node_slots: dict[int, _Slot] = {}
        self._bootstrap_slots = {
            address: _Slot(address[0], address[1], None) for address in self.bootstrap_servers
        }
        self._bootstrap_index = 0
        self._retired: list[Connection] = []
        self._closed = False
        self._connected_once = False  # a connection was set up (the peers speak Kafka)

    # -- nodes --------------------------------------------------------------------------

    @property
    def nodes(self) -> dict[int, NodeAddress]:
        """Known nodes: ``{node_id: (host, port, rack)}`` (a copy)."""
        return dict(self._nodes)

    def update_nodes(self, nodes: Mapping[int, tuple[str, int] | NodeAddress]) -> None:
        """Replace the known nodes (from a Metadata response).

        Connections to nodes that left or moved are closed by the next :meth:`maintain` or
        :meth:`get`; requests already in flight on them may finish first.
        """
        fresh: dict[int, NodeAddress] = {}
        for node_id, address in nodes.items():
            host, port = address[0], int(address[1])
            rack = address[2] if len(address) > 2 else None
            fresh[int(node_id)] = (host, port, rack)
        for node_id, slot in list(self._node_slots.items()):
            new = fresh.get(node_id)
            if new is None or (new[0], new[1]) != (slot.host, slot.port):
                del self._node_slots[node_id]
                if slot.conn is not None:
                    self._retired.append(slot.conn)
        self._nodes = fresh

    def backoff_remaining(self, node_id: int) -> float:
        """Seconds until ``node_id`` may be tried again (0 if now or already connected)."""
        slot = self._node_slots.get(node_id)
        if slot is None or slot.open_connection() is not None:
            return 0.0
        next_attempt = slot.next_attempt
        if slot.conn is not None:  # lost, not yet noticed by get(): the same rule as get()
            next_attempt = max(next_attempt, monotonic() + self._backoff.initial_ms / 1000)
        return max(0.0, next_attempt - monotonic())

    def _slot_for(self, node_id: int) -> _Slot:
        slot = self._node_slots.get(node_id)
        if slot is None:
            address = self._nodes.get(node_id)
            if address is None:
                known = sorted(self._nodes) or "none yet"
                raise KafkaConnectionError(
                    f"node {node_id} is not in the cluster metadata (known nodes: {known}); "
                    "refresh metadata and retry"
                )
            slot = self._node_slots[node_id] = _Slot(address[0], address[1], node_id)
        return slot

    # -- getting connections ------------------------------------------------------------

    async def get(self, node_id: int) -> Connection:
        """The connection to ``node_id``, connecting (once, shared) if needed.

        Raises KafkaConnectionError naming the node if it cannot be reached, or the
        authentication error if the broker refused the credentials.
        """
        self._check_open()
        await self._close_retired()
        return await self._connect(self._slot_for(node_id))

    def ready(self, node_id: int) -> Connection | None:
        """The connection to ``node_id`` if it can take a request at once: open, not idle
        past ``connections_max_idle_ms``, and no retired connection waiting to be closed.
        None otherwise (then :meth:`get` connects, reconnects or cleans up)."""
        if self._closed or self._retired:
            return None
        slot = self._node_slots.get(node_id)
        if slot is None:
            return None
        conn = slot.open_connection()
        if conn is None or (conn.in_flight == 0 and self._idle(conn, monotonic())):
            return None
        return conn

    def idle_peer(self, node_id: int) -> Connection | None:
        """Another connection to ``node_id``'s broker that can take a request at once and has
        nothing in flight or queued: the open connection of another id at the same address
        (the group coordinator's own, see ``coordinator_connection_id``) or of the bootstrap
        server at that address, which the same config set up (same TLS and SASL). None if
        there is none; no connection is made. For a request that should not wait behind
        those in flight on the node's own connection (``UnsentRequest.any_connection``)."""
        if self._closed or self._retired:
            return None
        own = self._node_slots.get(node_id)
        if own is None:
            return None
        address = (own.host, own.port)
        now = monotonic()
        for slot in (*self._node_slots.values(), self._bootstrap_slots.get(address)):
            if slot is None or slot is own or (slot.host, slot.port) != address:
                continue
            conn = slot.open_connection()
            if (
                conn is not None
                and conn is not own.conn
                and conn.in_flight == 0
                and conn.queued == 0
                and not conn.needs_writer
                and not self._idle(conn, now)
            ):
                return conn
        return None

    async def bootstrap(self) -> Connection:
        """A connection to one of the bootstrap servers (for the first Metadata request).

        Tries them in turn, starting after the last one used and preferring those not in
        backoff; raises KafkaConnectionError listing every failure if none answers.
        """
        self._check_open()
        addresses = self.bootstrap_servers
        count = len(addresses)
        rotated = [addresses[(self._bootstrap_index + i) % count] for i in range(count)]
        now = monotonic()
        ready = [a for a in rotated if self._bootstrap_slots[a].next_attempt <= now]
        failures: list[str] = []
        final: KafkaConnectionError | None = None  # one that retrying cannot fix (TLS...)
        for address in ready + [a for a in rotated if a not in ready]:
            try:
                conn = await self._connect(self._bootstrap_slots[address])
            except KafkaConnectionError as exc:
                failures.append(str(exc))
                if final is None and not exc.retriable:
                    final = exc
                continue
            self._bootstrap_index = addresses.index(address)
            return conn
        self._bootstrap_index = (self._bootstrap_index + 1) % count
        if final is not None:
            raise final
        raise KafkaConnectionError(
            f"could not connect to any of the {count} bootstrap servers: "
            + "; ".join(failures)
            + ". Check bootstrap_servers, that the brokers are running, and security_protocol"
        )

    async def least_loaded(self) -> Connection:
        """The open connection with the fewest in-flight requests.

        With none open, connects to a known node that is not in backoff, else to a
        bootstrap server.
        """
        self._check_open()
        await self._close_retired()
        now = monotonic()
        conn = self._least_loaded_open(now)
        if conn is not None:
            return conn
        node_ids = list(self._nodes)
        if node_ids:
            start = int(self._rand() * len(node_ids))
            for i in range(len(node_ids)):
                node_id = node_ids[(start + i) % len(node_ids)]
                slot = self._slot_for(node_id)
                if slot.next_attempt > now:
                    continue
                try:
                    return await self._connect(slot)
                except KafkaConnectionError:
                    continue
        return await self.bootstrap()

    def least_loaded_ready(self) -> Connection | None:
        """The open connection with the fewest in-flight requests if one can take a
        request at once (as :meth:`ready`); None otherwise (then :meth:`least_loaded`)."""
        if self._closed or self._retired:
            return None
        return self._least_loaded_open(monotonic())

    def _least_loaded_open(self, now: float) -> Connection | None:
        candidates = [
            (conn.in_flight, self._rand(), conn)
            for slot in (*self._node_slots.values(), *self._bootstrap_slots.values())
            if (conn := slot.open_connection()) is not None and not self._idle(conn, now)
        ]
        if not candidates:
            return None
        return min(candidates, key=lambda c: (c[0], c[1]))[2]

    async def send(
        self,
        node_id: int | None,
        request: Any,
        *,
        version: int | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Send ``request`` to ``node_id`` (None: the least loaded node) and return the response."""
        conn = await (self.least_loaded() if node_id is None else self.get(node_id))
        return await conn.send(request, version=version, timeout=timeout)

    async def _connect(self, slot: _Slot) -> Connection:
        while True:
            self._check_open()
            conn = slot.open_connection()
            if conn is not None:
                if not self._idle(conn, monotonic()):
                    return conn
                await conn.close()
                slot.conn = None
                self._record_close()
            elif slot.conn is not None:  # lost since last use: reconnect after a short backoff
                slot.conn = None
                self._record_close()
                delay = self._backoff.delay_ms(0, self._rand) / 1000
                slot.next_attempt = max(slot.next_attempt, monotonic() + delay)
            attempt = slot.attempt
            if attempt is not None:  # someone is connecting: share the outcome
                generation = slot.attempts
                await attempt.wait()
                if slot.failed_attempt == generation and slot.error is not None:
                    raise _clone(slot.error)
                continue  # succeeded (loop returns it) or the connecting task was cancelled
            return await self._attempt(slot)

    async def _attempt(self, slot: _Slot) -> Connection:
        event = slot.attempt = anyio.Event()
        slot.attempts += 1
        generation = slot.attempts
        try:
            wait = slot.next_attempt - monotonic()
            if wait > 0:
                await anyio.sleep(wait)
            conn = await Connection.connect(slot.host, slot.port, self.config, node_id=slot.node_id)
        except KafkaError as error:
            exc = error
            if isinstance(exc, NotKafkaPeerError) and self._connected_once:
                # the cluster spoke Kafka before: a fault of the moment (a proxy, a restart,
                # one misconfigured listener), retried; only a first contact fails at once
                exc = KafkaConnectionError(f"{error}; the cluster answered in Kafka before: retrying")
                exc.__cause__ = error
            slot.failures += 1
            delay = self._backoff.delay_ms(slot.failures - 1, self._rand) / 1000
            slot.next_attempt = monotonic() + delay
            slot.failed_attempt = generation
            slot.error = exc
            log.warning(
                "connecting to %s failed (%d in a row; next attempt in %.2f s): %s",
                describe_node(slot.host, slot.port, slot.node_id),
                slot.failures,
                delay,
                exc,
            )
            if exc is not error:
                raise exc from error
            raise
        finally:
            slot.attempt = None
            event.set()
        if self._closed:
            await conn.close()
            self._check_open()
        slot.failures = 0
        slot.next_attempt = 0.0
        slot.error = None
        slot.conn = conn
        self._connected_once = True
        if self._metrics is not None:
            now = monotonic() * 1000.0
            self._metrics.created.record(1.0, now)
        return conn

    # -- upkeep -------------------------------------------------------------------------

    def _idle(self, conn: Connection, now: float) -> bool:
        limit = self.config.connections_max_idle_ms / 1000
        return conn.in_flight == 0 and now - conn.last_used > limit

    async def maintain(self, now: float | None = None) -> int:
        """Close connections idle longer than ``connections_max_idle_ms`` and connections to
        nodes that left the metadata; returns how many were closed.

        ``now`` is anyio's clock (``kafkaio.clock.monotonic()``), the clock ``last_used`` uses.
        """
        now = monotonic() if now is None else now
        closed = await self._close_retired()
        for slot in (*self._node_slots.values(), *self._bootstrap_slots.values()):
            conn = slot.open_connection()
            if conn is not None and self._idle(conn, now):
                await conn.close()
                slot.conn = None
                self._record_close()
                closed += 1
        return closed

    async def _close_retired(self) -> int:
        retired, self._retired = self._retired, []
        count = 0
        for conn in retired:
            if not conn.closed:
                await conn.close()
                self._record_close()
                count += 1
        return count

    def _record_close(self) -> None:
        if self._metrics is not None:
            self._metrics.closed.record(1.0, monotonic() * 1000.0)

    # -- state for metrics and health checks --------------------------------------------

    def connection_count(self) -> int:
        """Open connections (to nodes and bootstrap servers)."""
        return sum(
            1
            for slot in (*self._node_slots.values(), *self._bootstrap_slots.values())
            if slot.open_connection() is not None
        )

    def connection_states(self) -> list[ConnectionHealth]:
        """Every known address and its state: connected, connecting, backoff (the last
        attempt failed) or disconnected."""
        out = []
        now = monotonic()
        slots = [*self._node_slots.values(), *self._bootstrap_slots.values()]
        for slot in slots:
            conn = slot.open_connection()
            if conn is not None:
                state = "connected"
            elif slot.attempt is not None:
                state = "connecting"
            elif slot.error is not None and slot.next_attempt > now:
                state = "backoff"
            else:
                state = "disconnected"
            out.append(
                ConnectionHealth(
                    "bootstrap" if slot.node_id is None else str(slot.node_id),
                    slot.host,
                    slot.port,
                    state,
                    0 if conn is None else conn.in_flight,
                    None if slot.error is None else str(slot.error),
                    0 if conn is None else conn.session.reauthentications,
                )
            )
        return out

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError(
                "the client is closed (its connection manager too); create a new one"
            )

    async def close(self) -> None:
        """Close every connection (in-flight requests fail with KafkaConnectionError)."""
        self._closed = True
        conns = [
            slot.conn
            for slot in (*self._node_slots.values(), *self._bootstrap_slots.values())
            if slot.conn is not None
        ]
        conns += self._retired
        self._retired = []
        if self._metrics is not None:
            for conn in conns:
                if not conn.closed:
                    self._record_close()
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for conn in conns:
                    tg.start_soon(conn.close)

    async def __aenter__(self) -> ConnectionManager:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        open_nodes = sorted(
            s.node_id
            for s in self._node_slots.values()
            if s.open_connection() and s.node_id is not None
        )
        servers = ",".join(
            describe_node(h, p, None).removeprefix("broker ") for h, p in self.bootstrap_servers
        )
        return (
            f"<ConnectionManager bootstrap={servers} nodes={sorted(self._nodes)} open={open_nodes}>"
        )


def _clone(error: BaseException) -> BaseException:
    """A copy of a shared attempt's error, so each waiting task raises its own object."""
    try:
        clone = copy.copy(error)
    except Exception:
        return KafkaConnectionError(str(error))
    clone.__cause__ = error.__cause__
    clone.__traceback__ = None
    return clone
