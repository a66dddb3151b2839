"""Helper process that owns a librdkafka mock cluster and serves commands over stdin/stdout.

Run as ``python -m kafkaio.testing._mock_helper NUM_BROKERS``; one JSON object per line each
way. The cluster is destroyed and the process exits when stdin reaches EOF (parent gone).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import IO, Any

from kafkaio.testing._rdkafka_mock import RdKafkaMockCluster
from kafkaio.testing.errors import MockClusterError

COMMANDS = frozenset(
    {
        "create_topic",
        "set_topic_error",
        "set_partition_leader",
        "set_partition_follower",
        "set_partition_follower_watermarks",
        "push_leader_response",
        "broker_down",
        "broker_up",
        "set_rtt",
        "set_rack",
        "decommission_broker",
        "add_broker",
        "set_coordinator",
        "set_apiversion",
        "push_request_errors",
        "clear_request_errors",
        "broker_push_request_error_rtts",
        "broker_error_stack_count",
        "set_group_initial_rebalance_delay_ms",
        "set_group_consumer_session_timeout_ms",
        "set_group_consumer_heartbeat_interval_ms",
        "start_request_tracking",
        "stop_request_tracking",
        "clear_requests",
        "get_requests",
    }
)


def _reply(out: IO[str], message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def _error(exc: Exception) -> dict[str, Any]:
    if isinstance(exc, MockClusterError):
        return {"error": str(exc)}
    return {"error": f"{type(exc).__name__}: {exc}"}


def _serve(cluster: RdKafkaMockCluster, commands: IO[str], out: IO[str]) -> None:
    for line in commands:
        try:
            request = json.loads(line)
            op = request["op"]
            if op == "stop":
                _reply(out, {"ok": None})
                return
            if op not in COMMANDS:
                raise ValueError(f"unknown mock-cluster command {op!r}")
            result = getattr(cluster, op)(*request.get("args", []))
            _reply(out, {"ok": result, "broker_ids": cluster.broker_ids})
        except Exception as exc:  # every failure goes back to the parent
            _reply(out, _error(exc))


def main(argv: list[str]) -> int:
    # The parent decides when we stop (stop command or EOF), not a terminal Ctrl-C.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Replies go to a private copy of stdout; fd 1 then points at stderr so that stray
    # prints from any library cannot corrupt the reply stream.
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    num_brokers = int(argv[1]) if len(argv) > 1 else 3
    try:
        cluster = RdKafkaMockCluster(num_brokers)
    except Exception as exc:
        _reply(out, _error(exc))
        return 1
    try:
        _reply(
            out,
            {
                "ok": {
                    "bootstrap": cluster.bootstrap,
                    "broker_ids": cluster.broker_ids,
                    "version": cluster.version,
                }
            },
        )
        _serve(cluster, sys.stdin, out)
    finally:
        cluster.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
