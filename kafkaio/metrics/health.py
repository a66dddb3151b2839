"""HealthSnapshot: what a health endpoint shows about a client (connections, group, lag).

Plain slotted dataclasses with ``as_dict()`` for JSON; built by ``client.health()``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(slots=True)
class ConnectionHealth:
    """One broker address: "connected", "connecting", "backoff" (the last attempt failed;
    retried later) or "disconnected"."""

    node: str  # the node id, or "bootstrap" for a bootstrap address
    host: str
    port: int
    state: str
    in_flight: int = 0
    last_error: str | None = None
    # SASL sessions renewed on the open connection (KIP-368): 0 when sessions do not expire
    reauthentications: int = 0


@dataclass(slots=True)
class GroupHealth:
    """A consumer's group membership."""

    group_id: str
    state: str
    generation: int
    member_id: str
    assigned_partitions: int


@dataclass(slots=True)
class HealthSnapshot:
    """One client's health.

    ``healthy`` (liveness): running, at least one broker connected (or none needed yet), and
    not failed in its group; a consumer still joining its group is healthy. ``ready``
    (readiness): healthy, and a consumer has partitions assigned (a producer: a broker
    connected). Serve them apart: a liveness probe that failed while a consumer waits for
    its group would restart it in a loop; a readiness probe sends no traffic until then.
    """

    client_id: str
    kind: str
    running: bool
    connections: list[ConnectionHealth] = field(default_factory=list)
    group: GroupHealth | None = None
    lag: dict[str, int | None] = field(default_factory=dict)  # "topic-partition" -> lag
    last_poll_seconds_ago: float | None = None
    error: str | None = None

    @property
    def connected(self) -> int:
        return sum(1 for c in self.connections if c.state == "connected")

    @property
    def total_lag(self) -> int | None:
        """The sum of the partitions' lags (None while one is unknown)."""
        if any(lag is None for lag in self.lag.values()):
            return None
        return sum(lag or 0 for lag in self.lag.values())

    @property
    def healthy(self) -> bool:
        if not self.running or self.error is not None:
            return False
        if self.group is not None and self.group.state in ("fatal", "failed"):
            return False
        return self.connected > 0 or not self.connections

    @property
    def ready(self) -> bool:
        if not self.healthy:
            return False
        if self.kind == "consumer":
            return bool(self.lag)  # one entry per assigned partition
        return self.connected > 0

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["connected"] = self.connected
        out["total_lag"] = self.total_lag
        out["healthy"] = self.healthy
        out["ready"] = self.ready
        return out
