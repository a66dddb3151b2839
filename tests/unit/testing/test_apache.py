"""kafkaio.testing.apache without starting a JVM: when Apache Kafka can run here, fetching
the jars once (a fake Maven), and the broker configuration each node gets."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from kafkaio.errors import KafkaConnectionError
from kafkaio.testing import ApacheKafka, BrokerStartError, apache


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(apache.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


FAKE_MAVEN = """\
echo run >> "$(dirname "$0")/calls"
for arg in "$@"; do
  case "$arg" in
    -DoutputDirectory=*) out="${arg#-DoutputDirectory=}" ;;
    -Dkafka.version=*) version="${arg#-Dkafka.version=}" ;;
  esac
done
mkdir -p "$out" && touch "$out/kafka_2.13-$version.jar" "$out/kafka-clients-$version.jar"
"""


def test_the_cache_is_under_the_users_cache_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(apache.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert apache.kafka_home("4.4.0") == tmp_path / "kafkaio" / "apache-kafka-4.4.0"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert apache.kafka_home("4.4.0") == Path.home() / ".cache/kafkaio/apache-kafka-4.4.0"


def test_missing_java_is_the_reason_to_skip(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apache, "find_java", lambda: None)
    reason = apache.unavailable_reason()
    assert reason is not None and reason.startswith("Java not found")


def test_an_old_java_is_the_reason_to_skip(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    java = _script(tmp_path / "java", "echo 'openjdk version \"11.0.2\" 2019-01-15' >&2\n")
    monkeypatch.setattr(apache, "find_java", lambda: java)
    assert (
        apache.unavailable_reason("4.4.0")
        == f"Apache Kafka 4.4.0 needs Java 17+; {java} is Java 11"
    )
    old = _script(tmp_path / "java8", "echo 'java version \"1.8.0_292\"' >&2\n")
    assert apache.java_major_version(old) == 8


def test_missing_maven_matters_only_until_the_jars_are_cached(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    java = _script(tmp_path / "java", "echo 'openjdk version \"17.0.15\" 2025-04-15' >&2\n")
    monkeypatch.setattr(apache, "find_java", lambda: java)
    monkeypatch.setattr(apache, "find_maven", lambda: None)
    reason = apache.unavailable_reason()
    assert reason is not None and reason.startswith("Maven (mvn) not found")
    with pytest.raises(BrokerStartError, match="Maven"):
        apache.fetch_jars()

    maven = _script(tmp_path / "mvn", FAKE_MAVEN)
    monkeypatch.setattr(apache, "find_maven", lambda: maven)
    libs = apache.fetch_jars()
    monkeypatch.setattr(apache, "find_maven", lambda: None)
    assert apache.unavailable_reason() is None
    assert libs == cache / f"apache-kafka-{apache.KAFKA_VERSION}" / "libs"


def test_fetch_runs_maven_once_per_version_and_pom(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    maven = _script(tmp_path / "mvn", FAKE_MAVEN)
    monkeypatch.setattr(apache, "find_maven", lambda: maven)
    assert not apache.jars_cached("4.3.1")
    libs = apache.fetch_jars("4.3.1")
    assert sorted(p.name for p in libs.iterdir()) == [
        "kafka-clients-4.3.1.jar",
        "kafka_2.13-4.3.1.jar",
    ]
    assert apache.fetch_jars("4.3.1") == libs and apache.jars_cached("4.3.1")
    assert (tmp_path / "calls").read_text() == "run\n"
    # an edited pom (other dependencies) is fetched again
    (libs.parent / "libs.complete").write_text("4.3.1 another-pom\n")
    apache.fetch_jars("4.3.1")
    assert (tmp_path / "calls").read_text() == "run\nrun\n"


def test_a_failing_maven_leaves_no_partial_jars(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    maven = _script(tmp_path / "mvn", "echo 'Could not resolve dependencies' ; exit 1\n")
    monkeypatch.setattr(apache, "find_maven", lambda: maven)
    with pytest.raises(BrokerStartError, match="Could not resolve dependencies"):
        apache.fetch_jars("4.3.1")
    assert not apache.jars_cached("4.3.1")
    assert [p.name for p in (cache / "apache-kafka-4.3.1").iterdir()] == [".lock"]


def test_kafka_uuids_look_like_kafkas() -> None:
    ids = {apache.random_kafka_uuid() for _ in range(200)}
    assert len(ids) == 200
    for text in ids:
        assert len(text) == 22 and not text.startswith("-")
        assert set(text) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def _properties(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def test_three_nodes_form_one_quorum_with_replication_three_and_min_isr_two(
    tmp_path: Path,
) -> None:
    cluster = ApacheKafka(3, directory=tmp_path, config={"log.retention.ms": "60000"})
    cluster._prepare_nodes()
    ports = [p for n in cluster.nodes.values() for p in (n.port, n.controller_port)]
    assert len(set(ports)) == 6
    voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in cluster.nodes.values())
    assert cluster.bootstrap == ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes.values())
    for node_id, node in cluster.nodes.items():
        config = _properties(node.config_path)
        assert config["node.id"] == str(node_id)
        assert config["process.roles"] == "broker,controller"
        assert config["controller.quorum.voters"] == voters
        assert config["advertised.listeners"] == f"PLAINTEXT://127.0.0.1:{node.port}"
        assert config["log.dirs"] == str(node.data_dir)
        assert config["default.replication.factor"] == "3"
        assert config["min.insync.replicas"] == "2"
        assert config["offsets.topic.replication.factor"] == "3"
        assert config["transaction.state.log.min.isr"] == "2"
        assert config["log.retention.ms"] == "60000"
        assert str(node.log_path) in (node.directory / "log4j2.properties").read_text()


def test_one_node_has_replication_one() -> None:
    cluster = ApacheKafka(1)
    assert cluster.config["offsets.topic.replication.factor"] == "1"
    assert cluster.config["min.insync.replicas"] == "1"
    assert cluster.heap_mb == 1024 and ApacheKafka(3).heap_mb == 768
    with pytest.raises(ValueError, match="at least 1"):
        ApacheKafka(0)


def test_sasl_users_get_a_sasl_plaintext_listener_with_plain_scram_and_oauthbearer(
    tmp_path: Path,
) -> None:
    cluster = ApacheKafka(1, directory=tmp_path, sasl_users={"alice": "alice-secret"})
    with pytest.raises(KafkaConnectionError, match="start"):
        cluster.bootstrap_for("SASL_PLAINTEXT")
    cluster._prepare_nodes()
    node = cluster.nodes[1]
    assert node.sasl_port is not None and node.sasl_port not in (node.port, node.controller_port)
    assert cluster.bootstrap_for("SASL_PLAINTEXT") == f"127.0.0.1:{node.sasl_port}"
    assert cluster.bootstrap_for("PLAINTEXT") == cluster.bootstrap
    config = _properties(node.config_path)
    assert config["advertised.listeners"] == (
        f"PLAINTEXT://127.0.0.1:{node.port},SASL_PLAINTEXT://127.0.0.1:{node.sasl_port}"
    )
    assert config["listener.security.protocol.map"] == (
        "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
    )
    assert config["sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
    assert (
        'user_alice="alice-secret"' in config["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    )
    assert config[
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"
    ] == (
        "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
        "OAuthBearerUnsecuredValidatorCallbackHandler"
    )
    assert not any("reauth" in key for key in config)
    with pytest.raises(ValueError, match="no SSL listener"):
        cluster.bootstrap_for("SSL")
    with pytest.raises(ValueError, match="letters, digits"):
        ApacheKafka(1, sasl_users={"bob": 'say "hi"'})
    plain = ApacheKafka(1, directory=tmp_path / "plain")
    plain._prepare_nodes()
    assert "SASL" not in _properties(plain.nodes[1].config_path)["listeners"]
    with pytest.raises(ValueError, match="no SASL_PLAINTEXT listener; this cluster has PLAINTEXT"):
        plain.bootstrap_for("SASL_PLAINTEXT")


def test_a_reauth_listener_ends_sessions_and_a_keystore_gives_a_tls_listener(
    tmp_path: Path,
) -> None:
    keystore = tmp_path / "server-keystore.pem"
    cluster = ApacheKafka(
        1,
        directory=tmp_path,
        sasl_users={"alice": "alice-secret"},
        sasl_session_ms=5000,
        tls_keystore=keystore,
    )
    assert cluster.listeners == ["PLAINTEXT", "SASL_PLAINTEXT", "REAUTH", "SSL"]
    cluster._prepare_nodes()
    node = cluster.nodes[1]
    ports = [node.port, node.controller_port, *node.listener_ports.values()]
    assert len(set(ports)) == 5
    assert cluster.bootstrap_for("SSL") == f"127.0.0.1:{node.listener_ports['SSL']}"
    config = _properties(node.config_path)
    assert config["listener.security.protocol.map"] == (
        "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,REAUTH:SASL_PLAINTEXT,SSL:SSL,"
        "CONTROLLER:PLAINTEXT"
    )
    assert config["listener.name.reauth.connections.max.reauth.ms"] == "5000"
    assert "connections.max.reauth.ms" not in config  # the other listeners' sessions last
    assert "ScramLoginModule" in config["listener.name.reauth.scram-sha-512.sasl.jaas.config"]
    assert config["listener.name.ssl.ssl.keystore.type"] == "PEM"
    assert config["listener.name.ssl.ssl.keystore.location"] == str(keystore)
    with pytest.raises(ValueError, match="sasl_session_ms needs sasl_users"):
        ApacheKafka(1, sasl_session_ms=5000)
    with pytest.raises(ValueError, match="at least 1000"):
        ApacheKafka(1, sasl_users={"a": "b"}, sasl_session_ms=999)


def test_the_class_archive_is_keyed_by_java_and_jars(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    java17 = _script(tmp_path / "java17", "echo 'openjdk version \"17.0.15\"' >&2\n")
    java21 = _script(tmp_path / "java21", "echo 'openjdk version \"21.0.2\"' >&2\n")
    monkeypatch.setattr(apache, "find_java", lambda: java17)
    first = apache.class_archive_path("4.4.0")
    assert first is not None and first.parent == cache / "apache-kafka-4.4.0"
    assert first.name.startswith("broker-") and first.suffix == ".jsa"
    assert apache.class_archive_path("4.4.0") == first
    assert apache.class_archive_path("4.3.1") != first
    monkeypatch.setattr(apache, "find_java", lambda: java21)
    assert apache.class_archive_path("4.4.0") != first
    monkeypatch.setattr(apache, "find_java", lambda: None)
    assert apache.class_archive_path("4.4.0") is None
    assert apache.build_class_archive("4.4.0") is None


def test_fetching_new_jars_drops_the_old_class_archives(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(apache, "find_maven", lambda: _script(tmp_path / "mvn", FAKE_MAVEN))
    home = cache / "apache-kafka-4.3.1"
    home.mkdir(parents=True)
    (home / "broker-0123456789abcdef.jsa").write_bytes(b"old")
    apache.fetch_jars("4.3.1")
    assert not list(home.glob("*.jsa"))
