"""TimedManager: wraps a request manager so each answered request records its round trip.

Sans-I/O: the times are the ``now`` the driver passes to ``poll`` and to the handler.
"""

from __future__ import annotations

from typing import Any

from kafkaio.metrics.sensor import Sensor
from kafkaio.runtime.requests import CompletionHandler, PollResult, RequestManager


class TimedManager:
    """A RequestManager that delegates to ``inner`` and records, for every request answered
    without error, the ms between the poll that made it and the response into ``sensor``."""

    __slots__ = ("inner", "_sensor")

    def __init__(self, inner: RequestManager, sensor: Sensor) -> None:
        self.inner = inner
        self._sensor = sensor

    def poll(self, now: float) -> PollResult:
        result = self.inner.poll(now)
        for request in result.requests:
            if request.expect_response:
                request.handler = _timed(request.handler, self._sensor, now)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _timed(
    handler: CompletionHandler[Any], sensor: Sensor, sent: float
) -> CompletionHandler[Any]:
    def handle(now: float, response: Any, error: BaseException | None) -> None:
        if error is None:
            sensor.record(now - sent, now)
        handler(now, response, error)

    return handle
