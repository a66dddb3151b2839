"""ConnectionManager against fake brokers: shared connects, backoff, bootstrap, idle close."""

from __future__ import annotations

import logging

import anyio
import pytest

from kafkaio.errors import ClientClosedError, KafkaConfigError, KafkaConnectionError
from kafkaio.net.config import ConnectionConfig
from kafkaio.net.manager import ConnectionManager, parse_bootstrap_servers

from ._fake_broker import (
    FakeBroker,
    FakeClient,
    echo_metadata,
    free_port,
    metadata_request,
    metadata_response,
    run,
    topics,
)

CONFIG = ConnectionConfig(request_timeout_ms=5000, connect_timeout_ms=5000)


async def serve(client: FakeClient) -> None:
    await client.answer_api_versions()
    await echo_metadata(client)


@pytest.mark.parametrize(
    ("servers", "parsed"),
    [
        ("a:9092", [("a", 9092)]),
        ("a:1, b:2,,a:1", [("a", 1), ("b", 2)]),
        (["[::1]:9093", "host"], [("::1", 9093), ("host", 9092)]),
        ("[fe80::1]", [("fe80::1", 9092)]),
        ("PLAINTEXT://k1:19092,SASL_SSL://k2:19093", [("k1", 19092), ("k2", 19093)]),
    ],
)
def test_parse_bootstrap_servers(servers: str | list[str], parsed: list[tuple[str, int]]) -> None:
    assert parse_bootstrap_servers(servers) == parsed


@pytest.mark.parametrize(
    ("servers", "match"),
    [
        ("", "empty"),
        (" , ", "empty"),
        ("::1:9092", "brackets"),
        ("a:notaport", "port in 1-65535"),
        ("a:0", "port in 1-65535"),
        ("a:70000", "port in 1-65535"),
        ("[::1:9092", "ipv6"),
        (":9092", "host:port"),
    ],
)
def test_parse_bootstrap_servers_errors(servers: str, match: str) -> None:
    with pytest.raises(KafkaConfigError, match=match):
        parse_bootstrap_servers(servers)


@pytest.mark.parametrize("servers", [None, 9092, b"localhost:9092", {"a": 1}])
def test_bootstrap_servers_of_the_wrong_type_are_named(servers: object) -> None:
    # None gave "'NoneType' object is not iterable"
    with pytest.raises(KafkaConfigError, match="bootstrap_servers must be a 'host:port' string"):
        parse_bootstrap_servers(servers)  # type: ignore[arg-type]


def test_concurrent_gets_share_one_connection(backend: str) -> None:
    async def scenario() -> None:
        async with FakeBroker(serve) as broker, ConnectionManager(broker.bootstrap, CONFIG) as mgr:
            mgr.update_nodes({1: (broker.host, broker.port, None)})
            conns = []

            async def get() -> None:
                conns.append(await mgr.get(1))

            async with anyio.create_task_group() as tg:
                for _ in range(10):
                    tg.start_soon(get)
            assert len({id(c) for c in conns}) == 1 and conns[0].node_id == 1
            assert broker.accepted == 1
            assert topics(await mgr.send(1, metadata_request("t"))) == ["t"]
            assert await mgr.get(1) is conns[0]

    run(backend, scenario)


def test_failed_connect_is_shared_then_backs_off(backend: str) -> None:
    port = free_port()

    async def scenario() -> None:
        config = ConnectionConfig(reconnect_backoff_ms=200, reconnect_backoff_max_ms=1000)
        async with ConnectionManager(f"127.0.0.1:{port}", config, rand=lambda: 0.5) as mgr:
            mgr.update_nodes({5: ("127.0.0.1", port, "rack-a")})
            errors: list[BaseException] = []

            async def get() -> None:
                try:
                    await mgr.get(5)
                except KafkaConnectionError as exc:
                    errors.append(exc)

            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    tg.start_soon(get)
            assert len(errors) == 3
            assert all(f"node 5 (127.0.0.1:{port})" in str(e) for e in errors)
            assert len({id(e) for e in errors}) == 3  # each task raises its own object
            remaining = mgr.backoff_remaining(5)
            assert 0 < remaining <= 0.2  # first failure: reconnect_backoff_ms, no jitter
            with pytest.raises(KafkaConnectionError):
                await mgr.get(5)  # waits out the backoff, then fails again
            assert 0.2 < mgr.backoff_remaining(5) <= 0.4  # doubled

    run(backend, scenario)


def test_reconnects_after_broker_drops_connection(backend: str) -> None:
    async def drop_first(client: FakeClient) -> None:
        await client.answer_api_versions()
        if broker.accepted == 1:
            await client.read_request()
            return  # close without answering
        await echo_metadata(client)

    broker = FakeBroker(drop_first)

    async def scenario() -> None:
        async with broker, ConnectionManager(broker.bootstrap, CONFIG) as mgr:
            mgr.update_nodes({1: (broker.host, broker.port, None)})
            first = await mgr.get(1)
            assert mgr.backoff_remaining(1) == 0
            with pytest.raises(KafkaConnectionError):
                await first.send(metadata_request("lost"))
            assert mgr.backoff_remaining(1) > 0  # reconnects after reconnect_backoff_ms
            second = await mgr.get(1)
            assert second is not first and not second.closed
            assert topics(await second.send(metadata_request("ok"))) == ["ok"]
            assert broker.accepted == 2

    run(backend, scenario)


def test_bootstrap_rotates_past_dead_servers(backend: str) -> None:
    dead = free_port()

    async def scenario() -> None:
        async with FakeBroker(serve) as broker:
            servers = f"127.0.0.1:{dead},{broker.bootstrap}"
            async with ConnectionManager(servers, CONFIG) as mgr:
                conn = await mgr.bootstrap()
                assert conn.port == broker.port and conn.node_id is None
                assert await mgr.bootstrap() is conn  # sticks to the working server
                assert await mgr.least_loaded() is conn  # no nodes known yet

    run(backend, scenario)


def test_bootstrap_goes_past_a_host_name_that_cannot_be_looked_up(backend: str) -> None:
    async def scenario() -> None:
        async with FakeBroker(serve) as broker:
            servers = ["kafka..example.com:9092", "x" * 64 + ".example.com:9092", broker.bootstrap]
            async with ConnectionManager(servers, CONFIG) as mgr:
                conn = await mgr.bootstrap()  # before: a bare UnicodeError, no one else tried
                assert conn.port == broker.port

    run(backend, scenario)


def test_bootstrap_all_dead_lists_every_failure(backend: str) -> None:
    ports = [free_port(), free_port()]

    async def scenario() -> None:
        servers = ",".join(f"127.0.0.1:{p}" for p in ports)
        async with ConnectionManager(servers, CONFIG) as mgr:
            with pytest.raises(KafkaConnectionError) as info:
                await mgr.bootstrap()
        text = str(info.value)
        assert "any of the 2 bootstrap servers" in text
        assert all(f"127.0.0.1:{p}" in text for p in ports)

    run(backend, scenario)


def test_least_loaded_prefers_fewest_in_flight(backend: str) -> None:
    release = anyio.Event()

    async def slow(client: FakeClient) -> None:
        await client.answer_api_versions()
        received = await client.read_request()
        await release.wait()
        await client.respond(received, metadata_response("slow"))
        await echo_metadata(client)

    async def scenario() -> None:
        async with FakeBroker(slow) as b1, FakeBroker(serve) as b2:
            async with ConnectionManager(b1.bootstrap, CONFIG) as mgr:
                mgr.update_nodes({1: (b1.host, b1.port, None), 2: (b2.host, b2.port, None)})
                c1, c2 = await mgr.get(1), await mgr.get(2)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(c1.send, metadata_request("held"))
                    await anyio.wait_all_tasks_blocked()
                    assert c1.in_flight == 1
                    assert await mgr.least_loaded() is c2
                    response = await mgr.send(None, metadata_request("x"))
                    assert response.cluster_id == "fake"  # answered by node 2
                    release.set()

    run(backend, scenario)


def test_idle_connections_are_closed_and_replaced(backend: str) -> None:
    async def scenario() -> None:
        config = ConnectionConfig(connections_max_idle_ms=60_000)
        async with FakeBroker(serve) as broker, ConnectionManager(broker.bootstrap, config) as mgr:
            mgr.update_nodes({1: (broker.host, broker.port, None)})
            conn = await mgr.get(1)
            assert await mgr.maintain() == 0
            assert await mgr.maintain(anyio.current_time() + 61) == 1
            assert conn.closed
            fresh = await mgr.get(1)
            assert fresh is not conn and broker.accepted == 2

    run(backend, scenario)


def test_moved_and_removed_nodes_are_closed(backend: str) -> None:
    async def scenario() -> None:
        async with FakeBroker(serve) as b1, FakeBroker(serve) as b2:
            async with ConnectionManager(b1.bootstrap, CONFIG) as mgr:
                mgr.update_nodes({1: (b1.host, b1.port, None), 2: (b2.host, b2.port, None)})
                old1, old2 = await mgr.get(1), await mgr.get(2)
                mgr.update_nodes({1: (b2.host, b2.port, None)})  # 1 moved, 2 left
                assert mgr.nodes == {1: (b2.host, b2.port, None)}
                assert await mgr.maintain() == 2
                assert old1.closed and old2.closed
                new1 = await mgr.get(1)
                assert new1.port == b2.port
                with pytest.raises(KafkaConnectionError, match="node 2 is not in the cluster"):
                    await mgr.get(2)

    run(backend, scenario)


def test_close_closes_everything(backend: str) -> None:
    async def scenario() -> None:
        async with FakeBroker(serve) as broker:
            mgr = ConnectionManager([broker.bootstrap], CONFIG)
            mgr.update_nodes({1: (broker.host, broker.port, None)})
            boot, node = await mgr.bootstrap(), await mgr.get(1)
            await mgr.close()
            assert boot.closed and node.closed
            for call in (mgr.get(1), mgr.bootstrap(), mgr.least_loaded()):
                with pytest.raises(ClientClosedError, match="client is closed") as info:
                    await call
                assert not info.value.retriable  # retry loops stop at once

    run(backend, scenario)


@pytest.mark.parametrize(
    ("protocol", "mechanism", "warned"),
    [
        ("SASL_PLAINTEXT", "PLAIN", "password"),
        ("SASL_PLAINTEXT", "OAUTHBEARER", "bearer token"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256", None),  # SCRAM never sends the password
        ("SASL_SSL", "PLAIN", None),
    ],
)
def test_credentials_sent_in_clear_are_warned_about(
    protocol: str, mechanism: str, warned: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    credentials: dict[str, object] = (
        {"sasl_oauth_token_provider": lambda: "token"}
        if mechanism == "OAUTHBEARER"
        else {"sasl_plain_username": "alice", "sasl_plain_password": "S3CRET"}
    )
    config = ConnectionConfig(
        security_protocol=protocol, sasl_mechanism=mechanism, **credentials  # type: ignore[arg-type]
    )
    with caplog.at_level(logging.WARNING, logger="kafkaio.net"):
        ConnectionManager("127.0.0.1:9092", config)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    if warned is None:
        assert warnings == []
    else:
        (message,) = warnings
        assert f"sends the {warned} to the brokers unencrypted" in message
        assert "SASL_SSL" in message and "S3CRET" not in message
