"""ConnectionManager.idle_peer: which other open connection to a node's broker may take a
request that should not wait behind the node's own (the fetch session's final request on
close). Fake connections in the manager's slots, no sockets; async tests because the
manager reads the event loop's clock."""

from __future__ import annotations

from typing import Any

from kafkaio.clock import monotonic
from kafkaio.consumer.group import coordinator_connection_id
from kafkaio.net.config import ConnectionConfig
from kafkaio.net.manager import ConnectionManager

HOST, PORT = "127.0.0.1", 9092
NODE = 1
COORDINATOR = coordinator_connection_id(NODE)


class FakeConnection:
    """What idle_peer reads of a connection."""

    def __init__(
        self, name: str, *, in_flight: int = 0, queued: int = 0, needs_writer: bool = False
    ) -> None:
        self.name = name
        self.closed = False
        self.in_flight = in_flight
        self.queued = queued
        self.needs_writer = needs_writer
        self.last_used = monotonic()

    def __str__(self) -> str:
        return self.name


def _manager(
    bootstrap: str = f"{HOST}:{PORT}", others: dict[int, tuple[str, int]] | None = None
) -> ConnectionManager:
    """NODE and its coordinator connection's id at HOST:PORT, and `others`."""
    manager = ConnectionManager(bootstrap, ConnectionConfig())
    manager.update_nodes({NODE: (HOST, PORT), COORDINATOR: (HOST, PORT), **(others or {})})
    return manager


def _put(manager: ConnectionManager, node: int | tuple[str, int], conn: Any) -> Any:
    if isinstance(node, int):
        manager._slot_for(node).conn = conn
    else:
        manager._bootstrap_slots[node].conn = conn
    return conn


async def test_the_coordinators_idle_connection_to_the_same_broker() -> None:
    manager = _manager()
    _put(manager, NODE, FakeConnection("own", in_flight=1))
    coordinator = _put(manager, COORDINATOR, FakeConnection("coordinator"))
    assert manager.idle_peer(NODE) is coordinator


async def test_an_idle_bootstrap_connection_at_the_same_address() -> None:
    manager = _manager()
    _put(manager, NODE, FakeConnection("own", in_flight=1))
    bootstrap = _put(manager, (HOST, PORT), FakeConnection("bootstrap"))
    assert manager.idle_peer(NODE) is bootstrap


async def test_nothing_when_only_the_nodes_own_connection_is_open() -> None:
    manager = _manager()
    _put(manager, NODE, FakeConnection("own", in_flight=1))
    assert manager.idle_peer(NODE) is None
    assert manager.idle_peer(99) is None  # a node without a slot


async def test_a_connection_with_requests_in_flight_or_queued_is_not_taken() -> None:
    for busy in (FakeConnection("c", in_flight=1), FakeConnection("c", queued=1)):
        manager = _manager()
        _put(manager, NODE, FakeConnection("own", in_flight=1))
        _put(manager, COORDINATOR, busy)
        assert manager.idle_peer(NODE) is None
        bootstrap = _put(manager, (HOST, PORT), FakeConnection("bootstrap"))
        assert manager.idle_peer(NODE) is bootstrap  # the next one that is idle


async def test_closed_unserved_or_expired_connections_are_not_taken() -> None:
    closed = FakeConnection("closed")
    closed.closed = True
    unserved = FakeConnection("unserved", needs_writer=True)  # a TLS stream without its writer
    expired = FakeConnection("expired")  # idle past connections_max_idle_ms: to be closed
    expired.last_used = monotonic() - ConnectionConfig().connections_max_idle_ms / 1000 - 1
    for conn in (closed, unserved, expired):
        manager = _manager()
        _put(manager, NODE, FakeConnection("own", in_flight=1))
        _put(manager, COORDINATOR, conn)
        assert manager.idle_peer(NODE) is None, conn


async def test_connections_to_other_addresses_are_not_taken() -> None:
    manager = _manager(f"{HOST}:9093", {2: (HOST, 9094), 3: ("other", PORT)})
    _put(manager, NODE, FakeConnection("own", in_flight=1))
    _put(manager, (HOST, 9093), FakeConnection("bootstrap elsewhere"))
    _put(manager, 2, FakeConnection("node 2"))
    _put(manager, 3, FakeConnection("node 3"))
    assert manager.idle_peer(NODE) is None


async def test_nothing_while_a_retired_connection_waits_to_be_closed() -> None:
    manager = _manager()
    _put(manager, NODE, FakeConnection("own", in_flight=1))
    _put(manager, COORDINATOR, FakeConnection("coordinator"))
    manager._retired.append(FakeConnection("retired"))  # type: ignore[arg-type]
    assert manager.idle_peer(NODE) is None  # as ready(): cleaned up by get() first
