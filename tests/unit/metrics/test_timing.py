"""TimedManager: answered requests record their round trip; failed ones do not."""

from __future__ import annotations

from typing import Any

from kafkaio.metrics import MetricsRegistry, Stat
from kafkaio.metrics.timing import TimedManager
from kafkaio.runtime.requests import PollResult, UnsentRequest


class Manager:
    def __init__(self) -> None:
        self.seen: list[tuple[float, Any, BaseException | None]] = []
        self.extra = "delegated"

    def poll(self, now: float) -> PollResult:
        def handler(t: float, response: Any, error: BaseException | None) -> None:
            self.seen.append((t, response, error))

        return PollResult([UnsentRequest(1, "req", handler)], 50.0)


def test_records_round_trip_and_delegates() -> None:
    registry = MetricsRegistry("c", "consumer", clock=lambda: 0.0)
    sensor = registry.sensor("g", {"lat-max": Stat.MAX, "n": Stat.COUNT})
    inner = Manager()
    timed = TimedManager(inner, sensor)
    first = timed.poll(100.0)
    second = timed.poll(110.0)
    assert first.next_poll_ms == 50.0
    first.requests[0].handler(130.0, "resp", None)
    second.requests[0].handler(200.0, None, RuntimeError("lost"))
    assert inner.seen[0] == (130.0, "resp", None)
    assert inner.seen[1][0] == 200.0 and isinstance(inner.seen[1][2], RuntimeError)
    assert sensor.read(Stat.MAX, 200.0) == 30.0
    assert sensor.read(Stat.COUNT, 200.0) == 1.0
    assert timed.extra == "delegated"
