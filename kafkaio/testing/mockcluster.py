"""librdkafka's mock Kafka cluster, run in a helper process, with fault injection for tests.

The parent-side ``MockCluster`` sends commands to ``kafkaio.testing._mock_helper`` over a pipe.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from kafkaio.testing._logfile import LogFile
from kafkaio.testing.errors import MockClusterError

__all__ = ["MockCluster", "MockClusterError"]

_LOG_TAIL_CHARS = 4000
# JoinGroup, SyncGroup, Heartbeat, LeaveGroup: the highest versions librdkafka 2.16's mock
# parses correctly (it advertises flexible versions of them but parses them as non-flexible,
# and its LeaveGroup v3 response lacks the member list). See `cap_group_apis`.
GROUP_API_MAX = {11: 5, 14: 3, 12: 3, 13: 2}


class MockCluster:
    """A standalone N-broker librdkafka mock cluster (broker ids 1..N) on 127.0.0.1.

    The cluster lives in a helper process that exits when ``stop()`` is called or when this
    process dies (it reads its stdin until EOF). Every method waits for the helper's answer;
    a failed librdkafka call raises MockClusterError with librdkafka's error name and text.
    Methods are thread-safe. Error and API arguments are Kafka numbers (e.g. api_key 0 =
    Produce, error 6 = NOT_LEADER_OR_FOLLOWER; librdkafka's negative codes such as -195
    ``_TRANSPORT`` make the broker drop the connection).
    """

    def __init__(self, *, command_timeout: float = 10.0, keep_log: bool = False) -> None:
        self.command_timeout = command_timeout
        self.keep_log = keep_log
        self._process: subprocess.Popen[bytes] | None = None
        self._stdin: IO[bytes] | None = None
        self._buffer = b""
        self._lock = threading.Lock()
        self._log: LogFile | None = None
        self._bootstrap: str | None = None
        self._broker_ids: list[int] = []
        self.librdkafka_version = ""

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, num_brokers: int = 3, timeout: float = 15.0) -> MockCluster:
        """Start the helper process and its ``num_brokers``-broker cluster; return self."""
        if self._process is not None:
            raise MockClusterError(f"mock cluster already running at {self._bootstrap}")
        self._log = LogFile("rdkafka-mock-", keep=self.keep_log)
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parent.parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        self._process = subprocess.Popen(
            [sys.executable, "-m", "kafkaio.testing._mock_helper", str(num_brokers)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log.file,
            env=env,
        )
        self._stdin = self._process.stdin
        try:
            info = self._receive(timeout, "start")["ok"]
        except MockClusterError:
            self.stop()
            raise
        self._bootstrap = str(info["bootstrap"])
        self._broker_ids = [int(b) for b in info["broker_ids"]]
        self.librdkafka_version = str(info["version"])
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Destroy the cluster and end the helper process (killed after ``timeout`` s)."""
        process, self._process = self._process, None
        if process is not None:
            try:
                if process.poll() is None and self._stdin is not None:
                    self._stdin.write(b'{"op": "stop"}\n')
                    self._stdin.close()
            except OSError:
                pass
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout)
            if process.stdout is not None:
                process.stdout.close()
        self._stdin = None
        self._buffer = b""
        if self._log is not None:
            self._log.close()

    def __enter__(self) -> MockCluster:
        if self._process is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"MockCluster(bootstrap={self._bootstrap!r}, brokers={self._broker_ids})"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        """Process id of the helper process, or None when not started."""
        return self._process.pid if self._process is not None else None

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:p1,127.0.0.1:p2,..."``, one address per broker."""
        if self._bootstrap is None:
            raise MockClusterError("the mock cluster is not started; call start() first")
        return self._bootstrap

    @property
    def broker_ids(self) -> list[int]:
        """Current broker ids (1..N at start; changed by add_broker/decommission_broker)."""
        return list(self._broker_ids)

    @property
    def log_path(self) -> Path | None:
        """Path of the kept log file (``keep_log=True``), else None."""
        return self._log.path if self._log is not None else None

    def log_tail(self, chars: int = _LOG_TAIL_CHARS) -> str:
        """The last ``chars`` characters of the helper's stderr ("" if none)."""
        return self._log.tail(chars) if self._log is not None else ""

    def _log_report(self) -> str:
        where = self._log.describe() if self._log is not None else "log"
        return f"Helper {where}:\n{self.log_tail()}"

    # -- topics and partitions ------------------------------------------------------------

    def cap_group_apis(self) -> None:
        """Advertise only the group API versions the mock really speaks (GROUP_API_MAX):
        clients that pick the highest advertised version otherwise get their JoinGroup
        answered by a closed connection."""
        for api_key, max_version in GROUP_API_MAX.items():
            self.set_apiversion(api_key, 0, max_version)

    def create_topic(self, name: str, partitions: int, replication_factor: int = 1) -> None:
        """Create a topic (the mock has no CreateTopics API; it also auto-creates on use)."""
        self._command("create_topic", name, partitions, replication_factor)

    def set_topic_error(self, name: str, error: int) -> None:
        """Error returned for the topic in Metadata and AddPartitionsToTxn (0 clears it)."""
        self._command("set_topic_error", name, error)

    def set_partition_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move the partition's leader (-1: leaderless). Bumps the leader epoch."""
        self._command("set_partition_leader", topic, partition, broker_id)

    def set_partition_follower(self, topic: str, partition: int, broker_id: int) -> None:
        """Set the preferred read replica (KIP-392) returned to fetchers."""
        self._command("set_partition_follower", topic, partition, broker_id)

    def set_partition_follower_watermarks(
        self, topic: str, partition: int, low: int, high: int
    ) -> None:
        """Follower's low/high watermarks (-1 reverts to the leader's)."""
        self._command("set_partition_follower_watermarks", topic, partition, low, high)

    def push_leader_response(
        self, topic: str, partition: int, leader_id: int, leader_epoch: int
    ) -> None:
        """Make the next Metadata response report this leader and epoch for the partition."""
        self._command("push_leader_response", topic, partition, leader_id, leader_epoch)

    # -- brokers --------------------------------------------------------------------------

    def broker_down(self, broker_id: int) -> None:
        """Disconnect the broker and refuse new connections (-1: all). No leader change."""
        self._command("broker_down", broker_id)

    def broker_up(self, broker_id: int) -> None:
        """Accept connections on the broker again (-1: all)."""
        self._command("broker_up", broker_id)

    def set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay every response of the broker (-1: all) by ``rtt_ms`` milliseconds."""
        self._command("set_rtt", broker_id, rtt_ms)

    def set_rack(self, broker_id: int, rack: str) -> None:
        """Rack reported for the broker in Metadata."""
        self._command("set_rack", broker_id, rack)

    def decommission_broker(self, broker_id: int) -> None:
        """Remove the broker; its partitions are reassigned to the others."""
        self._command("decommission_broker", broker_id)

    def add_broker(self, broker_id: int) -> None:
        """Add a broker with this id; partitions are reassigned to include it."""
        self._command("add_broker", broker_id)

    def set_coordinator(self, key_type: str, key: str, broker_id: int) -> None:
        """Pin the coordinator of a group or transactional id (key_type "group"/"transaction")."""
        self._command("set_coordinator", key_type, key, broker_id)

    # -- protocol behaviour ---------------------------------------------------------------

    def set_apiversion(self, api_key: int, min_version: int, max_version: int) -> None:
        """Advertised version range of an API; (-1, -1) removes the API."""
        self._command("set_apiversion", api_key, min_version, max_version)

    def push_request_errors(self, api_key: int, errors: Sequence[int]) -> None:
        """The next ``len(errors)`` requests of ``api_key`` (any broker) fail with these errors."""
        self._command("push_request_errors", api_key, list(errors))

    def clear_request_errors(self, api_key: int) -> None:
        """Forget errors pushed with push_request_errors for ``api_key``."""
        self._command("clear_request_errors", api_key)

    def broker_push_request_error_rtts(
        self, broker_id: int, api_key: int, errors: Sequence[tuple[int, int]]
    ) -> None:
        """The broker's next requests of ``api_key`` answer (error, after rtt_ms) in order.

        Broker errors take precedence over cluster-wide ones; error 0 just delays.
        """
        pairs = [[int(error), int(rtt)] for error, rtt in errors]
        self._command("broker_push_request_error_rtts", broker_id, api_key, pairs)

    def broker_error_stack_count(self, broker_id: int, api_key: int) -> int:
        """How many pushed broker errors for ``api_key`` are not consumed yet."""
        return int(self._command("broker_error_stack_count", broker_id, api_key))

    def set_group_initial_rebalance_delay_ms(self, delay_ms: int) -> None:
        """Classic-group initial rebalance delay (group.initial.rebalance.delay.ms)."""
        self._command("set_group_initial_rebalance_delay_ms", delay_ms)

    def set_group_consumer_session_timeout_ms(self, timeout_ms: int) -> None:
        """KIP-848 group.consumer.session.timeout.ms."""
        self._command("set_group_consumer_session_timeout_ms", timeout_ms)

    def set_group_consumer_heartbeat_interval_ms(self, interval_ms: int) -> None:
        """KIP-848 group.consumer.heartbeat.interval.ms."""
        self._command("set_group_consumer_heartbeat_interval_ms", interval_ms)

    # -- request tracking -----------------------------------------------------------------

    def start_request_tracking(self) -> None:
        self._command("start_request_tracking")

    def stop_request_tracking(self) -> None:
        self._command("stop_request_tracking")

    def clear_requests(self) -> None:
        self._command("clear_requests")

    def get_requests(self) -> list[tuple[int, int, int]]:
        """Tracked requests as (broker_id, api_key, timestamp_us), oldest first."""
        return [(int(b), int(k), int(t)) for b, k, t in self._command("get_requests")]

    # -- pipe protocol --------------------------------------------------------------------

    def _command(self, op: str, *args: Any) -> Any:
        with self._lock:
            if self._process is None or self._stdin is None:
                raise MockClusterError(
                    f"mock cluster is not running (call start() first); cannot {op}"
                )
            line = json.dumps({"op": op, "args": list(args)}).encode() + b"\n"
            try:
                self._stdin.write(line)
                self._stdin.flush()
            except OSError as exc:
                raise MockClusterError(
                    f"mock-cluster helper is gone ({exc}); cannot {op}. {self._log_report()}"
                ) from exc
            reply = self._receive(self.command_timeout, op)
            self._broker_ids = [int(b) for b in reply["broker_ids"]]
            return reply["ok"]

    def _receive(self, timeout: float, op: str) -> dict[str, Any]:
        """Read one reply line; raise MockClusterError for an error reply, exit or timeout."""
        process = self._process
        assert process is not None and process.stdout is not None
        fd = process.stdout.fileno()
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    process.kill()  # replies would be out of step from now on
                    raise MockClusterError(
                        f"mock-cluster helper did not answer {op!r} within {timeout} s and "
                        f"was killed; start a new MockCluster. {self._log_report()}"
                    )
                if not selector.select(remaining):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    try:
                        code: int | None = process.wait(1.0)
                    except subprocess.TimeoutExpired:
                        code = None
                    raise MockClusterError(
                        f"mock-cluster helper exited (code {code}) during {op!r}. "
                        f"{self._log_report()}"
                    )
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        if "error" in message:
            raise MockClusterError(f"mock cluster {op}: {message['error']}")
        return message
