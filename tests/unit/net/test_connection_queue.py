"""The connection's queue, without a socket: a Connection over asyncio's adapter on a
recording transport, fed the broker's bytes and the time by the test (nothing runs the
event loop). `submit` writes a request at once when it can, and otherwise keeps it in the
connection's queue, in order, until a response frees a slot, the transport takes data
again, or its deadline passes."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from kafkaio.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from kafkaio.net.config import ConnectionConfig
from kafkaio.net.connection import Connection
from kafkaio.net.wire import AsyncioWire
from kafkaio.protocol import messages as m
from kafkaio.runtime.completion import Completion

from ._fake_broker import (
    DEFAULT_APIS,
    Received,
    api_versions_response,
    decode_request,
    encode_response,
    metadata_request,
    metadata_response,
    topics,
)


class RecordingTransport(asyncio.Transport):
    """Keeps what is written; `close`/`abort` only note it."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False

    def write(self, data: Any) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


class Peer:
    """The broker side: reads what the connection wrote, answers with bytes."""

    def __init__(self, conn: Connection, wire: AsyncioWire, transport: RecordingTransport):
        self.conn = conn
        self.wire = wire
        self.transport = transport

    def requests(self) -> list[Received]:
        """The requests written since the last call, in order."""
        data, self.transport.written = bytes(self.transport.written), bytearray()
        out = []
        while data:
            (size,) = struct.unpack_from(">i", data)
            out.append(decode_request(data[4 : 4 + size]))
            data = data[4 + size :]
        return out

    def names(self) -> list[str]:
        """The Metadata topics (or "produce") of the requests written since the last call."""
        return [
            "produce" if r.api_key == 0 else r.request.topics[0].name for r in self.requests()
        ]

    def answer(self, *received: Received) -> None:
        """Answer Metadata requests in one read."""
        self.conn.received(
            b"".join(
                encode_response(
                    r.correlation_id,
                    r.api_key,
                    r.version,
                    metadata_response("c", *[t.name for t in r.request.topics]),
                )
                for r in received
            ),
            self.wire.now(),
        )


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def ready(loop: asyncio.AbstractEventLoop, **config: Any) -> Peer:
    """A READY connection (ApiVersions answered) over a recording transport."""
    wire = AsyncioWire(loop)
    transport = RecordingTransport()
    wire.connection_made(transport)
    conn = Connection(wire, "127.0.0.1", 9092, ConnectionConfig(**config), node_id=1)
    peer = Peer(conn, wire, transport)
    versions = conn._machine.start(wire.now())  # what connect() does once the socket is open
    request = decode_request(versions.data[4:])
    conn.received(
        encode_response(
            request.correlation_id, 18, request.version, api_versions_response(DEFAULT_APIS)
        ),
        wire.now(),
    )
    assert conn.state.value == "ready"
    return peer


def outcome(done: Completion[Any]) -> Any:
    if not done.done:
        return "pending"
    if done.error is not None:
        return type(done.error)
    value = done.value
    return None if value is None else topics(value)


def test_requests_past_the_in_flight_limit_wait_in_order_and_go_as_slots_free(
    loop: asyncio.AbstractEventLoop,
) -> None:
    peer = ready(loop, max_in_flight_requests_per_connection=2)
    conn = peer.conn
    done = [conn.submit(metadata_request(n)) for n in "abcd"]
    a, b = peer.requests()
    assert [a.request.topics[0].name, b.request.topics[0].name] == ["a", "b"]
    assert conn.in_flight == 2 and [outcome(d) for d in done] == ["pending"] * 4
    peer.answer(a)  # a slot frees: "c" is written from that read
    (c,) = peer.requests()
    assert c.request.topics[0].name == "c" and outcome(done[0]) == ["a"]
    later = conn.submit(metadata_request("e"))  # behind "d", though nothing is free yet
    peer.answer(b, c)
    assert peer.names() == ["d", "e"]
    assert [outcome(d) for d in done] == [["a"], ["b"], ["c"], "pending"]
    assert outcome(later) == "pending" and conn.in_flight == 2


def test_a_request_waiting_past_its_deadline_fails_and_the_connection_stays(
    loop: asyncio.AbstractEventLoop,
) -> None:
    peer = ready(loop, max_in_flight_requests_per_connection=1)
    conn = peer.conn
    now = peer.wire.now()
    first = conn.submit(metadata_request("first"), timeout=10)
    waiting = conn.submit(metadata_request("waiting"), timeout=1)
    behind = conn.submit(metadata_request("behind"), timeout=10)
    (sent,) = peer.requests()
    conn.expire(now + 2)
    assert isinstance(waiting.error, KafkaTimeoutError)
    assert "could not be sent within 1 s" in str(waiting.error)
    assert not conn.closed and outcome(first) == "pending"
    peer.answer(sent)
    assert peer.names() == ["behind"]  # the one that timed out is never written
    assert outcome(first) == ["first"] and outcome(behind) == "pending"


def test_acks0_waits_while_the_transport_is_paused_and_keeps_its_place(
    loop: asyncio.AbstractEventLoop,
) -> None:
    peer = ready(loop)
    conn = peer.conn
    peer.wire.pause_writing()
    written = conn.submit_no_response(m.ProduceRequest(acks=0, timeout_ms=1000, topic_data=[]))
    after = conn.submit(metadata_request("after"))  # a slot is free, but it waits behind
    assert peer.requests() == [] and not written.done
    peer.wire.resume_writing()
    assert peer.names() == ["produce", "after"]
    assert written.done and written.error is None and written.value is None
    assert conn.in_flight == 1 and outcome(after) == "pending"


def test_acks0_not_written_by_its_deadline_closes_the_connection(
    loop: asyncio.AbstractEventLoop,
) -> None:
    peer = ready(loop)
    conn = peer.conn
    now = peer.wire.now()
    in_flight = conn.submit(metadata_request("in-flight"), timeout=10)
    peer.wire.pause_writing()  # the broker stopped reading
    acks0 = m.ProduceRequest(acks=0, timeout_ms=1000, topic_data=[])
    written = conn.submit_no_response(acks0, timeout=1)
    conn.expire(now + 2)
    assert isinstance(written.error, KafkaTimeoutError)
    assert "could not be written within 1 s" in str(written.error)
    assert conn.closed and peer.transport.closed
    assert isinstance(in_flight.error, KafkaConnectionError)


def test_a_lost_connection_fails_what_is_in_flight_then_the_queue_in_order(
    loop: asyncio.AbstractEventLoop,
) -> None:
    peer = ready(loop, max_in_flight_requests_per_connection=1)
    conn = peer.conn
    failed: list[str] = []
    for name in "abc":
        conn.submit(metadata_request(name)).add_done_callback(
            lambda done, name=name: failed.append(f"{name}:{type(done.error).__name__}")
        )
    conn.lost(ConnectionResetError("reset by peer"))
    assert failed == [
        "a:KafkaConnectionError",
        "b:KafkaConnectionError",
        "c:KafkaConnectionError",
    ]
    late = conn.submit(metadata_request("late"))
    assert isinstance(late.error, KafkaConnectionError) and "is closed" in str(late.error)


def test_a_request_that_cannot_be_encoded_fails_alone(loop: asyncio.AbstractEventLoop) -> None:
    peer = ready(loop)
    conn = peer.conn
    topic = m.MetadataRequest.MetadataRequestTopic(name=123)  # type: ignore[arg-type]
    broken = m.MetadataRequest(topics=[topic])
    done = conn.submit(broken)
    assert isinstance(done.error, KafkaError)
    assert "MetadataRequest could not be sent" in str(done.error)
    fine = conn.submit(metadata_request("fine"))
    (sent,) = peer.requests()
    peer.answer(sent)
    assert outcome(fine) == ["fine"] and not conn.closed
