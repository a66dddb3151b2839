"""Apache Kafka's Java client as a test oracle: produce and consume with kafka-clients.

``JavaClients`` compiles ``oracle/KafkaioOracle.java`` once (javac against the
kafka-clients jar that `kafkaio.testing.apache` fetched; cached by source hash next to
the jars) and runs it: ``produce`` writes records (plain, idempotent or transactional
with aborts, any codec) and returns what the Java producer reported; ``consumer`` starts
a Java consumer (group member under the classic or the consumer protocol, or assigned)
or share consumer in a subprocess whose records and rebalance events a test reads while
kafkaio clients run beside it; ``read_log`` reads a topic at both isolation levels, so
tests judge what a transactional writer committed, aborted or left open by Java's reader
rather than kafkaio's; ``close_times`` times a group member's ``close()`` (the close
benchmark's Java rows). Records carry their bytes, so tests compare what each
client wrote and read exactly.

Every process started here is stopped by ``JavaProcess.stop`` (or killed at exit).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import hashlib
import json
import shutil
import subprocess
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from kafkaio.testing.apache import KAFKA_VERSION, fetch_jars, find_java, kafka_home
from kafkaio.testing.apache import unavailable_reason as apache_unavailable_reason
from kafkaio.testing.errors import BrokerStartError

SOURCE = Path(__file__).resolve().parent / "oracle" / "KafkaioOracle.java"
MAIN_CLASS = "KafkaioOracle"
_LOG4J = """\
status = warn
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
"""


_LIVE: weakref.WeakSet[subprocess.Popen[str]] = weakref.WeakSet()


@atexit.register
def _kill_live() -> None:
    for process in list(_LIVE):
        if process.poll() is None:
            process.kill()


def unavailable_reason(version: str = KAFKA_VERSION) -> str | None:
    """Why the Java clients cannot run here (no JDK, no Maven...), or None."""
    reason = apache_unavailable_reason(version)
    if reason is not None:
        return reason
    java = find_java()
    javac = shutil.which("javac") if java is None else str(Path(java).with_name("javac"))
    if javac is None or not Path(javac).exists():
        return "javac (a JDK, not only a JRE) is needed to compile the Java oracle"
    return None


@dataclass(frozen=True, slots=True)
class JavaRecord:
    """A record as the Java consumer delivered it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int
    seen_ms: int  # wall clock (ms) when the Java consumer's poll returned it
    delivery_count: int | None = None  # share consumers only


def _b64(value: str | None) -> bytes | None:
    return None if value is None else base64.b64decode(value)


def _record(event: dict[str, Any]) -> JavaRecord:
    return JavaRecord(
        partition=event["p"],
        offset=event["o"],
        key=_b64(event["k"]),
        value=_b64(event["v"]),
        headers=tuple((h[0], _b64(h[1])) for h in event["h"]),
        timestamp=event["ts"],
        seen_ms=event["t"],
        delivery_count=event.get("delivery"),
    )


@dataclass
class JavaProcess:
    """A running oracle command: its JSON events as they arrive (``events``)."""

    name: str
    process: subprocess.Popen[str]
    events: list[dict[str, Any]] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _start_readers(self) -> None:
        def read_events() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                line = line.strip()
                if line.startswith("{"):
                    with self._lock:
                        self.events.append(json.loads(line))

        def read_errors() -> None:
            assert self.process.stderr is not None
            for line in self.process.stderr:
                with self._lock:
                    self.stderr.append(line.rstrip())

        for target in (read_events, read_errors):
            thread = threading.Thread(target=target, name=f"{self.name}-{target.__name__}")
            thread.daemon = True
            thread.start()
            self._threads.append(thread)

    def snapshot(self, kind: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if kind is None or e["event"] == kind]

    @property
    def records(self) -> list[JavaRecord]:
        return [_record(e) for e in self.snapshot("record")]

    @property
    def done(self) -> bool:
        return bool(self.snapshot("done"))

    def wait_for(self, kind: str, timeout: float = 60.0, count: int = 1) -> dict[str, Any]:
        """Wait until ``count`` events of ``kind`` arrived; return the last. Raises
        BrokerStartError with the process's stderr if it exits first or time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.snapshot(kind)
            if len(found) >= count:
                return found[count - 1]
            if self.process.poll() is not None:
                for thread in self._threads:
                    thread.join(2.0)
                found = self.snapshot(kind)
                if len(found) >= count:
                    return found[count - 1]
                raise BrokerStartError(self._describe(f"exited ({self.process.returncode})"))
            time.sleep(0.02)
        raise BrokerStartError(self._describe(f"sent no {kind!r} event within {timeout} s"))

    def stop(self, timeout: float = 60.0) -> int:
        """Close its stdin (the command's signal to finish cleanly: a consumer commits and
        leaves its group) and wait; kill it after ``timeout`` s. Returns the exit code."""
        with contextlib.suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait(10)
        for thread in self._threads:
            thread.join(5.0)
        return code

    def wait(self, timeout: float = 120.0) -> int:
        """Wait for the command to end by itself (--max-records, --idle-ms); raise if it
        failed."""
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop(5.0)
            raise BrokerStartError(self._describe(f"did not finish within {timeout} s")) from None
        for thread in self._threads:
            thread.join(5.0)
        if code != 0:
            raise BrokerStartError(self._describe(f"exited with {code}"))
        return code

    def _describe(self, what: str) -> str:
        with self._lock:
            tail = "\n".join(self.stderr[-40:])
        return f"Java {self.name} {what}; its stderr ends with:\n{tail}"

    def __enter__(self) -> JavaProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process.poll() is None:
            self.stop(10.0)


@dataclass(frozen=True, slots=True)
class JavaLog:
    """A topic as Java's consumer reads it (``JavaClients.read_log``): every record
    (read_uncommitted, up to the high watermark) and the committed ones (read_committed, up
    to the last stable offset), with both end offsets per partition."""

    records: tuple[JavaRecord, ...]
    committed: tuple[JavaRecord, ...]
    high_watermarks: dict[int, int]
    stable_offsets: dict[int, int]

    @property
    def aborted(self) -> list[JavaRecord]:
        """Records below the last stable offset that read_committed does not return."""
        kept = {(r.partition, r.offset) for r in self.committed}
        return [
            r
            for r in self.records
            if (r.partition, r.offset) not in kept and r.offset < self.stable_offsets[r.partition]
        ]

    @property
    def open_records(self) -> list[JavaRecord]:
        """Records at or above the last stable offset: in transactions still open."""
        return [r for r in self.records if r.offset >= self.stable_offsets[r.partition]]

    def values(self, records: Iterable[JavaRecord] | None = None) -> list[bytes | None]:
        """The values of ``records`` (the committed ones by default), in log order."""
        chosen = self.committed if records is None else records
        return [r.value for r in sorted(chosen, key=lambda r: (r.partition, r.offset))]


@dataclass(frozen=True, slots=True)
class ProduceReport:
    """What the Java producer reported: acks ((i, partition, offset)), transactions
    ((first i, last i, committed)), and the counts of its final event."""

    acks: tuple[tuple[int, int, int], ...]
    transactions: tuple[tuple[int, int, bool], ...]
    acked: int
    failed: int
    errors: tuple[str, ...]


def java_value(i: int, pad: int = 0) -> bytes:
    """The value the Java producer writes for record ``i`` (KafkaioOracle.value)."""
    head = b"v%d" % i
    return head + bytes((i * 31 + j * 7) % 251 for j in range(pad))


class JavaClients:
    """Runs the Java oracle against a cluster; compile once with ``ensure_compiled``."""

    def __init__(self, version: str = KAFKA_VERSION) -> None:
        self.version = version
        self._classes: Path | None = None
        self._lock = threading.Lock()

    @property
    def libs(self) -> Path:
        return kafka_home(self.version) / "libs"

    def ensure_compiled(self) -> Path:
        """Compile the oracle (cached by source hash); return the classes directory."""
        with self._lock:
            if self._classes is not None:
                return self._classes
            reason = unavailable_reason(self.version)
            if reason is not None:
                raise BrokerStartError(f"cannot run the Java clients: {reason}")
            fetch_jars(self.version)
            source = SOURCE.read_bytes()
            digest = hashlib.sha256(source).hexdigest()[:12]
            classes = kafka_home(self.version) / f"oracle-{digest}"
            if not (classes / f"{MAIN_CLASS}.class").exists():
                staging = classes.with_name(classes.name + ".tmp")
                shutil.rmtree(staging, ignore_errors=True)
                staging.mkdir(parents=True)
                clients = next(self.libs.glob("kafka-clients-*.jar"))
                java = find_java()
                javac = str(Path(java).with_name("javac")) if java else "javac"
                done = subprocess.run(
                    [javac, "-d", str(staging), "-cp", str(clients), str(SOURCE)],
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                if done.returncode != 0:
                    raise BrokerStartError(f"javac failed on {SOURCE}:\n{done.stderr}")
                (staging / "log4j2.properties").write_text(_LOG4J)
                shutil.rmtree(classes, ignore_errors=True)
                staging.rename(classes)
            self._classes = classes
            return classes

    def _command(self, args: Sequence[str], heap_mb: int = 256) -> list[str]:
        classes = self.ensure_compiled()
        java = find_java() or "java"
        return [
            java,
            f"-Xmx{heap_mb}m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={classes / 'log4j2.properties'}",
            "-cp",
            f"{classes}:{self.libs}/*",
            MAIN_CLASS,
            *args,
        ]

    def start(self, command: str, args: Iterable[str], name: str | None = None) -> JavaProcess:
        """Start an oracle command (``produce``, ``consume``, ``share-consume``)."""
        from kafkaio.testing._process import popen_tied

        process = popen_tied(
            self._command([command, *args]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _LIVE.add(process)
        running = JavaProcess(name or command, process)
        running._start_readers()
        return running

    # -- conveniences ---------------------------------------------------------------------

    def produce(
        self,
        bootstrap: str,
        topic: str,
        count: int,
        *,
        start: int = 0,
        key_mod: int = 0,
        pad: int = 0,
        compression: str = "none",
        acks: str = "all",
        idempotent: bool = False,
        transactional_id: str | None = None,
        txn_size: int = 0,
        abort_every: int = 0,
        partition: int | None = None,
        quiet: bool = False,
        props: dict[str, str] | None = None,
        timeout: float = 300.0,
    ) -> ProduceReport:
        """Produce records ``start..start+count-1`` (see KafkaioOracle) and wait for the end."""
        args = [
            "--bootstrap", bootstrap, "--topic", topic, "--count", str(count),
            "--start", str(start), "--key-mod", str(key_mod), "--pad", str(pad),
            "--compression", compression, "--acks", acks,
        ]  # fmt: skip
        if idempotent:
            args.append("--idempotent")
        if transactional_id is not None:
            args += ["--transactional-id", transactional_id, "--txn-size", str(txn_size)]
            args += ["--abort-every", str(abort_every)]
        if partition is not None:
            args += ["--partition", str(partition)]
        if quiet:
            args.append("--quiet")
        for key, value in (props or {}).items():
            args += ["--prop", f"{key}={value}"]
        with self.start("produce", args, name=f"producer({topic})") as process:
            process.wait(timeout)
            done = process.wait_for("done", 1.0)
            return ProduceReport(
                acks=tuple((e["i"], e["p"], e["o"]) for e in process.snapshot("ack")),
                transactions=tuple(
                    (e["first"], e["last"], e["committed"]) for e in process.snapshot("txn")
                ),
                acked=done["acked"],
                failed=done["failed"],
                errors=tuple(e["error"] for e in process.snapshot("error")),
            )

    def consumer(
        self,
        bootstrap: str,
        topic: str,
        *,
        group: str | None = None,
        protocol: str = "classic",
        assignor: str | None = None,
        remote_assignor: str | None = None,
        isolation: str = "read_uncommitted",
        max_records: int | None = None,
        idle_ms: int | None = None,
        commit: bool = True,
        props: dict[str, str] | None = None,
        name: str | None = None,
    ) -> JavaProcess:
        """Start a Java consumer: a group member with ``group`` (committing after each poll
        and on revocation unless ``commit`` is False), else every partition assigned from
        the beginning. It ends after ``max_records``, ``idle_ms`` without records, or
        ``stop()``."""
        args = ["--bootstrap", bootstrap, "--topic", topic, "--isolation", isolation]
        if group is not None:
            args += ["--group", group, "--protocol", protocol]
            if assignor is not None:
                args += ["--assignor", assignor]
            if remote_assignor is not None:
                args += ["--remote-assignor", remote_assignor]
            if commit:
                args.append("--commit")
        if max_records is not None:
            args += ["--max-records", str(max_records)]
        if idle_ms is not None:
            args += ["--idle-ms", str(idle_ms)]
        for key, value in (props or {}).items():
            args += ["--prop", f"{key}={value}"]
        return self.start("consume", args, name=name or f"consumer({group or topic})")

    def share_consumer(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        *,
        max_records: int | None = None,
        idle_ms: int | None = None,
        props: dict[str, str] | None = None,
        name: str | None = None,
    ) -> JavaProcess:
        """Start a Java share consumer (KIP-932) that accepts every record it gets."""
        args = ["--bootstrap", bootstrap, "--topic", topic, "--group", group]
        if max_records is not None:
            args += ["--max-records", str(max_records)]
        if idle_ms is not None:
            args += ["--idle-ms", str(idle_ms)]
        for key, value in (props or {}).items():
            args += ["--prop", f"{key}={value}"]
        return self.start("share-consume", args, name=name or f"share-consumer({group})")

    def close_times(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        records: int,
        idle_polls: Sequence[int],
        *,
        protocol: str = "classic",
        poll_ms: int = 100,
        props: dict[str, str] | None = None,
        timeout: float = 300.0,
    ) -> list[float]:
        """How long ``close()`` takes, in seconds, for one Java group member per entry of
        ``idle_polls`` (in one JVM, one after the other, each in a new group ``group-<i>``):
        it reads the ``records`` records of ``topic`` from the beginning, polls that many
        more times for ``poll_ms`` ms, then closes."""
        args = [
            "--bootstrap", bootstrap, "--topic", topic, "--group", group,
            "--protocol", protocol, "--records", str(records),
            "--idle-polls", ",".join(str(k) for k in idle_polls), "--poll-ms", str(poll_ms),
        ]  # fmt: skip
        for key, value in (props or {}).items():
            args += ["--prop", f"{key}={value}"]
        with self.start("close-time", args, name=f"close-time({group})") as process:
            process.wait(timeout)
            return [float(e["s"]) for e in process.snapshot("close")]

    def read_log(self, bootstrap: str, topic: str, *, timeout: float = 120.0) -> JavaLog:
        """``topic`` read by Java's consumer at both isolation levels up to the end offsets
        it sees when it starts (so call it once the writes are done): see JavaLog."""
        args = [
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--timeout-ms",
            str(int(timeout * 1000)),
        ]
        with self.start("log", args, name=f"log({topic})") as process:
            process.wait(timeout + 30)
        ends: dict[str, dict[int, int]] = {"read_uncommitted": {}, "read_committed": {}}
        for event in process.snapshot("end"):
            ends[event["isolation"]][event["p"]] = event["o"]
        return JavaLog(
            records=tuple(_record(e) for e in process.snapshot("record")),
            committed=tuple(_record(e) for e in process.snapshot("committed")),
            high_watermarks=ends["read_uncommitted"],
            stable_offsets=ends["read_committed"],
        )

    def read_all(
        self,
        bootstrap: str,
        topic: str,
        *,
        isolation: str = "read_uncommitted",
        expect: int | None = None,
        idle_ms: int = 3000,
        timeout: float = 180.0,
    ) -> list[JavaRecord]:
        """Every record of ``topic`` as a Java consumer reads it (assigned, from the start),
        after ``expect`` records or ``idle_ms`` without one."""
        process = self.consumer(
            bootstrap, topic, isolation=isolation, max_records=expect, idle_ms=idle_ms
        )
        with process:
            process.wait(timeout)
        return process.records
