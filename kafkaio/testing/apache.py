"""Apache Kafka for tests: the broker's jars fetched by Maven, KRaft nodes on 127.0.0.1.

``fetch_jars()`` resolves ``apache_kafka/pom.xml`` (kafka_2.13, kafka-tools and a log4j
binding, with their runtime dependencies) into ``~/.cache/kafkaio/apache-kafka-VERSION/libs``
once; ``ApacheKafka(brokers=N).start()`` formats and starts N combined broker+controller
JVMs (a KRaft quorum of N voters) on free loopback ports, waits until every broker answers
Metadata with all N registered, and offers the faults tests inject: ``kill`` (SIGKILL),
``pause``/``resume`` (SIGSTOP/SIGCONT), ``shutdown`` (clean), ``start_broker``,
``restart``, ``move_leader`` and ``elect_preferred_leaders`` (Kafka's own tools).

Only the processes started here are signalled (each JVM leads its own process group); they
are killed when this process exits (atexit) or dies (Linux PR_SET_PDEATHSIG).

Command line: ``python -m kafkaio.testing fetch-kafka`` (what ``make kafka-jars`` runs) and
``python -m kafkaio.testing run-kafka [--brokers N]`` (a cluster until Ctrl-C).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kafkaio.errors import KafkaConnectionError, KafkaProtocolError
from kafkaio.testing._lifecycle import StartStop
from kafkaio.testing._probe import MetadataAnswer, api_versions, free_loopback_port, metadata
from kafkaio.testing._process import popen_tied
from kafkaio.testing.errors import BrokerStartError

__all__ = [
    "KAFKA_VERSION",
    "ApacheKafka",
    "KafkaNode",
    "build_class_archive",
    "fetch_jars",
    "jars_cached",
    "kafka_home",
    "unavailable_reason",
]

KAFKA_VERSION = "4.4.0"  # keep equal to kafka.version in apache_kafka/pom.xml
MIN_JAVA = 17
CACHE_ENV = "KAFKAIO_CACHE_DIR"
POM = Path(__file__).resolve().parent / "apache_kafka" / "pom.xml"
_LOG_TAIL_CHARS = 4000
_CLASSPATH_MAIN = "kafka.Kafka"
_STORAGE_TOOL = "kafka.tools.StorageTool"
_REASSIGN_TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
_ELECTION_TOOL = "org.apache.kafka.tools.LeaderElectionCommand"
_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# Kafka's validator of unsecured JWS tokens ({"alg": "none"}; the principal is "sub"): for
# tests only, as Kafka's documentation says.
_UNSECURED_VALIDATOR = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
    "OAuthBearerUnsecuredValidatorCallbackHandler"
)
#: The SASL_PLAINTEXT listener whose sessions end after ``sasl_session_ms`` (KIP-368).
REAUTH_LISTENER = "REAUTH"
_PROTOCOLS = {
    "PLAINTEXT": "PLAINTEXT",
    "SASL_PLAINTEXT": "SASL_PLAINTEXT",
    REAUTH_LISTENER: "SASL_PLAINTEXT",
    "SSL": "SSL",
}
_JVM_OPTIONS = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)

# Broker settings for tests on a small machine: quick group and transaction coordinators
# (few internal partitions, no initial rebalance delay), short heartbeats and minimum
# session / lock timeouts so tests may ask for short ones, leaders that move only when a
# test moves them, brokers fenced 3 s after they stop heartbeating. ACLs work (the
# standard authorizer) and the unauthenticated PLAINTEXT user may do everything.
TEST_CONFIG: dict[str, str] = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
    "allow.everyone.if.no.acl.found": "true",
    "num.partitions": "1",
    "auto.create.topics.enable": "true",
    "auto.leader.rebalance.enable": "false",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.num.partitions": "5",
    "share.coordinator.state.topic.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.share.heartbeat.interval.ms": "500",
    "group.share.min.heartbeat.interval.ms": "100",
    "group.share.session.timeout.ms": "10000",
    "group.share.min.session.timeout.ms": "1000",
    "group.share.min.record.lock.duration.ms": "1000",
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "5000",
    "log.cleaner.dedupe.buffer.size": str(16 << 20),
    "num.network.threads": "2",
    "num.io.threads": "4",
    "num.recovery.threads.per.data.dir": "1",
}

_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.state.name = state.change.logger
logger.state.level = WARN
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


# -- the jars -------------------------------------------------------------------------------


def cache_root() -> Path:
    """``$KAFKAIO_CACHE_DIR``, else ``$XDG_CACHE_HOME/kafkaio``, else ``~/.cache/kafkaio``."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kafkaio"


def kafka_home(version: str = KAFKA_VERSION) -> Path:
    """Where Apache Kafka ``version`` is cached; its jars are in ``libs/``."""
    return cache_root() / f"apache-kafka-{version}"


def _stamp_text(version: str) -> str:
    return f"{version} {hashlib.sha256(POM.read_bytes()).hexdigest()}\n"


def jars_cached(version: str = KAFKA_VERSION) -> bool:
    """Whether ``fetch_jars(version)`` completed with the current pom."""
    stamp = kafka_home(version) / "libs.complete"
    try:
        return stamp.read_text() == _stamp_text(version)
    except OSError:
        return False


def find_java() -> str | None:
    """``$JAVA_HOME/bin/java`` when it exists, else ``java`` on PATH, else None."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def find_maven() -> str | None:
    """``mvn`` on PATH, else None."""
    return shutil.which("mvn")


@functools.lru_cache(maxsize=8)
def _java_version_text(java: str) -> str | None:
    try:
        done = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stderr + done.stdout


def java_major_version(java: str) -> int | None:
    """The major version ``java -version`` reports (8 for "1.8.0"), or None if it does not run."""
    text = _java_version_text(java)
    found = re.search(r'version "(\d+)(?:\.(\d+))?', text or "")
    if found is None:
        return None
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major


def unavailable_reason(version: str = KAFKA_VERSION) -> str | None:
    """None when Apache Kafka ``version`` can run here, else why not (for a skip message)."""
    java = find_java()
    if java is None:
        return f"Java not found: Apache Kafka needs a JDK {MIN_JAVA}+ (java on PATH or JAVA_HOME)"
    major = java_major_version(java)
    if major is None:
        return f"{java} -version does not run or names no version"
    if major < MIN_JAVA:
        return f"Apache Kafka {version} needs Java {MIN_JAVA}+; {java} is Java {major}"
    if not jars_cached(version) and find_maven() is None:
        return (
            f"Maven (mvn) not found and the Apache Kafka {version} jars are not cached in "
            f"{kafka_home(version) / 'libs'}: install Maven (it fetches them from Maven Central)"
        )
    return None


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def fetch_jars(version: str = KAFKA_VERSION, *, timeout: float = 900.0) -> Path:
    """Resolve Apache Kafka ``version``'s jars with Maven into the cache; return ``libs/``.

    Idempotent and quick when cached (a stamp records the version and the pom's digest);
    concurrent callers wait for each other. Raises BrokerStartError with Maven's output
    when Maven is missing or fails.
    """
    home = kafka_home(version)
    libs = home / "libs"

    def fetch() -> None:
        maven_copy_dependencies(
            POM,
            libs,
            {"kafka.version": version},
            expect=f"kafka_2.13-{version}.jar",
            what=f"Apache Kafka {version}",
            timeout=timeout,
        )
        for stale in home.glob("broker-*.jsa"):  # class archives of the old jars
            stale.unlink()
        (home / "libs.complete").write_text(_stamp_text(version))

    fetch_once(home, lambda: jars_cached(version), fetch)
    return libs


def fetch_once(home: Path, cached: Callable[[], bool], fetch: Callable[[], None]) -> None:
    """Run ``fetch`` unless ``cached()``; concurrent callers (other processes too) wait for
    each other on a lock file in ``home`` and fetch once."""
    if cached():
        return
    with _file_lock(home / ".lock"):
        if not cached():
            fetch()


def maven_copy_dependencies(
    pom: Path,
    target: Path,
    properties: Mapping[str, str],
    *,
    expect: str,
    what: str,
    timeout: float,
) -> None:
    """Resolve ``pom``'s runtime dependencies with Maven into ``target``, replacing it only
    once Maven succeeded and ``expect`` (a jar file name) is among them. Raises
    BrokerStartError with Maven's output when Maven is missing, fails or times out."""
    mvn = find_maven()
    if mvn is None:
        raise BrokerStartError(f"Maven (mvn) not found: it fetches {what} into {target}")
    staging = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    command = [
        mvn,
        "-q",
        "-B",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={staging}",
        *(f"-D{k}={v}" for k, v in properties.items()),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise BrokerStartError(f"Maven did not fetch {what} within {timeout:.0f} s") from exc
    if done.returncode != 0 or not (staging / expect).exists():
        shutil.rmtree(staging, ignore_errors=True)
        output = (done.stdout + done.stderr)[-_LOG_TAIL_CHARS:]
        raise BrokerStartError(
            f"Maven could not fetch {what} (exit {done.returncode}; {' '.join(command)}):\n"
            f"{output}"
        )
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)


def class_archive_path(version: str = KAFKA_VERSION) -> Path | None:
    """Where the broker's class-data-sharing archive for this Java and these jars lives
    (None when Java cannot be found). See ``build_class_archive``."""
    java = find_java()
    text = _java_version_text(java) if java is not None else None
    if text is None:
        return None
    key = hashlib.sha256(f"{java}\n{text}\n{_stamp_text(version)}".encode())
    return kafka_home(version) / f"broker-{key.hexdigest()[:16]}.jsa"


def build_class_archive(version: str = KAFKA_VERSION) -> Path | None:
    """Record the classes a broker loads into a class-data-sharing archive (JDK 13+
    ``-XX:ArchiveClassesAtExit``) next to the jars, once: later brokers map it instead of
    loading and verifying those classes, which cuts a node's start-up CPU by about a third.

    Starts and cleanly stops one broker (a few seconds); returns the archive, or None when
    Java is missing or the JVM wrote none. ``make kafka-jars`` calls it; brokers started
    without it work the same, only slower to start.
    """
    archive = class_archive_path(version)
    if archive is None or archive.exists():
        return archive
    with _file_lock(kafka_home(version) / ".lock"):
        if archive.exists():
            return archive
        partial = archive.with_name(f"{archive.stem}-{os.getpid()}.partial")
        cluster = ApacheKafka(1, version=version)
        cluster._class_archive_options = (f"-XX:ArchiveClassesAtExit={partial}",)
        try:
            cluster.start()
            cluster.shutdown(1)  # the archive is written at a clean exit
        finally:
            cluster.stop()
        if not partial.exists() or partial.stat().st_size == 0:
            partial.unlink(missing_ok=True)
            return None
        partial.rename(archive)
    return archive


def random_kafka_uuid() -> str:
    """A Kafka Uuid string (URL-safe base64 of 16 random bytes), not starting with '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


# -- one node -------------------------------------------------------------------------------


@dataclass(eq=False)
class KafkaNode:
    """One combined broker+controller JVM of an ApacheKafka cluster."""

    node_id: int
    port: int
    controller_port: int
    directory: Path
    listener_ports: dict[str, int] = field(default_factory=dict)  # beside PLAINTEXT's
    process: subprocess.Popen[bytes] | None = None
    paused: bool = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_port(self) -> int | None:
        """The SASL_PLAINTEXT listener's port (None without ``sasl_users``)."""
        return self.listener_ports.get("SASL_PLAINTEXT")

    @property
    def log_path(self) -> Path:
        """The broker's log4j log (kept across restarts of this node)."""
        return self.directory / "server.log"

    @property
    def stdout_path(self) -> Path:
        """The JVM's own stdout/stderr (start-up failures before logging works)."""
        return self.directory / "stdout.log"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def running(self) -> bool:
        """The JVM is alive (it may be paused)."""
        return self.process is not None and self.process.poll() is None

    def log_tail(self, chars: int = _LOG_TAIL_CHARS) -> str:
        """The end of the JVM's output and of its server.log."""
        parts: list[str] = []
        for path in (self.stdout_path, self.log_path):
            with contextlib.suppress(OSError):
                with open(path, "rb") as handle:
                    handle.seek(max(0, path.stat().st_size - chars))
                    text = handle.read().decode("utf-8", "replace").strip()
                if text:
                    parts.append(f"--- {path}:\n{text}")
        return "\n".join(parts) or "(no output)"

    def signal(self, sig: int) -> None:
        """Send ``sig`` to this node's JVM (its own process group) if it is alive."""
        if self.running:
            assert self.process is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)


# -- the cluster ----------------------------------------------------------------------------

_LIVE: weakref.WeakSet[ApacheKafka] = weakref.WeakSet()


def _stop_all_at_exit() -> None:
    for cluster in list(_LIVE):
        with contextlib.suppress(Exception):
            cluster.stop()


atexit.register(_stop_all_at_exit)


def live_clusters() -> list[ApacheKafka]:
    """Every ApacheKafka started in this process and not stopped yet."""
    return list(_LIVE)


class ApacheKafka(StartStop):
    """``brokers`` Apache Kafka nodes in KRaft combined mode (broker ids 1..N) on 127.0.0.1.

    Every node is a voter of the controller quorum, so a cluster of 3 keeps working with one
    node down. With more than one broker, topics default to replication factor
    ``min(3, brokers)`` and ``min.insync.replicas`` one less (2 for 3 brokers), internal
    topics too. ``config`` overrides broker settings (TEST_CONFIG and the above).
    ``directory`` holds one sub-directory per node (server.properties, server.log,
    stdout.log, data/); by default a temporary directory deleted by ``stop()`` unless
    ``keep_directory``; a given ``directory`` keeps the logs and loses only data/.

    Clients connect to the PLAINTEXT listener (``bootstrap``) as the super user
    ``User:ANONYMOUS``. With ``sasl_users`` ({name: password}), a SASL_PLAINTEXT listener
    (``bootstrap_for("SASL_PLAINTEXT")``) also accepts those users with PLAIN, SCRAM-SHA-256
    and SCRAM-SHA-512, and any principal with OAUTHBEARER and an unsecured JWS token (Kafka's
    unsecured validator: ``kafkaio.testing.security.unsecured_jwt`` makes one); they are ordinary
    users, subject to ACLs (the standard authorizer runs, and allows what no ACL mentions).
    With ``sasl_session_ms`` too, a second such listener, ``REAUTH``, ends every SASL session
    after that many milliseconds (``connections.max.reauth.ms``): clients must re-authenticate
    (KIP-368) or the broker closes their connection at its next request. With
    ``tls_keystore`` (a PEM file holding the private key and certificate chain, e.g.
    ``kafkaio.testing.security.make_certificates(...).keystore``), an SSL listener serves TLS.
    """

    def __init__(
        self,
        brokers: int = 1,
        *,
        version: str = KAFKA_VERSION,
        directory: Path | str | None = None,
        heap_mb: int | None = None,
        config: Mapping[str, str] | None = None,
        start_timeout: float = 120.0,
        keep_directory: bool = False,
        sasl_users: Mapping[str, str] | None = None,
        sasl_session_ms: int | None = None,
        tls_keystore: Path | str | None = None,
    ) -> None:
        if brokers < 1:
            raise ValueError(f"brokers must be at least 1, not {brokers}")
        if sasl_session_ms is not None and (not sasl_users or sasl_session_ms < 1000):
            raise ValueError(
                "sasl_session_ms needs sasl_users and must be at least 1000 (Kafka lets a "
                f"connection re-authenticate at most once a second), not {sasl_session_ms}"
            )
        self.sasl_session_ms = sasl_session_ms
        self.tls_keystore = Path(tls_keystore) if tls_keystore is not None else None
        self.sasl_users = dict(sasl_users or {})
        for name, password in self.sasl_users.items():
            if not re.fullmatch(r"[A-Za-z0-9._-]+", name + password):
                raise ValueError(
                    f"SASL user {name!r}: names and passwords may hold only letters, digits "
                    "and ._- (they are written into JAAS and storage-tool arguments)"
                )
        self.brokers = brokers
        self.version = version
        self.heap_mb = heap_mb or (1024 if brokers == 1 else 768)
        self.start_timeout = start_timeout
        self.keep_directory = keep_directory
        self._given_directory = Path(directory) if directory is not None else None
        self.directory: Path | None = None
        self.config = self._base_config() | dict(config or {})
        self.cluster_id = random_kafka_uuid()
        self.nodes: dict[int, KafkaNode] = {}
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.start_seconds: float | None = None
        self._lock = threading.RLock()
        self._class_archive_options: tuple[str, ...] | None = None  # None: use the archive

    # -- properties ---------------------------------------------------------------------

    @property
    def broker_ids(self) -> list[int]:
        return list(range(1, self.brokers + 1))

    @property
    def bootstrap(self) -> str:
        """Every node's client listener, "127.0.0.1:P1,127.0.0.1:P2,..." (valid once started)."""
        if not self.nodes:
            raise KafkaConnectionError("ApacheKafka has no ports yet; call start() first")
        return ",".join(node.bootstrap for node in self.nodes.values())

    @property
    def listeners(self) -> list[str]:
        """The client listeners: PLAINTEXT, then SASL_PLAINTEXT and REAUTH (``sasl_users``,
        ``sasl_session_ms``) and SSL (``tls_keystore``) as configured."""
        names = ["PLAINTEXT"]
        if self.sasl_users:
            names.append("SASL_PLAINTEXT")
            if self.sasl_session_ms is not None:
                names.append(REAUTH_LISTENER)
        if self.tls_keystore is not None:
            names.append("SSL")
        return names

    def bootstrap_for(self, listener: str = "PLAINTEXT") -> str:
        """The bootstrap list of a listener (one of ``listeners``)."""
        if listener not in self.listeners:
            raise ValueError(
                f"no {listener} listener; this cluster has {', '.join(self.listeners)}"
            )
        if listener == "PLAINTEXT":
            return self.bootstrap
        if not self.nodes:
            raise KafkaConnectionError("ApacheKafka has no ports yet; call start() first")
        return ",".join(
            f"127.0.0.1:{node.listener_ports[listener]}" for node in self.nodes.values()
        )

    @property
    def libs(self) -> Path:
        return kafka_home(self.version) / "libs"

    @property
    def running(self) -> bool:
        return any(node.running for node in self.nodes.values())

    def node(self, broker_id: int) -> KafkaNode:
        try:
            return self.nodes[broker_id]
        except KeyError:
            raise ValueError(
                f"no broker {broker_id} in this cluster; its brokers are {self.broker_ids}"
            ) from None

    def log_paths(self) -> list[Path]:
        return [node.log_path for node in self.nodes.values()]

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        where = self.bootstrap if self.nodes else "no ports"
        return f"ApacheKafka({self.version}, brokers={self.brokers}, {where}, {state})"

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> ApacheKafka:
        """Fetch the jars if needed, format and start every node, wait until all are
        registered; return self. ``start_seconds`` is the time it took (jars excluded).

        Raises BrokerStartError with the nodes' log tails when a node exits or the cluster
        is not ready within ``start_timeout`` s. Ports taken by another process between
        choosing and binding are chosen again (three attempts).
        """
        with self._lock:
            if self.running:
                raise BrokerStartError(f"{self!r} is already running")
            reason = unavailable_reason(self.version)
            if reason is not None:
                raise BrokerStartError(f"cannot start Apache Kafka: {reason}")
            fetch_jars(self.version)
            began = time.monotonic()
            for attempt in range(3):
                self._prepare_nodes()
                _LIVE.add(self)
                try:
                    self._format()
                    for node in self.nodes.values():
                        self._launch(node)
                    self._wait_ready(self.broker_ids, time.monotonic() + self.start_timeout)
                except BrokerStartError as exc:
                    self._kill_all()
                    if attempt == 2 or "Address already in use" not in str(exc):
                        self._remove_data()
                        raise
                except BaseException:  # interrupted: leave no JVM behind
                    self.stop()
                    raise
                else:
                    self.start_seconds = time.monotonic() - began
                    return self
            raise AssertionError("unreachable")

    def stop(self) -> None:
        """Kill every node (SIGKILL to its process group) and delete the data.

        The cluster is thrown away, so nothing is shut down gracefully; ``shutdown`` is the
        clean stop of one broker.
        """
        with self._lock:
            self._kill_all()
            _LIVE.discard(self)
            self._remove_data()

    # -- faults ---------------------------------------------------------------------------

    def kill(self, broker_id: int, timeout: float = 10.0) -> None:
        """kill -9 the node: no controlled shutdown; the controller fences it after
        broker.session.timeout.ms (3 s) and its partitions get new leaders.
        """
        node = self.node(broker_id)
        node.signal(signal.SIGKILL)
        self._reap(node, timeout)

    def pause(self, broker_id: int) -> None:
        """SIGSTOP the node: connections stay open and nothing answers until ``resume``."""
        node = self.node(broker_id)
        if not node.running:
            raise BrokerStartError(f"broker {broker_id} is not running; it cannot be paused")
        node.signal(signal.SIGSTOP)
        node.paused = True

    def resume(self, broker_id: int) -> None:
        """SIGCONT a paused node."""
        node = self.node(broker_id)
        node.signal(signal.SIGCONT)
        node.paused = False

    def shutdown(self, broker_id: int, timeout: float = 60.0) -> None:
        """Stop the node cleanly (SIGTERM: controlled shutdown moves its leaders first);
        SIGKILL if it has not exited within ``timeout`` s.
        """
        node = self.node(broker_id)
        if node.paused:
            self.resume(broker_id)
        node.signal(signal.SIGTERM)
        try:
            self._reap(node, timeout)
        except BrokerStartError:
            node.signal(signal.SIGKILL)
            self._reap(node, 10.0)

    def start_broker(self, broker_id: int, *, wait: bool = True) -> None:
        """Start a node that was killed or shut down, on its old ports and data; with
        ``wait``, return once every running node lists it in Metadata.
        """
        with self._lock:
            node = self.node(broker_id)
            if node.running:
                raise BrokerStartError(f"broker {broker_id} is already running")
            self._launch(node)
            if wait:
                ids = [n.node_id for n in self.nodes.values() if n.running and not n.paused]
                self._wait_ready(ids, time.monotonic() + self.start_timeout)

    def restart(self, broker_id: int, *, clean: bool = True) -> None:
        """``shutdown`` (or ``kill`` with ``clean=False``) then ``start_broker``."""
        if clean:
            self.shutdown(broker_id)
        else:
            self.kill(broker_id)
        self.start_broker(broker_id)

    def heal(self) -> None:
        """Resume paused nodes, start stopped ones and wait until all are registered."""
        with self._lock:
            for node in self.nodes.values():
                if node.paused:
                    self.resume(node.node_id)
            stopped = [node for node in self.nodes.values() if not node.running]
            for node in stopped:
                self._launch(node)
            self._wait_ready(self.broker_ids, time.monotonic() + self.start_timeout)

    # -- metadata and leaders -------------------------------------------------------------

    def metadata(self, topics: list[str] | None = None, timeout: float = 5.0) -> MetadataAnswer:
        """Metadata v1 from the first running, unpaused node that answers."""
        errors: list[str] = []
        for node in self.nodes.values():
            if node.running and not node.paused:
                try:
                    return metadata("127.0.0.1", node.port, topics, timeout)
                except (KafkaConnectionError, KafkaProtocolError) as exc:
                    errors.append(str(exc))
        raise KafkaConnectionError(
            f"no broker of {self!r} answered Metadata: {'; '.join(errors) or 'none is up'}"
        )

    def leader(self, topic: str, partition: int = 0) -> int:
        """The partition's leader as the cluster reports it now (-1: none)."""
        state = self.metadata([topic]).topics.get(topic, {}).get(partition)
        return state.leader if state is not None else -1

    def wait_for_leader(
        self,
        topic: str,
        partition: int = 0,
        *,
        among: Sequence[int] | None = None,
        timeout: float = 30.0,
    ) -> int:
        """Wait until the partition has a leader (one of ``among`` if given); return it."""
        deadline = time.monotonic() + timeout
        leader = -1
        while time.monotonic() < deadline:
            with contextlib.suppress(KafkaConnectionError, KafkaProtocolError):
                leader = self.leader(topic, partition)
                if leader >= 0 and (among is None or leader in among):
                    return leader
            time.sleep(0.1)
        raise BrokerStartError(
            f"{topic}-{partition} has leader {leader} after {timeout} s, expected one of "
            f"{list(among) if among is not None else 'any broker'}"
        )

    def move_leader(
        self, topic: str, partition: int, broker_id: int, *, timeout: float = 60.0
    ) -> None:
        """Make ``broker_id`` the partition's leader with Kafka's own tools: reorder the
        replicas so it is the preferred one (kafka-reassign-partitions), then run a
        preferred leader election (kafka-leader-election). It must be an in-sync replica.
        """
        state = self.metadata([topic]).topics.get(topic, {}).get(partition)
        if state is None:
            raise BrokerStartError(f"{topic}-{partition} is not in the cluster's metadata")
        if broker_id not in state.replicas:
            raise BrokerStartError(
                f"broker {broker_id} holds no replica of {topic}-{partition} "
                f"(replicas {list(state.replicas)})"
            )
        if state.leader == broker_id:
            return
        if state.replicas[0] != broker_id:
            order = [broker_id] + [r for r in state.replicas if r != broker_id]
            plan = {
                "version": 1,
                "partitions": [{"topic": topic, "partition": partition, "replicas": order}],
            }
            assert self.directory is not None
            plan_file = self.directory / f"reassign-{uuid.uuid4().hex[:8]}.json"
            plan_file.write_text(json.dumps(plan))
            self.run_tool(_REASSIGN_TOOL, "--reassignment-json-file", str(plan_file), "--execute")
            deadline = time.monotonic() + timeout
            while self.metadata([topic]).topics[topic][partition].replicas[0] != broker_id:
                if time.monotonic() > deadline:
                    raise BrokerStartError(f"reordering the replicas of {topic}-{partition} hung")
                time.sleep(0.1)
        self.elect_preferred_leaders(topic, partition)
        self.wait_for_leader(topic, partition, among=[broker_id], timeout=timeout)

    def elect_preferred_leaders(
        self, topic: str | None = None, partition: int | None = None
    ) -> str:
        """Run kafka-leader-election (PREFERRED) for one partition, or all with no topic."""
        if topic is None:
            target = ["--all-topic-partitions"]
        else:
            target = ["--topic", topic, "--partition", str(partition or 0)]
        return self.run_tool(_ELECTION_TOOL, "--election-type", "PREFERRED", *target)

    def run_tool(self, main_class: str, *args: str, timeout: float = 120.0) -> str:
        """Run one of Kafka's command-line tools (``main_class``) against this cluster
        (``--bootstrap-server`` added); return its output, raise BrokerStartError on failure.
        """
        command = [
            *self._java(256, "-XX:TieredStopAtLevel=1"),
            f"-Dlog4j2.configurationFile={self._tool_log4j()}",
            main_class,
            "--bootstrap-server",
            self.bootstrap,
            *args,
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        output = done.stdout + done.stderr
        if done.returncode != 0:
            raise BrokerStartError(
                f"{main_class} {' '.join(args)} failed (exit {done.returncode}):\n{output}"
            )
        return output

    # -- log excerpts (kept for failed tests) --------------------------------------------

    def log_sizes(self) -> dict[int, int]:
        """Each node's server.log size now (where a later excerpt starts)."""
        sizes: dict[int, int] = {}
        for node_id, node in self.nodes.items():
            try:
                sizes[node_id] = node.log_path.stat().st_size
            except OSError:
                sizes[node_id] = 0
        return sizes

    def save_logs(self, destination: Path, stem: str, since: Mapping[int, int]) -> list[Path]:
        """Copy what each node logged after ``since`` (log_sizes) to ``destination``."""
        destination.mkdir(parents=True, exist_ok=True)
        saved: list[Path] = []
        for node_id, node in self.nodes.items():
            with contextlib.suppress(OSError):
                with open(node.log_path, "rb") as handle:
                    handle.seek(since.get(node_id, 0))
                    excerpt = handle.read()
                target = destination / f"{stem}-broker{node_id}.log"
                target.write_bytes(excerpt)
                saved.append(target)
        return saved

    # -- internals ------------------------------------------------------------------------

    def _base_config(self) -> dict[str, str]:
        replicas = min(3, self.brokers)
        min_isr = str(max(1, replicas - 1))
        return TEST_CONFIG | {
            "default.replication.factor": str(replicas),
            "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": str(replicas),
            "transaction.state.log.replication.factor": str(replicas),
            "transaction.state.log.min.isr": min_isr,
            "share.coordinator.state.topic.replication.factor": str(replicas),
            "share.coordinator.state.topic.min.isr": min_isr,
        }

    def _prepare_nodes(self) -> None:
        if self.directory is None:
            if self._given_directory is not None:
                self.directory = self._given_directory
                self.directory.mkdir(parents=True, exist_ok=True)
            else:
                self.directory = Path(tempfile.mkdtemp(prefix="kafkaio-kafka-"))
        used: set[int] = set()

        def port() -> int:
            while True:
                chosen = free_loopback_port()
                if chosen not in used:
                    used.add(chosen)
                    return chosen

        self.nodes = {}
        for node_id in self.broker_ids:
            directory = self.directory / f"broker{node_id}"
            shutil.rmtree(directory / "data", ignore_errors=True)
            directory.mkdir(parents=True, exist_ok=True)
            extra = {name: port() for name in self.listeners[1:]}
            self.nodes[node_id] = KafkaNode(node_id, port(), port(), directory, extra)
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes.values())
        for node in self.nodes.values():
            listeners = {"PLAINTEXT": node.port} | node.listener_ports
            advertised = ",".join(f"{name}://127.0.0.1:{p}" for name, p in listeners.items())
            settings = {
                "process.roles": "broker,controller",
                "node.id": str(node.node_id),
                "controller.quorum.voters": voters,
                "listeners": f"{advertised},CONTROLLER://127.0.0.1:{node.controller_port}",
                "advertised.listeners": advertised,
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": ",".join(
                    [*(f"{name}:{_PROTOCOLS[name]}" for name in listeners), "CONTROLLER:PLAINTEXT"]
                ),
                "inter.broker.listener.name": "PLAINTEXT",
                "log.dirs": str(node.data_dir),
            }
            settings |= self._sasl_config() | self._tls_config() | self.config
            node.config_path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
            (node.directory / "log4j2.properties").write_text(_LOG4J2.format(log=node.log_path))

    def _sasl_config(self) -> dict[str, str]:
        if not self.sasl_users:
            return {}
        plain_users = " ".join(f'user_{n}="{p}"' for n, p in self.sasl_users.items())
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        oauth = (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'unsecuredLoginStringClaim_sub="broker";'
        )
        settings = {"sasl.enabled.mechanisms": ",".join(_SASL_MECHANISMS)}
        for listener in ("SASL_PLAINTEXT", REAUTH_LISTENER):
            if listener not in self.listeners:
                continue
            prefix = f"listener.name.{listener.lower()}."
            settings |= {
                f"{prefix}plain.sasl.jaas.config": (
                    "org.apache.kafka.common.security.plain.PlainLoginModule required "
                    f"{plain_users};"
                ),
                f"{prefix}scram-sha-256.sasl.jaas.config": scram,
                f"{prefix}scram-sha-512.sasl.jaas.config": scram,
                f"{prefix}oauthbearer.sasl.jaas.config": oauth,
                f"{prefix}oauthbearer.sasl.server.callback.handler.class": _UNSECURED_VALIDATOR,
            }
        if self.sasl_session_ms is not None:
            reauth = f"listener.name.{REAUTH_LISTENER.lower()}.connections.max.reauth.ms"
            settings[reauth] = str(self.sasl_session_ms)
        return settings

    def _tls_config(self) -> dict[str, str]:
        if self.tls_keystore is None:
            return {}
        return {
            "listener.name.ssl.ssl.keystore.type": "PEM",
            "listener.name.ssl.ssl.keystore.location": str(self.tls_keystore),
            "listener.name.ssl.ssl.client.auth": "none",
        }

    def _java(self, heap_mb: int, *args: str) -> list[str]:
        java = find_java()
        assert java is not None
        initial = min(heap_mb, 256)  # the whole heap is not committed at once
        return [java, f"-Xms{initial}m", f"-Xmx{heap_mb}m", "-cp", f"{self.libs}/*", *args]

    def _format(self) -> None:
        processes = []
        for node in self.nodes.values():
            command = self._java(
                256,
                "-XX:TieredStopAtLevel=1",
                f"-Dlog4j2.configurationFile={self._tool_log4j()}",
                _STORAGE_TOOL,
                "format",
                "-t",
                self.cluster_id,
                "-c",
                str(node.config_path),
                *(
                    argument
                    for name, password in self.sasl_users.items()
                    for mechanism in _SCRAM_MECHANISMS
                    for argument in (
                        "--add-scram",
                        f"{mechanism}=[name={name},password={password}]",
                    )
                ),
            )
            processes.append(
                (node, subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
            )
        for node, process in processes:
            try:
                output, _ = process.communicate(timeout=self.start_timeout)
            except subprocess.TimeoutExpired:
                for _, other in processes:
                    other.kill()
                    other.wait()
                raise BrokerStartError(
                    f"formatting the storage of broker {node.node_id} took more than "
                    f"{self.start_timeout} s"
                ) from None
            if process.returncode != 0:
                raise BrokerStartError(
                    f"formatting the storage of broker {node.node_id} failed "
                    f"(exit {process.returncode}):\n{output.decode('utf-8', 'replace')}"
                )

    def _tool_log4j(self) -> Path:
        assert self.directory is not None
        path = self.directory / "tools-log4j2.properties"
        if not path.exists():
            path.write_text("status = warn\nrootLogger.level = WARN\n")
        return path

    def _launch(self, node: KafkaNode) -> None:
        if self._class_archive_options is None:
            archive = class_archive_path(self.version)
            self._class_archive_options = (
                (f"-XX:SharedArchiveFile={archive}",)
                if archive is not None and archive.exists()
                else ()
            )
        command = [
            *self._java(self.heap_mb, *_JVM_OPTIONS, *self._class_archive_options),
            f"-Dlog4j2.configurationFile={node.directory / 'log4j2.properties'}",
            _CLASSPATH_MAIN,
            str(node.config_path),
        ]
        with open(node.stdout_path, "ab") as stdout:
            stdout.write(f"--- kafkaio: starting broker {node.node_id}\n".encode())
            stdout.flush()
            node.process = popen_tied(
                command,
                sig=signal.SIGKILL,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=subprocess.STDOUT,
                cwd=node.directory,
                start_new_session=True,
            )
        node.paused = False

    def _wait_ready(self, broker_ids: Sequence[int], deadline: float) -> None:
        """Wait until every node in ``broker_ids`` answers Metadata listing all of them."""
        expected = set(broker_ids)
        pending = [self.nodes[i] for i in broker_ids]
        last = ""
        while pending:
            node = pending[0]
            if not node.running:
                code = node.process.returncode if node.process is not None else None
                raise BrokerStartError(
                    f"broker {node.node_id} of {self!r} exited with code {code} while "
                    f"starting; its log is {node.log_path}:\n{node.log_tail()}"
                )
            try:
                if not self.api_versions:
                    self.api_versions = api_versions("127.0.0.1", node.port, timeout=1.0)
                answer = metadata("127.0.0.1", node.port, [], timeout=2.0)
                if expected <= set(answer.brokers):
                    pending.pop(0)
                    continue
                last = f"broker {node.node_id} lists brokers {sorted(answer.brokers)}"
            except (KafkaConnectionError, KafkaProtocolError) as exc:
                last = str(exc)
            if time.monotonic() > deadline:
                tails = "\n".join(self.nodes[i].log_tail(1500) for i in broker_ids)
                raise BrokerStartError(
                    f"{self!r} was not ready within {self.start_timeout} s ({last}):\n{tails}"
                )
            time.sleep(0.05)

    def _reap(self, node: KafkaNode, timeout: float) -> None:
        if node.process is None:
            return
        try:
            node.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise BrokerStartError(
                f"broker {node.node_id} did not exit within {timeout} s"
            ) from None
        node.paused = False

    def _kill_all(self) -> None:
        for node in self.nodes.values():
            node.signal(signal.SIGKILL)
        for node in self.nodes.values():
            if node.process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    node.process.wait(10.0)
            node.paused = False

    def _remove_data(self) -> None:
        if self.directory is None:
            return
        if self._given_directory is None and not self.keep_directory:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None
            return
        for node in self.nodes.values():
            shutil.rmtree(node.data_dir, ignore_errors=True)
