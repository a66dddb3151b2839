"""NetworkDriver and ``UnsentRequest.any_connection``: such a request goes on another idle
connection to its node's broker (ConnectionManager.idle_peer) when the node's own has
requests in flight, and back on the node's own if it fails there. Fake connections in the
connection manager's slots, no sockets; async tests because the driver and the manager
read the event loop's clock."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from kafkaio.clock import monotonic
from kafkaio.consumer.group import coordinator_connection_id
from kafkaio.errors import KafkaConnectionError
from kafkaio.metadata.manager import MetadataManager
from kafkaio.net.config import ConnectionConfig
from kafkaio.net.manager import ConnectionManager
from kafkaio.protocol import messages as m
from kafkaio.runtime.completion import Completion
from kafkaio.runtime.driver import NetworkDriver
from kafkaio.runtime.requests import UnsentRequest

HOST, PORT = "127.0.0.1", 9092
NODE = 1
COORDINATOR = coordinator_connection_id(NODE)


class FakeConnection:
    """Takes requests (`submit`) and keeps their Completions for the test to settle."""

    def __init__(self, name: str, *, in_flight: int = 0) -> None:
        self.name = name
        self.closed = False
        self.in_flight = in_flight
        self.queued = 0
        self.needs_writer = False
        self.last_used = monotonic()
        self.sent: list[tuple[Any, Completion[Any]]] = []

    def version_for(self, request_cls: type[Any]) -> int:
        return 12

    def submit(self, request: Any, version: int, timeout: float | None) -> Completion[Any]:
        done: Completion[Any] = Completion()
        self.sent.append((request, done))
        return done

    def __str__(self) -> str:
        return self.name


class Rig:
    """A driver whose connection manager holds NODE's own connection (a fetch in flight)
    and, at the same address, the group coordinator's (idle); outcomes are handled when
    the test calls `settle` (the driver's non-asyncio path, no event loop callbacks)."""

    def __init__(self) -> None:
        self.connections = ConnectionManager(f"{HOST}:{PORT}", ConnectionConfig())
        self.connections.update_nodes({NODE: (HOST, PORT), COORDINATOR: (HOST, PORT)})
        self.own = self._put(NODE, FakeConnection("own", in_flight=1))
        self.coordinator = self._put(COORDINATOR, FakeConnection("coordinator"))
        self.driver = NetworkDriver(self.connections, MetadataManager())
        self.driver._asyncio = False
        self.outcomes: list[tuple[Any, BaseException | None]] = []

    def _put(self, node: int, conn: FakeConnection) -> FakeConnection:
        self.connections._slot_for(node).conn = conn  # type: ignore[assignment]
        return conn

    def send(self, *, any_connection: bool = True) -> None:
        def handler(now: float, response: Any, error: BaseException | None) -> None:
            self.outcomes.append((response, error))

        request = m.FetchRequest(session_id=7, session_epoch=-1)
        self.driver._dispatch(UnsentRequest(NODE, request, handler, any_connection=any_connection))

    def settle(self) -> None:
        self.driver._handle_done()


async def test_sent_on_the_idle_connection_while_the_nodes_own_is_busy(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="kafkaio.runtime")
    rig = Rig()
    rig.send()
    assert rig.own.sent == [] and len(rig.coordinator.sent) == 1
    request, done = rig.coordinator.sent[0]
    assert request.session_epoch == -1
    response = m.FetchResponse(session_id=0)
    done.complete(response)
    rig.settle()
    assert rig.outcomes == [(response, None)]
    assert "node 1: FetchRequest sent on coordinator, not behind 1 request(s) in flight on own" in (
        caplog.text
    )


async def test_the_nodes_own_connection_when_it_is_idle_or_no_other_is() -> None:
    rig = Rig()
    rig.own.in_flight = 0
    rig.send()
    assert len(rig.own.sent) == 1 and rig.coordinator.sent == []
    rig = Rig()
    rig.coordinator.in_flight = 1  # a heartbeat, say
    rig.send()
    assert len(rig.own.sent) == 1 and rig.coordinator.sent == []


async def test_other_requests_stay_on_their_nodes_connection() -> None:
    rig = Rig()
    rig.send(any_connection=False)
    assert len(rig.own.sent) == 1 and rig.coordinator.sent == []


async def test_failed_on_the_other_connection_it_goes_on_the_nodes_own() -> None:
    rig = Rig()
    rig.send()
    rig.coordinator.sent[0][1].fail(KafkaConnectionError("coordinator connection lost"))
    rig.coordinator.closed = True
    rig.settle()
    assert rig.outcomes == []  # not failed: sent again, behind the fetch in flight
    [(request, done)] = rig.own.sent
    assert request.session_epoch == -1
    response = m.FetchResponse(session_id=0)
    done.complete(response)
    rig.settle()
    assert rig.outcomes == [(response, None)]


async def test_failed_there_with_the_nodes_own_gone_too_its_handler_gets_the_error() -> None:
    rig = Rig()
    rig.send()
    rig.own.closed = True  # no connection is opened to send it again
    error = KafkaConnectionError("coordinator connection lost")
    rig.coordinator.sent[0][1].fail(error)
    rig.settle()
    assert rig.outcomes == [(None, error)]
    assert rig.own.sent == [] and rig.driver._waiting == {}
