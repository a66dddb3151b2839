"""NetworkDriver against a fake broker: every request goes to its connection one way
(`Connection.submit`, from the network task or a handler); a task only opens a
connection. On asyncio handlers run from event-loop callbacks, on trio in the network
task's loop."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from kafkaio.asynclib import running_asyncio
from kafkaio.errors import KafkaConnectionError, KafkaTimeoutError
from kafkaio.metadata.manager import MetadataManager
from kafkaio.net.config import ConnectionConfig
from kafkaio.net.manager import ConnectionManager
from kafkaio.protocol import messages as m
from kafkaio.runtime.driver import NetworkDriver
from kafkaio.runtime.requests import PollResult, UnsentRequest
from tests.unit.net._fake_broker import (
    GUARD,
    FakeBroker,
    FakeClient,
    encode_response,
    metadata_request,
)

CONFIG = ConnectionConfig(request_timeout_ms=5000, connect_timeout_ms=5000)
NODE = 1


@dataclass
class Outcome:
    topic: str
    names: list[str] | None  # topics in the response, None on an error
    error: BaseException | None
    in_task: bool  # the handler ran inside a task, not an event-loop callback


@dataclass
class Sequential:
    """A manager sending `count` Metadata requests to NODE, one at a time, each once the
    previous one's handler ran (a follow-up of the response, like a fetch loop)."""

    count: int
    timeout_ms: float | None = None
    outcomes: list[Outcome] = field(default_factory=list)
    in_flight: bool = False
    fail_in_handler: bool = False

    def poll(self, now: float) -> PollResult:
        if self.in_flight or len(self.outcomes) >= self.count:
            return PollResult([], math.inf)
        self.in_flight = True
        topic = f"t{len(self.outcomes)}"
        request = metadata_request(topic)

        def handler(now: float, response: Any, error: BaseException | None) -> None:
            self.in_flight = False
            self.outcomes.append(_outcome(topic, response, error))
            if self.fail_in_handler:
                raise RuntimeError("handler bug")

        return PollResult([UnsentRequest(NODE, request, handler, self.timeout_ms)], math.inf)


def run(backend: str, scenario: Callable[[], Awaitable[None]]) -> None:
    """Run `scenario` under a hang guard; asyncio through plain ``asyncio.run`` as most
    applications do (``anyio.run`` would mark the whole run as anyio's for sniffio, which
    hides code that needs a task to find its backend)."""

    async def guarded() -> None:
        with anyio.fail_after(GUARD):
            await scenario()

    if backend == "asyncio":
        asyncio.run(guarded())
    else:
        anyio.run(guarded, backend=backend)


def _outcome(topic: str, response: Any, error: BaseException | None) -> Outcome:
    """What a handler saw for the Metadata request about `topic`, and where it ran."""
    names = None if response is None else [t.name for t in response.topics]
    return Outcome(topic, names, error, _in_task())


def _in_task() -> bool:
    if not running_asyncio():
        return True  # trio runs everything in tasks
    return asyncio.current_task() is not None


def _metadata_for(port: int, names: list[str]) -> Any:
    """Nodes 1-5, all at the fake broker's port (one connection per node id)."""
    return m.MetadataResponse(
        cluster_id="fake",
        controller_id=NODE,
        brokers=[
            m.MetadataResponse.MetadataResponseBroker(node_id=n, host="127.0.0.1", port=port)
            for n in range(1, 6)
        ],
        topics=[m.MetadataResponse.MetadataResponseTopic(name=t) for t in names],
    )


def _serving(
    port: list[int],
    *,
    silent: str | None = None,
    drop: str | None = None,
    seen: list[str] | None = None,
) -> Any:
    """A broker handler answering Metadata with the topics asked for and NODE at the fake
    broker's own port; it never answers a request for topic `silent`, closes the
    connection when asked for topic `drop` (once), and notes the topics asked for in `seen`
    in the order the requests arrive."""
    dropped = False

    async def handler(client: FakeClient) -> None:
        nonlocal dropped
        await client.answer_api_versions()
        while True:
            received = await client.read_request()
            names = [t.name for t in received.request.topics or []]
            if seen is not None:
                seen.extend(names)
            if drop in names and not dropped:
                dropped = True
                await client.stream.aclose()
                return
            if silent not in names:
                await client.respond(received, _metadata_for(port[0], names))

    return handler


async def _until(condition: Any) -> None:
    with anyio.fail_after(5):
        while not condition():
            await anyio.sleep(0.005)


@contextlib.asynccontextmanager
async def _driving(
    manager: Any,
    handler: Callable[[list[int]], Any] = _serving,
    *,
    nodes: Iterable[int] = (NODE,),
    config: ConnectionConfig = CONFIG,
    prepare: Callable[[ConnectionManager], None] | None = None,
) -> AsyncIterator[NetworkDriver]:
    """A running NetworkDriver with `manager`, against a fake broker standing for every node
    in `nodes` (``handler(port)`` makes its connection handler; `prepare` sees the
    ConnectionManager before the driver starts). Stopped and disconnected on exit."""
    port: list[int] = [0]
    async with FakeBroker(handler(port)) as broker:
        port[0] = broker.port
        connections = ConnectionManager(broker.bootstrap, config)
        connections.update_nodes({n: (broker.host, broker.port) for n in nodes})
        if prepare is not None:
            prepare(connections)
        driver = NetworkDriver(connections, MetadataManager(), [manager])
        async with anyio.create_task_group() as tg:
            await tg.start(driver.run)
            try:
                yield driver
            finally:
                driver.stop()
        await connections.close()


def _run_with(
    backend: str, manager: Sequential | Window, config: ConnectionConfig = CONFIG, **serving: Any
) -> NetworkDriver:
    result: list[NetworkDriver] = []

    async def scenario() -> None:
        handler = functools.partial(_serving, **serving)
        async with _driving(manager, handler, config=config) as driver:
            result.append(driver)
            await _until(lambda: len(manager.outcomes) >= manager.count or driver.fatal_error)

    run(backend, scenario)
    return result[0]


def test_follow_ups_are_written_at_once_and_handled_from_callbacks(backend: str) -> None:
    manager = Sequential(count=20)
    _run_with(backend, manager)
    assert [o.topic for o in manager.outcomes] == [f"t{i}" for i in range(20)]
    assert all(o.error is None and o.names == [o.topic] for o in manager.outcomes)
    # the first request waits while a task opens the connection; every handler runs from a
    # loop callback on asyncio (in the network task on trio)
    assert [o.in_task for o in manager.outcomes] == [backend != "asyncio"] * 20


def test_timeout_on_the_fast_path_reaches_the_handler(backend: str) -> None:
    # t0 (connects) and t1 (at once) are answered, t2 never: it times out
    manager = Sequential(count=3, timeout_ms=200)
    _run_with(backend, manager, silent="t2")
    first, second, third = manager.outcomes
    assert first.error is None and second.error is None
    assert isinstance(third.error, KafkaTimeoutError)
    assert "no response within 0.2 s" in str(third.error)
    assert third.names is None


def test_lost_connection_fails_the_request_and_the_next_one_reconnects(backend: str) -> None:
    # the broker drops the connection when asked for t2; the manager sends t3, which
    # waits for a new connection and gets its answer
    manager = Sequential(count=4)
    _run_with(backend, manager, drop="t2")
    outcomes = manager.outcomes
    assert [o.error is None for o in outcomes] == [True, True, False, True]
    assert isinstance(outcomes[2].error, KafkaConnectionError)
    assert outcomes[3].names == ["t3"]


def test_handler_error_on_the_fast_path_stops_the_driver(backend: str) -> None:
    manager = Sequential(count=2, fail_in_handler=True)
    driver = _run_with(backend, manager)
    assert isinstance(driver.fatal_error, RuntimeError)
    assert len(manager.outcomes) == 1  # nothing was sent after the failing handler


def test_response_after_stop_is_dropped() -> None:
    # the second request is in flight on the fast path when the driver stops; its
    # response arrives afterwards and must not reach the handler
    manager = Sequential(count=3)

    async def scenario() -> None:
        release = anyio.Event()

        def holding_t1(port: list[int]) -> Any:
            async def handler(client: FakeClient) -> None:
                await client.answer_api_versions()
                while True:
                    received = await client.read_request()
                    names = [t.name for t in received.request.topics or []]
                    if names == ["t1"]:
                        await release.wait()
                    await client.respond(received, _metadata_for(port[0], names))

            return handler

        async with _driving(manager, holding_t1) as driver:
            await _until(lambda: len(manager.outcomes) == 1 and manager.in_flight)
            driver.stop()
            await _until(lambda: not driver.running)
            release.set()
            await anyio.sleep(0.1)  # the response arrives and is read

    run("asyncio", scenario)
    assert [o.topic for o in manager.outcomes] == ["t0"]


@pytest.mark.parametrize("wire", ["asyncio-wire", "streams"])
def test_either_io_adapter_takes_the_one_hand_off(
    wire: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # anyio streams (TLS, trio) get a writer task (the task that opened the connection);
    # the driver hands requests over the same way, and handlers run from loop callbacks
    import kafkaio.net.connection as connection

    monkeypatch.setattr(connection, "USE_ASYNCIO_WIRE", wire == "asyncio-wire")
    manager = Window(count=40, window=8)
    received: list[str] = []
    limited = ConnectionConfig(
        request_timeout_ms=5000, connect_timeout_ms=5000, max_in_flight_requests_per_connection=3
    )
    _run_with("asyncio", manager, limited, seen=received)
    assert all(o.error is None for o in manager.outcomes)
    assert not any(o.in_task for o in manager.outcomes)
    assert received == [f"t{i}" for i in range(40)]


@dataclass
class Stages:
    """A manager sending its stages in turn: each stage's requests (topic, node) together,
    once every response of the previous stage arrived."""

    stages: list[list[tuple[str, int]]]
    outcomes: list[Outcome] = field(default_factory=list)
    waiting: int = 0
    next_stage: int = 0

    def poll(self, now: float) -> PollResult:
        if self.waiting or self.next_stage >= len(self.stages):
            return PollResult([], math.inf)
        stage = self.stages[self.next_stage]
        self.next_stage += 1
        self.waiting = len(stage)
        return PollResult([self._request(topic, node) for topic, node in stage], math.inf)

    def _request(self, topic: str, node: int) -> UnsentRequest:
        def handler(now: float, response: Any, error: BaseException | None) -> None:
            self.waiting -= 1
            self.outcomes.append(_outcome(topic, response, error))

        return UnsentRequest(node, metadata_request(topic), handler)


def test_follow_ups_needing_new_connections_from_a_callback(backend: str) -> None:
    # t1's response is handled in a loop callback (node 1 is connected by then); its
    # follow-ups go to nodes 2-5, not connected yet: they wait while the driver's loop
    # starts a task per node to open them (a callback cannot start a task)
    follow_ups = [(f"t{n}", n) for n in range(2, 6)]
    manager = Stages([[("t0", 1)], [("t1", 1)], follow_ups, [("t6", 5)]])

    async def scenario() -> None:
        async with _driving(manager, nodes=range(1, 6)) as driver:
            await _until(lambda: len(manager.outcomes) == 7 or driver.fatal_error)
        assert driver.fatal_error is None

    run(backend, scenario)
    by_topic = {o.topic: o for o in manager.outcomes}
    assert sorted(by_topic) == [f"t{i}" for i in range(7)]
    assert all(o.error is None and o.names == [o.topic] for o in manager.outcomes)
    if backend == "asyncio":
        assert not by_topic["t1"].in_task and not by_topic["t6"].in_task


@dataclass
class OnRead:
    """A manager sending t0 (it opens the connection), then, once t0 is handled, "plain"
    and "urgent" at once; "urgent" asks to be handled as soon as it is read."""

    made: int = 0
    handled: list[Outcome] = field(default_factory=list)

    def poll(self, now: float) -> PollResult:
        if self.made == 0:
            self.made = 1
            return PollResult([self._request("t0", False)], math.inf)
        if self.made == 1 and self.handled:
            self.made = 3
            return PollResult([self._request("plain", False), self._request("urgent", True)], 0)
        return PollResult([], math.inf)

    def _request(self, topic: str, on_read: bool) -> UnsentRequest:
        def handler(now: float, response: Any, error: BaseException | None) -> None:
            self.handled.append(_outcome(topic, response, error))

        return UnsentRequest(NODE, metadata_request(topic), handler, handle_on_read=on_read)


def test_a_response_handled_on_read_goes_ahead_of_the_loop_callbacks() -> None:
    # "plain" and "urgent" are answered in one write: "plain"'s handler waits for its turn in
    # the event loop, "urgent"'s runs from the read itself, first
    manager = OnRead()

    def in_one_write(port: list[int]) -> Any:
        async def handler(client: FakeClient) -> None:
            await client.answer_api_versions()
            held: list[bytes] = []
            while True:
                received = await client.read_request()
                names = [t.name for t in received.request.topics or []]
                answer = encode_response(
                    received.correlation_id,
                    received.api_key,
                    received.version,
                    _metadata_for(port[0], names),
                )
                if names == ["plain"]:
                    held.append(answer)  # answered with the next one, in the same write
                    continue
                await client.send_raw(b"".join([*held, answer]))
                held.clear()

        return handler

    async def scenario() -> None:
        async with _driving(manager, in_one_write) as driver:
            await _until(lambda: len(manager.handled) == 3 or driver.fatal_error)
        assert driver.fatal_error is None

    run("asyncio", scenario)
    assert [o.topic for o in manager.handled] == ["t0", "urgent", "plain"]
    assert all(o.error is None and o.names == [o.topic] for o in manager.handled)


@dataclass
class Window:
    """A manager keeping up to `window` requests to NODE in flight (more than the
    connection's in-flight permits), `count` in all, numbered in the order it makes them:
    like a producer with several batches of a partition in flight."""

    count: int
    window: int
    made: int = 0
    in_flight: int = 0
    outcomes: list[Outcome] = field(default_factory=list)

    def poll(self, now: float) -> PollResult:
        requests = []
        while self.made < self.count and self.in_flight < self.window:
            requests.append(self._request(f"t{self.made}"))
            self.made += 1
            self.in_flight += 1
        return PollResult(requests, math.inf)

    def _request(self, topic: str) -> UnsentRequest:
        def handler(now: float, response: Any, error: BaseException | None) -> None:
            self.in_flight -= 1
            self.outcomes.append(_outcome(topic, response, error))

        return UnsentRequest(NODE, metadata_request(topic), handler)


def test_requests_reach_the_broker_in_the_order_they_were_made(backend: str) -> None:
    # The first requests wait for the connection, then in the connection's queue for
    # permits, which responses free while later ones are made: a later request must never
    # overtake an earlier one, whether it is written at once or from the queue.
    manager = Window(count=60, window=8)
    received: list[str] = []
    limited = ConnectionConfig(
        request_timeout_ms=5000, connect_timeout_ms=5000, max_in_flight_requests_per_connection=3
    )
    driver = _run_with(backend, manager, limited, seen=received)
    assert driver.fatal_error is None
    assert len(manager.outcomes) == manager.count
    assert all(o.error is None for o in manager.outcomes)
    assert received == [f"t{i}" for i in range(manager.count)]


def test_a_request_failing_to_connect_lets_the_next_ones_in_its_line_go(backend: str) -> None:
    # Every request to an unreachable node waits for the connection; all fail with the
    # reason it could not be opened (none waits forever), and nothing is left waiting.
    manager = Window(count=6, window=6)
    drivers: list[NetworkDriver] = []

    async def scenario() -> None:
        with socket.socket() as probe:  # a port nobody listens on
            probe.bind(("127.0.0.1", 0))
            closed_port = probe.getsockname()[1]
        fast = ConnectionConfig(
            request_timeout_ms=2000,
            connect_timeout_ms=2000,
            reconnect_backoff_ms=1,
            reconnect_backoff_max_ms=1,
        )
        connections = ConnectionManager(f"127.0.0.1:{closed_port}", fast)
        connections.update_nodes({NODE: ("127.0.0.1", closed_port)})
        driver = NetworkDriver(connections, MetadataManager(), [manager])
        drivers.append(driver)
        async with anyio.create_task_group() as tg:
            await tg.start(driver.run)
            await _until(lambda: len(manager.outcomes) == manager.count or driver.fatal_error)
            # (the metadata manager's requests to any node may be waiting: it retries)
            assert NODE not in driver._waiting and NODE not in driver._connecting
            driver.stop()
        await connections.close()
        assert driver.fatal_error is None

    run(backend, scenario)
    assert [o.topic for o in manager.outcomes] == [f"t{i}" for i in range(6)]
    assert all(isinstance(o.error, KafkaConnectionError) for o in manager.outcomes)


@dataclass
class TwoSteps:
    """A manager sending t0 to NODE at once, and t1 once the test sets `second`."""

    second: bool = False
    made: list[str] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)

    def poll(self, now: float) -> PollResult:
        if not self.made:
            topic = "t0"
        elif self.second and len(self.made) == 1:
            topic = "t1"
        else:
            return PollResult([], math.inf)
        self.made.append(topic)

        def handler(now: float, response: Any, error: BaseException | None) -> None:
            self.outcomes.append(_outcome(topic, response, error))

        return PollResult([UnsentRequest(NODE, metadata_request(topic), handler)], math.inf)


def test_a_request_made_once_the_connection_is_open_waits_for_the_one_that_opened_it(
    backend: str,
) -> None:
    # t0 waits while a task opens the connection; the connection is ready before that task
    # runs again (held here), and t1 is made in that window: it could be written at once
    # on the open connection, but must not overtake t0
    manager = TwoSteps()
    seen: list[str] = []

    async def scenario() -> None:
        opened, release = anyio.Event(), anyio.Event()
        connections: list[ConnectionManager] = []

        def hold_the_opener(conns: ConnectionManager) -> None:
            connections.append(conns)
            real_get = conns.get

            async def held_get(node_id: int) -> Any:
                conn = await real_get(node_id)
                opened.set()
                await release.wait()  # the opener's task has not run on yet
                return conn

            conns.get = held_get  # type: ignore[method-assign]

        serving = functools.partial(_serving, seen=seen)
        async with _driving(manager, serving, prepare=hold_the_opener) as driver:
            await opened.wait()
            if backend == "asyncio":  # the window is real: t1 could be written now
                assert connections[0].ready(NODE) is not None
            manager.second = True
            driver.wakeup()
            # the driver polls and dispatches t1 in one step (written at once, or queued
            # behind t0): once it is made, its place on the wire is settled
            await _until(lambda: len(manager.made) == 2)
            release.set()
            await _until(lambda: len(manager.outcomes) == 2 or driver.fatal_error)
        assert driver.fatal_error is None

    run(backend, scenario)
    assert seen == ["t0", "t1"]
    assert all(o.error is None for o in manager.outcomes)


def test_callbacks_work_where_sniffio_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """anyio >= 4.16 does not depend on sniffio: without it, anyio and kafkaio both take a
    running asyncio loop for asyncio, and handlers run from loop callbacks still use anyio."""
    import anyio._core._eventloop as anyio_eventloop

    import kafkaio.asynclib

    monkeypatch.setattr(anyio_eventloop, "sniffio", None)
    monkeypatch.setattr(kafkaio.asynclib, "sniffio", None)
    manager = Sequential(count=20)
    _run_with("asyncio", manager)
    assert [o.topic for o in manager.outcomes] == [f"t{i}" for i in range(20)]
    assert all(o.error is None for o in manager.outcomes)
    assert not any(o.in_task for o in manager.outcomes[1:])  # the callback path was taken
    assert not kafkaio.asynclib.running_asyncio()  # no loop runs here


def test_the_network_task_logs_what_runs_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    from kafkaio.about import record_codec

    with caplog.at_level(logging.DEBUG, logger="kafkaio.runtime"):
        _run_with("asyncio", Sequential(count=1))
    starts = [r.getMessage() for r in caplog.records if "network task starting" in r.getMessage()]
    assert len(starts) == 1
    assert starts[0].startswith("network task starting on asyncio: kafkaio ")
    assert f"record codec {record_codec()}" in starts[0]


@dataclass
class AnyNodeThenAcks0:
    """A manager sending t0 to any node, then, once it is answered, a Produce with acks=0
    (no response) and t1 to NODE together."""

    made: int = 0
    outcomes: list[Outcome] = field(default_factory=list)

    def poll(self, now: float) -> PollResult:
        if self.made == 0:
            self.made = 1
            return PollResult([self._metadata("t0", None)], math.inf)
        if self.made == 1 and self.outcomes:
            self.made = 2

            def on_written(now: float, response: Any, error: BaseException | None) -> None:
                self.outcomes.append(Outcome("acks0", None, error, _in_task()))
                assert response is None

            acks0 = m.ProduceRequest(acks=0, timeout_ms=1000, topic_data=[])
            produce = UnsentRequest(NODE, acks0, on_written, expect_response=False)
            return PollResult([produce, self._metadata("t1", NODE)], math.inf)
        return PollResult([], math.inf)

    def _metadata(self, topic: str, node: int | None) -> UnsentRequest:
        def handler(now: float, response: Any, error: BaseException | None) -> None:
            self.outcomes.append(_outcome(topic, response, error))

        return UnsentRequest(node, metadata_request(topic), handler)


def test_any_node_and_acks0_requests_take_the_same_hand_off(backend: str) -> None:
    manager = AnyNodeThenAcks0()
    seen: list[str] = []

    def serving(port: list[int]) -> Any:
        async def handler(client: FakeClient) -> None:
            await client.answer_api_versions()
            while True:
                received = await client.read_request()
                if received.api_key == m.ProduceRequest.API_KEY:
                    seen.append("acks0")  # not answered
                    continue
                names = [t.name for t in received.request.topics or []]
                seen.extend(names)
                await client.respond(received, _metadata_for(port[0], names))

        return handler

    async def scenario() -> None:
        async with _driving(manager, serving) as driver:
            await _until(lambda: len(manager.outcomes) == 3 or driver.fatal_error)
        assert driver.fatal_error is None

    run(backend, scenario)
    assert seen == ["t0", "acks0", "t1"]
    assert [o.topic for o in manager.outcomes] == ["t0", "acks0", "t1"]
    assert all(o.error is None for o in manager.outcomes)
    assert [o.in_task for o in manager.outcomes] == [backend != "asyncio"] * 3
