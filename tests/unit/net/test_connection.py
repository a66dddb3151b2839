"""Connection against a fake broker: handshake, pipelining, SASL, and a misbehaving peer.

Every scenario runs under ``anyio.fail_after`` so a hang fails the test instead of blocking,
once per installed anyio backend (asyncio, trio).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import logging
import threading
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from kafkaio.errors import (
    KafkaConnectionError,
    KafkaProtocolError,
    KafkaTimeoutError,
    SaslAuthenticationFailedError,
    UnknownServerError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
)
from kafkaio.net.config import ConnectionConfig
from kafkaio.net.connection import Connection
from kafkaio.protocol import messages as m

from ._fake_broker import (
    DEFAULT_APIS,
    FakeBroker,
    FakeClient,
    api_versions_response,
    echo_metadata,
    encode_response,
    free_port,
    metadata_request,
    metadata_response,
    run,
    topics,
)

CONFIG = ConnectionConfig(request_timeout_ms=5000, connect_timeout_ms=5000)


# -- handshake and versions -----------------------------------------------------------------


def test_connect_and_round_trip(backend: str) -> None:
    seen: list[Any] = []

    async def handler(client: FakeClient) -> None:
        seen.append(await client.answer_api_versions())
        await echo_metadata(client)

    async def scenario() -> None:
        async with FakeBroker(handler) as broker:
            conn = await Connection.connect(broker.host, broker.port, CONFIG, node_id=3)
            assert conn.api_versions == DEFAULT_APIS
            assert conn.version_for(m.MetadataRequest) == 12
            assert (conn.node_id, conn.host, conn.port) == (3, "127.0.0.1", broker.port)
            response = await conn.send(metadata_request("orders"))
            assert topics(response) == ["orders"] and response.cluster_id == "fake"
            assert conn.in_flight == 0 and not conn.closed
            await conn.close()
            assert conn.closed
            with pytest.raises(KafkaConnectionError, match="is closed"):
                await conn.send(metadata_request("x"))
        (api_versions,) = seen
        assert api_versions.version == m.ApiVersionsRequest.MAX_STABLE_VERSION
        assert api_versions.client_id == "kafkaio"
        assert api_versions.request.client_software_name == "kafkaio"

    run(backend, scenario)


def test_version_for_without_common_version(backend: str) -> None:
    async def handler(client: FakeClient) -> None:
        await client.answer_api_versions({18: (0, 4), 3: (20, 25)})
        await client.wait_closed()

    async def scenario() -> None:
        async with FakeBroker(handler) as broker:
            conn = await Connection.connect(broker.host, broker.port, CONFIG, node_id=1)
            with pytest.raises(UnsupportedVersionError, match=r"Metadata .*v20-25.*v0-12"):
                conn.version_for(m.MetadataRequest)
            with pytest.raises(UnsupportedVersionError, match="does not support Produce"):
                await conn.send(m.ProduceRequest(acks=1, timeout_ms=1000, topic_data=[]))
            assert not conn.supports(m.MetadataRequest)
            assert conn.supports(m.ApiVersionsRequest)
            await conn.close()

    run(backend, scenario)


def test_api_versions_fallback_to_broker_max(backend: str) -> None:
    versions: list[int] = []

    async def handler(client: FakeClient) -> None:
        first = await client.read_request()
        versions.append(first.version)
        old_broker = {18: (0, 2), 3: (0, 9)}
        # An old broker answers a too-new ApiVersions in v0 with UNSUPPORTED_VERSION (35)
        await client.respond(first, api_versions_response(old_broker, error_code=35), version=0)
        second = await client.read_request()
        versions.append(second.version)
        await client.respond(second, api_versions_response(old_broker))
        await echo_metadata(client)

    async def scenario() -> None:
        async with FakeBroker(handler) as broker:
            conn = await Connection.connect(broker.host, broker.port, CONFIG)
            assert conn.api_versions == {18: (0, 2), 3: (0, 9)}
            assert conn.version_for(m.MetadataRequest) == 9
            assert topics(await conn.send(metadata_request("t"))) == ["t"]
            await conn.close()
        assert versions == [m.ApiVersionsRequest.MAX_STABLE_VERSION, 2]

    run(backend, scenario)


def test_api_versions_fallback_when_error_body_is_undecodable(backend: str) -> None:
    """librdkafka's mock answers a too-new ApiVersions with a body in no real version."""
    versions: list[int] = []

    async def handler(client: FakeClient) -> None:
        first = await client.read_request()
        versions.append(first.version)
        # error 35, a 1-byte "count" of 1, one entry without tags, throttle, no tagged fields
        body = b"\x00\x23\x01\x00\x12\x00\x00\x00\x02\x00\x00\x00\x00"
        frame = first.correlation_id.to_bytes(4, "big") + body
        await client.send_raw(len(frame).to_bytes(4, "big") + frame)
        second = await client.read_request()
        versions.append(second.version)
        await client.respond(second, api_versions_response({18: (0, 2), 3: (0, 12)}))
        await echo_metadata(client)

    async def scenario() -> None:
        async with FakeBroker(handler) as broker:
            conn = await Connection.connect(broker.host, broker.port, CONFIG)
            assert conn.api_versions == {18: (0, 2), 3: (0, 12)}
            assert topics(await conn.send(metadata_request("t"))) == ["t"]
            await conn.close()
        assert versions == [m.ApiVersionsRequest.MAX_STABLE_VERSION, 0]

    run(backend, scenario)


def test_api_versions_error_is_raised(backend: str) -> None:
    async def handler(client: FakeClient) -> None:
        received = await client.read_request()
        await client.respond(received, api_versions_response({}, error_code=-1))
        await client.wait_closed()

    async def scenario() -> None:
        async with FakeBroker(handler) as broker:
            with pytest.raises(UnknownServerError, match="ApiVersions failed"):
                await Connection.connect(broker.host, broker.port, CONFIG)

    run(backend, scenario)


# -- pipelining -------------------------------------------------------------------------------


def test_pipelining_respects_max_in_flight(backend: str) -> None:
    config = ConnectionConfig(max_in_flight_requests_per_connection=3, request_timeout_ms=5000)
    batch_read = anyio.Event()
    go = anyio.Event()

    async def handler(client: FakeClient) -> None:
        await client.answer_api_versions()
        first_batch = [await client.read_request() for _ in range(3)]
        batch_read.set()
        await go.wait()
        for received in first_batch:
            await client.respond(received, metadata_response("c", received.request.topics[0].name))
        await echo_metadata(client)

    async def scenario() -> None:
        results: dict[str, list[str]] = {}
        async with FakeBroker(handler) as broker:
            conn = await Connection.connect(broker.host, broker.port, config)

            async def one(name: str) -> None:
                results[name] = topics(await conn.send(metadata_request(name)))

            async with anyio.create_task_group() as tg:
                for i in range(9):
                    tg.start_soon(one, f"topic-{i}")
                await batch_read.wait()
                await anyio.wait_all_tasks_blocked()
                assert conn.in_flight == 3  # six senders wait for a free slot
                go.set()
            await conn.close()
        assert results == {f"topic-{i}": [f"topic-{i}"] for i in range(9)}

    run(backend, scenario)


def _answering_in_pairs(arrived: list[str]) -> Callable[[FakeClient], Any]:
    """A broker handler that notes the topic of each request as it arrives and answers
    them two at a time in one write, so one read of the client frees two permits at once
    (two waiting senders wake in the same step)."""

    async def handler(client: FakeClient) -> None:
        await client.answer_api_versions()
        while True:
            pair = [await client.read_request() for _ in range(2)]
            arrived.extend(r.request.topics[0].name for r in pair)
            await client.send_raw(
                b"".join(
                    encode_response(
                        r.correlation_id, r.api_key, r.version, metadata_response("c", name)
                    )
                    for r, name in zip(pair, arrived[-2:], strict=True)
                )
            )

    return handler


def test_requests_are_written_in_the_order_send_was_called(backend: str) -> None:
    # Senders waiting for a permit wake together when two responses arrive at once; the
    # order a scheduler runs them in (trio shuffles it) must not change the order they are
    # written in. The producer relies on it with several batches of a partition in flight.
    config = ConnectionConfig(max_in_flight_requests_per_connection=2, request_timeout_ms=5000)
    arrived: list[str] = []
    names = [f"t{i}" for i in range(40)]

    async def scenario() -> None:
        async with FakeBroker(_answering_in_pairs(arrived)) as broker:
            conn = await Connection.connect(broker.host, broker.port, config)

            async def one(name: str, *, task_status: Any) -> None:
                task_status.started()  # the caller goes on once this has called send
                await conn.send(metadata_request(name))

            async with anyio.create_task_group() as tg:
                for name in names:
                    await tg.start(one, name)
            await conn.close()

    run(backend, scenario)
    assert arrived == names


def test_submit_completes_from_the_read(caplog: pytest.LogCaptureFixture) -> None:
    # Two responses in one read complete their requests in order, from the read itself: a
    # done-callback may submit on the connection (written at once), and one that raises is
    # logged without breaking the connection.
    config = ConnectionConfig(max_in_flight_requests_per_connection=4, request_timeout_ms=5000)
    arrived: list[str] = []

    async def scenario() -> None:
        async with FakeBroker(_answering_in_pairs(arrived)) as broker:
            conn = await Connection.connect(broker.host, broker.port, config)
            order: list[str] = []

            def record(done: Any) -> None:
                order.extend(topics(done.result()))

            def then_send(done: Any) -> None:
                record(done)
                more = [conn.submit(metadata_request(n)) for n in "cd"]
                assert conn.in_flight == 2  # from inside the read: written at once
                more[0].add_done_callback(failing)
                more[1].add_done_callback(record)

            def failing(done: Any) -> None:
                record(done)
                raise RuntimeError("a callback bug")

            a = conn.submit(metadata_request("a"))
            b = conn.submit(metadata_request("b"))
            assert conn.in_flight == 2
            a.add_done_callback(record)
            b.add_done_callback(then_send)
            with anyio.fail_after(5):
                while len(order) < 4:
                    await anyio.sleep(0.005)
            assert order == ["a", "b", "c", "d"]
            assert not conn.closed
            later: list[str] = []  # the connection still reads (the broker answers pairs)

            async def one(name: str) -> None:
                later.extend(topics(await conn.send(metadata_request(name))))

            async with anyio.create_task_group() as tg:
                tg.start_soon(one, "e")
                tg.start_soon(one, "f")
            assert sorted(later) == ["e", "f"]
            await conn.close()

    with caplog.at_level(logging.ERROR, logger="kafkaio.net"):
        run("asyncio", scenario)
    assert arrived[:4] == ["a", "b", "c", "d"]
    assert [r.getMessage() for r in caplog.records] == ["a response callback failed"]


def test_submitted_requests_wait_in_the_queue_for_a_slot(backend: str) -> None:
    """Every in-flight slot taken: the next request waits in the connection's queue and is
    written once a response frees one (on anyio streams by the writer, `serve`); each
    Completion completes in order, a lost connection fails what is in flight, and a
    request submitted once it is closed fails at once."""
    config = ConnectionConfig(max_in_flight_requests_per_connection=2, request_timeout_ms=5000)
    go = anyio.Event()
    arrived: list[str] = []

    async def handler(client: FakeClient) -> None:
        await client.answer_api_versions()
        first, second = await client.read_request(), await client.read_request()
        arrived.extend(t.name for r in (first, second) for t in r.request.topics)
        await go.wait()
        for received in (first, second):
            await client.respond(received, metadata_response("c", received.request.topics[0].name))
        third = await client.read_request()  # never answered: the connection is dropped
        arrived.extend(t.name for t in third.request.topics)
        await client.stream.aclose()

    async def scenario() -> None:
        outcomes: list[tuple[str, list[str] | None, BaseException | None]] = []

        def on_done(name: str, done: Any) -> None:
            outcomes.append((name, None if done.error else topics(done.result()), done.error))

        async with FakeBroker(handler) as broker, anyio.create_task_group() as tg:
            conn = await Connection.connect(broker.host, broker.port, config)
            assert conn.needs_writer == (backend != "asyncio")
            tg.start_soon(conn.serve)  # returns at once on asyncio's plain TCP adapter
            for name in "abc":
                conn.submit(metadata_request(name)).add_done_callback(
                    functools.partial(on_done, name)
                )
            with anyio.fail_after(5):
                while conn.in_flight < 2:
                    await anyio.sleep(0.005)
            await anyio.sleep(0.05)
            assert conn.in_flight == 2 and outcomes == []  # "c" waits for a slot
            go.set()
            with anyio.fail_after(5):
                while len(outcomes) < 3:
                    await anyio.sleep(0.005)
            assert outcomes[:2] == [("a", ["a"], None), ("b", ["b"], None)]
            name, names, error = outcomes[2]
            assert name == "c" and names is None and isinstance(error, KafkaConnectionError)
            assert conn.closed
            late = conn.submit(metadata_request("d"))
            assert late.done and isinstance(late.error, KafkaConnectionError)
            await conn.close()
        assert arrived == ["a", "b", "c"]

    run(backend, scenario)


def test_a_queued_request_past_its_deadline_fails_without_closing(backend: str) -> None:
    """A request that waits in the queue (the only slot taken) longer than its timeout fails
    with KafkaTimeoutError saying it could not be sent; the connection stays open."""
    config = ConnectionConfig(max_in_flight_requests_per_connection=1, request_timeout_ms=5000)
    go = anyio.Event()

    async def handler(client: FakeClient) -> None:
        await client.answer_api_versions()
        first = await client.read_request()
        await go.wait()
        await client.respond(first, metadata_response("c", "slow"))
        await echo_metadata(client)

    async def scenario() -> None:
        async with FakeBroker(handler) as broker, anyio.create_task_group() as tg:
            conn = await Connection.connect(broker.host, broker.port, config)
            tg.start_soon(conn.serve)
            slow = conn.submit(metadata_request("slow"))
            queued = conn.submit(metadata_request("queued"), timeout=0.1)
            with anyio.fail_after(5):
                while not queued.done:
                    await anyio.sleep(0.005)
            assert isinstance(queued.error, KafkaTimeoutError)
            assert "could not be sent within 0.1 s" in str(queued.error)
            assert not conn.closed and not slow.done
            go.set()
            assert topics(await slow.wait(5)) == ["slow"]
            assert topics(await conn.send(metadata_request("next"))) == ["next"]
            await conn.close()

    run(backend, scenario)


def test_requests_their_callers_gave_up_on_close_the_connection_once_overdue(
    backend: str,
) -> None:
    async def hung(client: FakeClient) -> None:
        await client.answer_api_versions()
        while True:  # reads requests, answers none (a hung broker, a half-open connection)
            await client.read_request()

    async def scenario() -> None:
        config = ConnectionConfig(
            request_timeout_ms=300, connect_timeout_ms=5000, max_in_flight_requests_per_connection=2
        )
        async with FakeBroker(hung) as broker:
            conn = await Connection.connect(broker.host, broker.port, config)
            for _ in range(2):  # both permits, taken by callers that stop waiting early
                with anyio.move_on_after(0.05):
                    await conn.send(metadata_request("t"))
            assert conn.in_flight == 2 and not conn.closed
            await anyio.sleep(0.4)  # past their deadline, though nobody waits for them
            with anyio.fail_after(0.2):  # before: waited for a permit, then "not sent"
                with pytest.raises(KafkaConnectionError, match="is closed.*no response within"):
                    await conn.send(metadata_request("t"))
            assert conn.closed and conn.in_flight == 0

    run(backend, scenario)


def test_submit_timeout_closes_the_connection() -> None:
    async def handler(client: FakeClient) -> None:
        await client.answer_api_versions()
        await client.wait_closed()  # reads nothing more, answers nothing

    async def scenario() -> None:
        async with FakeBroker(handler) as broker:
            conn = await Connection.connect(broker.host, broker.port, CONFIG)
            sent = conn.submit(metadata_request("x"), timeout=0.1)
            assert not sent.done and conn.in_flight == 1
            with anyio.fail_after(5):
                while not sent.done:
                    await anyio.sleep(0.005)
            error = sent.error
            assert isinstance(error, KafkaTimeoutError)
            assert "Metadata request (v12)" in str(error) and "no response within 0.1 s" in str(
                error
            )
            assert conn.closed

    run("asyncio", scenario)


def test_cancelled_sender_does_not_break_the_connection(backend: str) -> None:
    go = anyio.Event()

    async def handler(client: FakeClient) -> None:
        await client.answer_api_versions()
        first = await client.read_request()
        await go.wait()
        await client.respond(first, metadata_response("c", "first"))
        await echo_metadata(client)

    async def scenario() -> None:
        async with FakeBroker(handler) as broker:
            conn = await Connection.connect(broker.host, broker.port, CONFIG)
            with anyio.move_on_after(0.05):
                await conn.send(metadata_request("first"))
            assert conn.in_flight == 1 and not conn.closed
            go.set()
            assert topics(await conn.send(metadata_request("second"))) == ["second"]
            assert conn.in_flight == 0
            await conn.close()

    run(backend, scenario)


def test_submit_no_response(backend: str) -> None:
    received_keys: list[tuple[int, int]] = []

    async def handler(client: FakeClient) -> None:
        await client.answer_api_versions()
        produce = await client.read_request()
        received_keys.append((produce.api_key, produce.request.acks))
        await echo_metadata(client)

    async def scenario() -> None:
        async with FakeBroker(handler) as broker, anyio.create_task_group() as tg:
            conn = await Connection.connect(broker.host, broker.port, CONFIG)
            tg.start_soon(conn.serve)
            written = conn.submit_no_response(
                m.ProduceRequest(acks=0, timeout_ms=1000, topic_data=[])
            )
            assert await written.wait(5) is None
            assert conn.in_flight == 0
            assert topics(await conn.send(metadata_request("after"))) == ["after"]
            await conn.close()
        assert received_keys == [(0, 0)]

    run(backend, scenario)


# -- a misbehaving broker ---------------------------------------------------------------------


async def two_requests_then(client: FakeClient, reply: Callable[[list[Any]], bytes]) -> None:
    await client.answer_api_versions()
    batch = [await client.read_request(), await client.read_request()]
    await client.send_raw(reply(batch))
    await client.wait_closed()


async def send_two(conn: Connection) -> list[BaseException | Any]:
    outcomes: list[BaseException | Any] = [None, None]

    async def one(i: int) -> None:
        try:
            outcomes[i] = await conn.send(metadata_request(f"t{i}"))
        except Exception as exc:
            outcomes[i] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, 0)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(one, 1)
    return outcomes


def garbage_body(batch: list[Any]) -> bytes:
    cid = batch[0].correlation_id
    return (5).to_bytes(4, "big") + cid.to_bytes(4, "big") + b"\x00"  # header + 1 body byte


def answer_second_first(batch: list[Any]) -> bytes:
    return encode_response(batch[1].correlation_id, 3, batch[1].version, metadata_response("c"))


def answer_unknown_id(batch: list[Any]) -> bytes:
    return encode_response(
        batch[1].correlation_id + 100, 3, batch[1].version, metadata_response("c")
    )


BROKEN_REPLIES: dict[str, tuple[Callable[[list[Any]], bytes], str]] = {
    "huge-size-prefix": (lambda batch: b"\x7f\xff\xff\xff", "exceeds max_response_size"),
    "negative-size": (lambda batch: b"\xff\xff\xff\xfe", "negative"),
    "out-of-order-id": (answer_second_first, "out of order"),
    "unknown-id": (answer_unknown_id, "unknown correlation id"),
}


@pytest.mark.parametrize("case", sorted(BROKEN_REPLIES))
def test_broken_reply_fails_every_request(backend: str, case: str) -> None:
    reply, cause_text = BROKEN_REPLIES[case]

    async def scenario() -> None:
        async with FakeBroker(lambda c: two_requests_then(c, reply)) as broker:
            conn = await Connection.connect(broker.host, broker.port, CONFIG, node_id=4)
            outcomes = await send_two(conn)
            for outcome in outcomes:
                assert isinstance(outcome, KafkaConnectionError), outcome
                assert "node 4" in str(outcome) and "Metadata" in str(outcome)
                assert isinstance(outcome.__cause__, KafkaProtocolError)
                assert cause_text in str(outcome.__cause__)
            assert outcomes[0] is not outcomes[1]
            assert conn.closed and conn.in_flight == 0
            await conn.close()

    run(backend, scenario)


def test_undecodable_response_is_protocol_error(backend: str) -> None:
    async def scenario() -> None:
        async with FakeBroker(lambda c: two_requests_then(c, garbage_body)) as broker:
            conn = await Connection.connect(broker.host, broker.port, CONFIG)
            first, second = await send_two(conn)
            assert isinstance(first, KafkaProtocolError)
            assert "could not decode the Metadata v12 response" in str(first)
            assert isinstance(second, KafkaConnectionError)
            assert isinstance(second.__cause__, KafkaProtocolError)
            assert conn.closed

    run(backend, scenario)


@pytest.mark.parametrize("mid_frame", [True, False])
def test_broker_closes_connection(backend: str, mid_frame: bool) -> None:
    async def handler(client: FakeClient) -> None:
        await client.answer_api_versions()
        received = await client.read_request()
        if mid_frame:
            frame = encode_response(received.correlation_id, 3, 12, metadata_response("c", "x"))
            await client.send_raw(frame[: len(frame) // 2])
        # returning closes the socket

    async def scenario() -> None:
        async with FakeBroker(handler) as broker:
            conn = await Connection.connect(broker.host, broker.port, CONFIG)
            with pytest.raises(KafkaConnectionError) as info:
                await conn.send(metadata_request("x"))
            text = str(info.value)
            assert "closed the connection" in text
            assert ("in the middle of a response" in text) is mid_frame
            assert conn.closed
            with pytest.raises(KafkaConnectionError):
                await conn.send(metadata_request("x"))

    run(backend, scenario)


@pytest.mark.parametrize("dribble", [b"", b"\x00\x00"])
def test_slow_loris_times_out_and_fails_other_requests(backend: str, dribble: bytes) -> None:
    async def handler(client: FakeClient) -> None:
        await client.answer_api_versions()
        await client.read_request()
        await client.read_request()
        await client.send_raw(dribble)  # maybe part of a size prefix, never the rest
        await client.wait_closed()

    async def scenario() -> None:
        async with FakeBroker(handler) as broker:
            conn = await Connection.connect(broker.host, broker.port, CONFIG, node_id=9)
            outcomes: dict[str, BaseException] = {}

            async def one(name: str, timeout: float) -> None:
                try:
                    await conn.send(metadata_request(name), timeout=timeout)
                except Exception as exc:
                    outcomes[name] = exc

            async with anyio.create_task_group() as tg:
                tg.start_soon(one, "patient", 60.0)  # would wait a minute on its own
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(one, "short", 0.2)
            short, patient = outcomes["short"], outcomes["patient"]
            assert isinstance(short, KafkaTimeoutError)
            assert "Metadata request (v12) to node 9" in str(short)
            assert "the connection was closed" in str(short)
            assert isinstance(patient, KafkaConnectionError)
            assert isinstance(patient.__cause__, KafkaTimeoutError)
            assert conn.closed
            await conn.close()

    run(backend, scenario)


def test_close_fails_in_flight_requests(backend: str) -> None:
    async def handler(client: FakeClient) -> None:
        await client.answer_api_versions()
        await client.wait_closed()

    async def scenario() -> None:
        async with FakeBroker(handler) as broker:
            conn = await Connection.connect(broker.host, broker.port, CONFIG)
            errors: list[BaseException] = []

            async def one() -> None:
                try:
                    await conn.send(metadata_request("x"))
                except KafkaConnectionError as exc:
                    errors.append(exc)

            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    tg.start_soon(one)
                await anyio.wait_all_tasks_blocked()
                assert conn.in_flight == 3
                await conn.close()
            assert len(errors) == 3
            assert all("still in flight when the connection was closed" in str(e) for e in errors)
            await conn.close()  # idempotent

    run(backend, scenario)


def test_close_completes_from_cancelled_task(backend: str) -> None:
    async def handler(client: FakeClient) -> None:
        await client.answer_api_versions()
        await client.wait_closed()

    async def scenario() -> None:
        async with FakeBroker(handler) as broker:
            conn = await Connection.connect(broker.host, broker.port, CONFIG)
            with anyio.CancelScope() as scope:
                scope.cancel()
                await conn.close()
            assert conn.closed

    run(backend, scenario)


# -- connecting -------------------------------------------------------------------------------


def test_connect_refused_names_node(backend: str) -> None:
    port = free_port()

    async def scenario() -> None:
        with pytest.raises(KafkaConnectionError) as info:
            await Connection.connect("127.0.0.1", port, CONFIG, node_id=7)
        assert f"could not connect to node 7 (127.0.0.1:{port})" in str(info.value)
        assert "check that the broker is running" in str(info.value)

    run(backend, scenario)


def test_connect_timeout_when_broker_is_silent(backend: str) -> None:
    async def handler(client: FakeClient) -> None:
        await client.wait_closed()

    async def scenario() -> None:
        config = ConnectionConfig(connect_timeout_ms=200)
        async with FakeBroker(handler) as broker:
            with pytest.raises(KafkaConnectionError, match="within connect_timeout_ms=200"):
                await Connection.connect(broker.host, broker.port, config)

    run(backend, scenario)


def test_plaintext_client_on_tls_port_gets_a_hint(backend: str) -> None:
    async def handler(client: FakeClient) -> None:
        await client.read_request()
        await client.send_raw(b"\x15\x03\x03\x00\x02\x02\x46")  # a TLS alert record

    async def scenario() -> None:
        async with FakeBroker(handler) as broker:
            with pytest.raises(KafkaConnectionError) as info:
                await Connection.connect(broker.host, broker.port, CONFIG)
        assert "SSL or SASL_SSL" in str(info.value.__cause__)

    run(backend, scenario)


# -- SASL -------------------------------------------------------------------------------------


def sasl_config(mechanism: str, password: str = "secret", **kwargs: Any) -> ConnectionConfig:
    if mechanism == "OAUTHBEARER":
        return ConnectionConfig(
            security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism, **kwargs
        )
    return ConnectionConfig(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_plain_username="alice",
        sasl_plain_password=password,
        **kwargs,
    )


async def sasl_handshake(client: FakeClient, offered: list[str]) -> str:
    await client.answer_api_versions()
    handshake = await client.read_request()
    assert handshake.api_key == 17 and handshake.version == 1
    mechanism = handshake.request.mechanism
    code = 0 if mechanism in offered else 33
    await client.respond(handshake, m.SaslHandshakeResponse(error_code=code, mechanisms=offered))
    return str(mechanism)


async def sasl_reply(
    client: FakeClient,
    received: Any,
    payload: bytes = b"",
    code: int = 0,
    message: str | None = None,
) -> None:
    await client.respond(
        received,
        m.SaslAuthenticateResponse(
            error_code=code, error_message=message, auth_bytes=payload, session_lifetime_ms=0
        ),
    )


@pytest.mark.parametrize("password", ["secret", "wrong"])
def test_sasl_plain(backend: str, password: str, caplog: pytest.LogCaptureFixture) -> None:
    async def handler(client: FakeClient) -> None:
        await sasl_handshake(client, ["PLAIN", "SCRAM-SHA-256"])
        auth = await client.read_request()
        assert auth.api_key == 36
        if auth.request.auth_bytes == b"\x00alice\x00secret":
            await sasl_reply(client, auth)
            await echo_metadata(client)
        else:
            await sasl_reply(client, auth, code=58, message="Invalid username or password")

    async def scenario() -> None:
        async with FakeBroker(handler) as broker:
            if password == "secret":
                conn = await Connection.connect(broker.host, broker.port, sasl_config("PLAIN"))
                assert topics(await conn.send(metadata_request("t"))) == ["t"]
                await conn.close()
                return
            with pytest.raises(SaslAuthenticationFailedError) as info:
                await Connection.connect(broker.host, broker.port, sasl_config("PLAIN", password))
            assert "Invalid username or password" in str(info.value)
            assert password not in str(info.value)

    with caplog.at_level(logging.DEBUG, logger="kafkaio.net"):
        run(backend, scenario)
    if password == "secret":
        connects = [r for r in caplog.records if r.getMessage().startswith("connected to")]
        assert len(connects) == 1 and "SASL_PLAINTEXT" in connects[0].getMessage()
        assert len(caplog.records) == 2  # one line to connect, one to close; none per request
    assert password not in caplog.text


class ScramServer:
    """The broker side of SCRAM (RFC 5802), from the RFC's formulas."""

    def __init__(self, mechanism: str, password: str, forge_signature: bool = False) -> None:
        self.hash = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        self.salt, self.iterations = b"kafkaio-salt", 4096
        salted = hashlib.pbkdf2_hmac(self.hash, password.encode(), self.salt, self.iterations)
        self.stored_key = hashlib.new(self.hash, self._hmac(salted, b"Client Key")).digest()
        self.server_key = self._hmac(salted, b"Server Key")
        self.forge = forge_signature

    def _hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash).digest()

    def first(self, client_first: bytes) -> bytes:
        assert client_first.startswith(b"n,,")
        self.client_first_bare = client_first[3:]
        attrs = dict(p.split(b"=", 1) for p in self.client_first_bare.split(b","))
        assert attrs[b"n"] == b"alice"
        self.nonce = attrs[b"r"] + b"-server-nonce"
        salt = base64.b64encode(self.salt)
        self.server_first = (
            b"r=" + self.nonce + b",s=" + salt + b",i=" + str(self.iterations).encode()
        )
        return self.server_first

    def final(self, client_final: bytes) -> bytes | None:
        without_proof, proof = client_final.rsplit(b",p=", 1)
        assert without_proof == b"c=biws,r=" + self.nonce
        auth = self.client_first_bare + b"," + self.server_first + b"," + without_proof
        signature = self._hmac(self.stored_key, auth)
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof), signature, strict=True))
        if hashlib.new(self.hash, client_key).digest() != self.stored_key:
            return None
        key = b"\x00" * len(self.server_key) if self.forge else self.server_key
        return b"v=" + base64.b64encode(self._hmac(key, auth))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("case", ["ok", "wrong-password", "forged-server"])
def test_sasl_scram(backend: str, mechanism: str, case: str) -> None:
    server = ScramServer(mechanism, "pencil", forge_signature=case == "forged-server")

    async def handler(client: FakeClient) -> None:
        assert await sasl_handshake(client, [mechanism]) == mechanism
        first = await client.read_request()
        await sasl_reply(client, first, server.first(first.request.auth_bytes))
        final = await client.read_request()
        server_final = server.final(final.request.auth_bytes)
        if server_final is None:
            await sasl_reply(
                client,
                final,
                code=58,
                message="Authentication failed during authentication due to invalid credentials with SASL mechanism "
                + mechanism,
            )
            return
        await sasl_reply(client, final, server_final)
        await echo_metadata(client)

    async def scenario() -> None:
        password = "wrong" if case == "wrong-password" else "pencil"
        config = sasl_config(mechanism, password)
        async with FakeBroker(handler) as broker:
            if case == "ok":
                conn = await Connection.connect(broker.host, broker.port, config)
                assert topics(await conn.send(metadata_request("t"))) == ["t"]
                await conn.close()
                return
            with pytest.raises(SaslAuthenticationFailedError) as info:
                await Connection.connect(broker.host, broker.port, config)
            expected = "invalid credentials" if case == "wrong-password" else "server signature"
            assert expected in str(info.value)
        assert not broker.errors

    run(backend, scenario)


def test_scram_pbkdf2_runs_off_the_event_loop(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # PBKDF2 ran on the event loop's thread: 10,000,000 iterations froze every other task
    # (and the connection's own timeout) for 5.3 s. It runs in a worker thread now.
    server = ScramServer("SCRAM-SHA-256", "pencil")
    threads: list[int] = []
    real = hashlib.pbkdf2_hmac

    def recording(*args: Any) -> bytes:
        threads.append(threading.get_ident())
        return real(*args)

    monkeypatch.setattr(hashlib, "pbkdf2_hmac", recording)

    async def handler(client: FakeClient) -> None:
        await sasl_handshake(client, ["SCRAM-SHA-256"])
        first = await client.read_request()
        await sasl_reply(client, first, server.first(first.request.auth_bytes))
        final = await client.read_request()
        await sasl_reply(client, final, server.final(final.request.auth_bytes) or b"")
        await echo_metadata(client)

    async def scenario() -> None:
        loop_thread = threading.get_ident()
        async with FakeBroker(handler) as broker:
            conn = await Connection.connect(
                broker.host, broker.port, sasl_config("SCRAM-SHA-256", "pencil")
            )
            await conn.close()
        assert threads and loop_thread not in threads

    run(backend, scenario)


@pytest.mark.parametrize("iterations", [16385, 10_000_000, 2**31, 10**30])
def test_scram_iterations_above_the_maximum_are_refused(backend: str, iterations: int) -> None:
    # 2**31 made PBKDF2 raise OverflowError; 10 million cost 5 s of CPU per connection
    async def handler(client: FakeClient) -> None:
        await sasl_handshake(client, ["SCRAM-SHA-256"])
        first = await client.read_request()
        nonce = first.request.auth_bytes.split(b",r=")[1] + b"x"
        await sasl_reply(client, first, b"r=%s,s=c2FsdA==,i=%d" % (nonce, iterations))
        await client.wait_closed()

    async def scenario() -> None:
        async with FakeBroker(handler) as broker:
            with pytest.raises(SaslAuthenticationFailedError, match="more than the maximum 16384"):
                await Connection.connect(broker.host, broker.port, sasl_config("SCRAM-SHA-256"))

    run(backend, scenario)


def test_reauthentication_holds_new_requests_until_it_is_done(backend: str) -> None:
    # KIP-368: the request in flight is answered first, then the SASL exchange runs again,
    # then the request sent meanwhile goes out
    arrived: list[int] = []
    release = anyio.Event()

    async def handler(client: FakeClient) -> None:
        await sasl_handshake(client, ["PLAIN"])
        await sasl_reply(client, await client.read_request())
        held = await client.read_request()
        arrived.append(held.api_key)
        await release.wait()
        await client.respond(held, metadata_response("c", "held"))
        handshake = await client.read_request()
        arrived.append(handshake.api_key)
        await client.respond(handshake, m.SaslHandshakeResponse(error_code=0, mechanisms=[]))
        auth = await client.read_request()
        arrived.append(auth.api_key)
        assert auth.request.auth_bytes == b"\x00alice\x00secret"
        await client.respond(
            auth,
            m.SaslAuthenticateResponse(error_code=0, auth_bytes=b"", session_lifetime_ms=9000),
        )
        later = await client.read_request()
        arrived.append(later.api_key)
        await client.respond(later, metadata_response("c", "later"))
        await client.wait_closed()

    async def scenario() -> None:
        got: list[str] = []
        async with FakeBroker(handler) as broker:
            conn = await Connection.connect(broker.host, broker.port, sasl_config("PLAIN"))
            assert conn.session_lifetime_ms == 0

            async def one(name: str) -> None:
                got.extend(topics(await conn.send(metadata_request(name))))

            async with anyio.create_task_group() as tg:
                tg.start_soon(one, "held")
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(conn.reauthenticate)
                await anyio.wait_all_tasks_blocked()
                assert conn.state.value == "authenticating"
                tg.start_soon(one, "later")
                await anyio.wait_all_tasks_blocked()
                assert conn.in_flight == 1  # "later" waits in line
                release.set()
            assert got == ["held", "later"] and conn.session_lifetime_ms == 9000
            assert conn.state.value == "ready"
            await conn.close()
        assert arrived == [3, 17, 36, 3]

    run(backend, scenario)


def test_a_sasl_session_is_renewed_before_it_ends(backend: str) -> None:
    # KIP-368: the broker grants a 300 ms session; a request made after it (85-95% of it)
    # first runs the SASL exchange again (a broker with connections.max.reauth.ms closes a
    # connection that sends a request after its session ended); the renewed session's
    # lifetime counts from then
    after_setup: list[int] = []

    async def handler(client: FakeClient) -> None:
        await sasl_handshake(client, ["PLAIN"])
        auth = await client.read_request()
        await client.respond(
            auth, m.SaslAuthenticateResponse(error_code=0, auth_bytes=b"", session_lifetime_ms=300)
        )
        while True:
            received = await client.read_request()
            after_setup.append(received.api_key)
            if received.api_key == 17:
                response: Any = m.SaslHandshakeResponse(error_code=0, mechanisms=["PLAIN"])
            elif received.api_key == 36:
                assert received.request.auth_bytes == b"\x00alice\x00secret"
                response = m.SaslAuthenticateResponse(
                    error_code=0, auth_bytes=b"", session_lifetime_ms=60_000
                )
            else:
                names = [t.name for t in received.request.topics or []]
                response = metadata_response("c", *names)
            await client.respond(received, response)

    async def scenario() -> None:
        async with FakeBroker(handler) as broker:
            conn = await Connection.connect(broker.host, broker.port, sasl_config("PLAIN"))
            assert conn.session_lifetime_ms == 300
            await anyio.sleep(0.3)  # the session has ended
            assert topics(await conn.send(metadata_request("b"))) == ["b"]  # renewed first
            assert conn.session_lifetime_ms == 60_000 and conn.state.value == "ready"
            assert topics(await conn.send(metadata_request("c"))) == ["c"]
            await conn.close()
        assert after_setup == [17, 36, 3, 3]

    run(backend, scenario)


def test_sasl_mechanism_not_offered(backend: str) -> None:
    async def handler(client: FakeClient) -> None:
        await sasl_handshake(client, ["SCRAM-SHA-512"])
        await client.wait_closed()

    async def scenario() -> None:
        async with FakeBroker(handler) as broker:
            with pytest.raises(UnsupportedSaslMechanismError, match="SCRAM-SHA-512"):
                await Connection.connect(broker.host, broker.port, sasl_config("PLAIN"))

    run(backend, scenario)


@pytest.mark.parametrize("provider_kind", ["sync", "async"])
def test_sasl_oauthbearer(backend: str, provider_kind: str) -> None:
    async def handler(client: FakeClient) -> None:
        await sasl_handshake(client, ["OAUTHBEARER"])
        auth = await client.read_request()
        if auth.request.auth_bytes == b"n,,\x01auth=Bearer good.token\x01\x01":
            await sasl_reply(client, auth)
            await echo_metadata(client)
            return
        await sasl_reply(client, auth, b'{"status":"invalid_token"}')
        again = await client.read_request()
        assert again.request.auth_bytes == b"\x01"
        await sasl_reply(client, again, code=58, message="invalid token")

    def sync_provider(token: str) -> Any:
        return lambda: token

    def async_provider(token: str) -> Any:
        async def provide() -> str:
            await anyio.sleep(0)
            return token

        return provide

    make = sync_provider if provider_kind == "sync" else async_provider

    async def scenario() -> None:
        async with FakeBroker(handler) as broker:
            good = sasl_config("OAUTHBEARER", sasl_oauth_token_provider=make("good.token"))
            conn = await Connection.connect(broker.host, broker.port, good)
            assert topics(await conn.send(metadata_request("t"))) == ["t"]
            await conn.close()
            bad = sasl_config("OAUTHBEARER", sasl_oauth_token_provider=make("bad.token"))
            with pytest.raises(SaslAuthenticationFailedError, match="invalid_token"):
                await Connection.connect(broker.host, broker.port, bad)
        assert not broker.errors

    run(backend, scenario)


def test_sasl_handshake_v0_only_broker(backend: str) -> None:
    async def handler(client: FakeClient) -> None:
        await client.answer_api_versions({18: (0, 4), 17: (0, 0), 36: (0, 2)})
        await client.wait_closed()

    async def scenario() -> None:
        async with FakeBroker(handler) as broker:
            with pytest.raises(UnsupportedVersionError, match="SaslHandshake v0"):
                await Connection.connect(broker.host, broker.port, sasl_config("PLAIN"))

    run(backend, scenario)
