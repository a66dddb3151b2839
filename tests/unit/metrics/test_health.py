"""HealthSnapshot: healthy rules, lag totals, JSON-ready dict."""

from __future__ import annotations

import json

from kafkaio.metrics import ConnectionHealth, GroupHealth, HealthSnapshot


def _snap(**kw: object) -> HealthSnapshot:
    base: dict[str, object] = {"client_id": "c", "kind": "consumer", "running": True}
    base.update(kw)
    return HealthSnapshot(**base)  # type: ignore[arg-type]


def test_healthy_needs_running_and_a_connection() -> None:
    up = ConnectionHealth("1", "h", 9092, "connected")
    down = ConnectionHealth("2", "h", 9093, "backoff", last_error="refused")
    assert _snap(connections=[up, down]).healthy
    assert not _snap(connections=[down]).healthy
    assert not _snap(running=False, connections=[up]).healthy
    assert not _snap(connections=[up], error="boom").healthy
    group = GroupHealth("g", "fatal", 3, "m", 0)
    assert not _snap(connections=[up], group=group).healthy


def test_total_lag_and_dict() -> None:
    snap = _snap(lag={"t-0": 3, "t-1": 4}, connections=[ConnectionHealth("1", "h", 1, "connected")])
    assert snap.total_lag == 7
    assert _snap(lag={"t-0": 3, "t-1": None}).total_lag is None
    out = json.loads(json.dumps(snap.as_dict()))
    assert out["total_lag"] == 7 and out["healthy"] is True and out["connected"] == 1
    assert out["connections"][0]["state"] == "connected"
