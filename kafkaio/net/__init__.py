"""The network layer: broker connections, framing, SASL, backoff and the connection manager.

Sans-I/O parts (framing, inflight, sasl, backoff, config) never touch sockets; the rest runs on anyio.
"""

from __future__ import annotations

from kafkaio.net.config import ConnectionConfig
from kafkaio.net.connection import Connection, ConnectionState
from kafkaio.net.manager import ConnectionManager, parse_bootstrap_servers

__all__ = [
    "Connection",
    "ConnectionConfig",
    "ConnectionManager",
    "ConnectionState",
    "parse_bootstrap_servers",
]
