"""A broker whose metadata or SASL answers are hostile: a node on port 70000 or -1 or with a NUL
in its host name, a SCRAM iteration count of 2**31, a token provider that fails on a later
connection, a peer that speaks HTTP. Each is a typed KafkaError on that connection, retried
where retrying can help; the network task survives, the client works again once the broker
behaves, and close() is clean (before: OverflowError or ValueError ended the network task,
getmany raised CancelledError then DriverStoppedError, close() an ExceptionGroup).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from kafkaio import Consumer, Producer, TopicPartition
from kafkaio.errors import (
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
    SaslAuthenticationFailedError,
)
from kafkaio.integrations import ConsumerRunner
from tests.chaos._fake_cluster import OFFSET, FakeCluster
from tests.leaks._silent_broker import TOPIC, SilentBroker
from tests.unit.net._fake_broker import LoopbackServer

TP = TopicPartition(TOPIC, 0)
FAST = dict(
    request_timeout_ms=800,
    default_api_timeout_ms=1000,
    retry_backoff_ms=20,
    retry_backoff_max_ms=50,
    reconnect_backoff_ms=20,
    reconnect_backoff_max_ms=50,
    metadata_max_age_ms=100,
)
GUARD_S = 20


def run(scenario: Callable[[], Awaitable[None]], backend: str = "asyncio") -> None:
    async def guarded() -> None:
        with anyio.fail_after(GUARD_S):
            await scenario()

    anyio.run(guarded, backend=backend)


def _driver_alive(consumer: Consumer) -> bool:
    driver = consumer._driver
    return driver is not None and driver.running and driver.fatal_error is None


CONSUMER = dict(FAST, fetch_max_wait_ms=100)
@pytest.mark.parametrize(
    ("address", "what"),
    [
        (("127.0.0.1", 70000), "port 70000 is not in 1-65535"),
        (("127.0.0.1", -1), "port -1 is not in 1-65535"),
        (("bro\x00ker", 9092), "is not a valid host name"),
    ],
    ids=["port-70000", "port-minus-1", "nul-in-host"],
)
def test_a_node_no_socket_can_reach_fails_calls_not_the_client(
    address: tuple[str, int], what: str
) -> None:
    async def scenario() -> None:
        async with FakeCluster() as cluster:
            async with Consumer(bootstrap_servers=cluster.bootstrap, **CONSUMER) as consumer:
                cluster.node_address = address
                consumer.assign([TP])
                await anyio.sleep(0.3)  # the next metadata refresh names the bad node
                with pytest.raises(KafkaTimeoutError) as info:
                    await consumer.end_offsets([TP], timeout_ms=800)
                assert what in str(info.value)  # the timeout says why
                assert await consumer.getmany(timeout_ms=100) == {}
                assert _driver_alive(consumer)
                cluster.node_address = None  # the broker behaves again: so does the client
                assert await consumer.end_offsets([TP], timeout_ms=5000) == {TP: OFFSET}

    run(scenario)


def test_a_scram_iteration_count_past_the_maximum_is_an_authentication_error() -> None:
    # 2**31 iterations made PBKDF2 raise OverflowError in the network task; 10 million froze
    # the event loop for 5 s. Above sasl_scram_max_iterations (16384) the broker is refused.
    async def scenario() -> None:
        async with FakeCluster() as cluster:
            # within the maximum (16384), PBKDF2 runs and the password-less fake refuses
            for iterations, refusal in (
                (2**31, "more than the maximum"),
                (10_000_000, "more than the maximum"),
                (16385, "more than the maximum"),
                (16384, "no such user"),
            ):
                cluster.scram_iterations = iterations
                consumer = Consumer(
                    bootstrap_servers=cluster.bootstrap,
                    security_protocol="SASL_PLAINTEXT",
                    sasl_mechanism="SCRAM-SHA-256",
                    sasl_plain_username="alice",
                    sasl_plain_password="s3cret",
                    **CONSUMER,
                )
                with pytest.raises(SaslAuthenticationFailedError, match=refusal):
                    await consumer.start()
                await consumer.close()  # clean: no ExceptionGroup

    run(scenario)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_token_provider_that_fails_on_a_later_connection_is_retried(backend: str) -> None:
    # docs/how-to/security.md's pattern: a provider calling an identity provider over HTTP,
    # which fails now and then. Its error on the node connection is retried after a backoff.
    calls: list[int] = []

    async def provider() -> str:
        calls.append(1)
        if len(calls) in (2, 3):  # the bootstrap connection got a token; the next two fail
            raise ConnectionResetError("identity provider: HTTP 503")
        return "token"

    async def scenario() -> None:
        async with FakeCluster() as cluster:
            async with oauth_consumer(cluster, provider) as consumer:
                consumer.assign([TP])
                assert await consumer.end_offsets([TP], timeout_ms=5000) == {TP: OFFSET}
                assert len(calls) >= 4 and cluster.authenticated >= 2
                assert _driver_alive(consumer)

    run(scenario, backend)


def test_an_authentication_error_on_a_later_connection_is_raised_then_recovered() -> None:
    # a non-retriable error setting up a connection (here: the token provider refuses) is
    # raised by the calls that need it; the network task goes on, the connection is tried
    # again after the backoff, and the client works again once the cause is gone
    async def scenario() -> None:
        async with FakeCluster() as cluster:
            refuse = threading.Event()

            async def provider() -> str:
                if refuse.is_set():
                    raise SaslAuthenticationFailedError("the identity provider refused")
                return "token"

            async with oauth_consumer(cluster, provider) as consumer:
                refuse.set()  # from now on, new connections are refused
                consumer.assign([TP])
                with pytest.raises(KafkaError) as info:
                    await consumer.end_offsets([TP], timeout_ms=1000)
                assert "the identity provider refused" in str(info.value)
                with pytest.raises(SaslAuthenticationFailedError):
                    await consumer.getmany(timeout_ms=200)
                assert _driver_alive(consumer)
                refuse.clear()  # fixed
                assert await consumer.end_offsets([TP], timeout_ms=5000) == {TP: OFFSET}
                assert await consumer.getmany(timeout_ms=50) == {}

    run(scenario)


def oauth_consumer(cluster: FakeCluster, provider: Callable[[], Awaitable[str]]) -> Consumer:
    return Consumer(
        bootstrap_servers=cluster.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=provider,
        **CONSUMER,
    )


class HttpServer(LoopbackServer):
    """Answers whatever it reads with an HTTP 400 response, as a web server on the port."""

    async def _serve(self, stream: Any) -> None:
        try:
            await stream.receive()
            await stream.send(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            await anyio.aclose_forcefully(stream)


@pytest.mark.parametrize("client", ["consumer", "producer"])
def test_a_bootstrap_server_that_speaks_http_is_named_at_once(client: str) -> None:
    # it failed after default_api_timeout_ms (60 s) with "last error: None"
    async def scenario() -> None:
        async with HttpServer() as server:
            if client == "consumer":
                made: Any = Consumer(bootstrap_servers=server.bootstrap, **CONSUMER)
            else:
                options = {k: v for k, v in FAST.items() if k != "default_api_timeout_ms"}
                made = Producer(server.bootstrap, max_block_ms=60_000, **options)
            with anyio.fail_after(5):
                with pytest.raises(KafkaProtocolError, match="HTTP") as info:
                    await made.start()
            assert "speak the Kafka protocol" in str(info.value)
            await made.close()

    run(scenario)


@pytest.mark.parametrize("make", ["producer", "consumer", "runner"])
@pytest.mark.parametrize("delay", [0, 0.001, 0.05])
def test_close_under_a_cancel_scope_is_clean(make: str, delay: float) -> None:
    # close() inside anyio.move_on_after raised RuntimeError (a task group entered by start()
    # was exited inside the caller's new cancel scope)
    async def scenario() -> None:
        async with SilentBroker() as broker:
            if make == "producer":
                options = {k: v for k, v in FAST.items() if k != "default_api_timeout_ms"}
                client: Any = Producer(broker.bootstrap, **options)
            elif make == "consumer":
                client = Consumer(bootstrap_servers=broker.bootstrap, **CONSUMER)
            else:
                consumer = Consumer(bootstrap_servers=broker.bootstrap, **CONSUMER)
                runner = ConsumerRunner(consumer, lambda record: None)
                await runner.start()
                with anyio.move_on_after(delay):
                    await runner.stop()
                await runner.stop()
                return
            await client.start()
            with anyio.move_on_after(delay):
                await client.close()
            await client.close()  # a second close is a no-op

    run(scenario)
