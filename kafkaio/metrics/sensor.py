"""Sensor: cheap windowed statistics (count, sum, rate, average, maximum) for one event kind.

Recording is a few attribute updates; the caller passes the time (ms), no lock, no clock read.
"""

from __future__ import annotations

import enum


class Stat(enum.Enum):
    """What a metric reads from a sensor (the Java client's stat kinds)."""

    AVG = "avg"  # windowed average of the recorded values
    MAX = "max"  # windowed maximum of the recorded values
    RATE = "rate"  # windowed sum of the values per second
    COUNT_RATE = "count-rate"  # windowed number of recordings per second
    TOTAL = "total"  # cumulative sum of the values
    COUNT = "count"  # cumulative number of recordings
    VALUE = "value"  # the last recorded value

    @property
    def cumulative(self) -> bool:
        """Monotonic counters (exported as OpenTelemetry counters)."""
        return self is Stat.TOTAL or self is Stat.COUNT


def event_stats(name: str) -> dict[str, Stat]:
    """``{name}-rate`` and ``{name}-total``: how often an event happens, and how often it did."""
    return {f"{name}-rate": Stat.COUNT_RATE, f"{name}-total": Stat.COUNT}


def latency_stats(name: str) -> dict[str, Stat]:
    """The Java client's request-latency quartet: ``{name}-latency-avg``/``-max`` of the
    recorded milliseconds, plus ``{name}-rate``/``-total`` of the requests."""
    return {
        f"{name}-latency-avg": Stat.AVG,
        f"{name}-latency-max": Stat.MAX,
        **event_stats(name),
    }


class Sensor:
    """Records values at times (ms) and reads them as stats over a sliding time window.

    Two samples of ``window_ms`` each, as the Java client's default: windowed stats cover
    the current and the previous window. A rate divides by the time those windows span,
    and never by less than one full window (so the first seconds do not read as a spike).
    Stats of a window with no recordings read 0.0.
    """

    __slots__ = (
        "window_ms",
        "count",
        "total",
        "last",
        "_start",
        "_w_count",
        "_w_total",
        "_w_max",
        "_p_start",
        "_p_count",
        "_p_total",
        "_p_max",
    )

    def __init__(self, window_ms: float, now: float) -> None:
        self.window_ms = window_ms
        self.count = 0
        self.total = 0.0
        self.last = 0.0
        self._start = now  # the current window's start
        self._w_count = 0
        self._w_total = 0.0
        self._w_max = 0.0
        self._p_start = now  # the previous window's start (== _start: no previous window)
        self._p_count = 0
        self._p_total = 0.0
        self._p_max = 0.0

    def record(self, value: float, now: float) -> None:
        """One event with ``value`` at ``now`` (ms)."""
        if now >= self._start + self.window_ms:
            self._roll(now)
        self.count += 1
        self.total += value
        self.last = value
        self._w_count += 1
        self._w_total += value
        if value > self._w_max or self._w_count == 1:
            self._w_max = value

    def _roll(self, now: float) -> None:
        window = self.window_ms
        if now < self._start + 2 * window:  # the current window becomes the previous one
            self._p_start, self._p_count = self._start, self._w_count
            self._p_total, self._p_max = self._w_total, self._w_max
            self._start += window
        else:  # both windows are stale: start afresh (an empty previous window)
            self._p_start, self._p_count, self._p_total, self._p_max = now - window, 0, 0.0, 0.0
            self._start = now
        self._w_count, self._w_total, self._w_max = 0, 0.0, 0.0

    def read(self, stat: Stat, now: float) -> float:
        """The value of ``stat`` at ``now`` (ms); reading changes nothing."""
        if stat is Stat.TOTAL:
            return self.total
        if stat is Stat.COUNT:
            return float(self.count)
        if stat is Stat.VALUE:
            return self.last
        count, total, maximum, oldest = self._windowed(now)
        if stat is Stat.AVG:
            return total / count if count else 0.0
        if stat is Stat.MAX:
            return maximum
        elapsed_s = max(now - oldest, self.window_ms) / 1000.0
        return (total if stat is Stat.RATE else count) / elapsed_s

    def _windowed(self, now: float) -> tuple[int, float, float, float]:
        """(count, sum, max, start) of the windows that are still current at ``now``."""
        window = self.window_ms
        if now >= self._start + 2 * window:
            return 0, 0.0, 0.0, now - window
        if now >= self._start + window:  # the current window is now the previous one
            return self._w_count, self._w_total, self._w_max, self._start
        if self._p_start < self._start:  # a previous window exists
            if not self._p_count:
                maximum = self._w_max
            elif not self._w_count:
                maximum = self._p_max
            else:
                maximum = max(self._p_max, self._w_max)
            return (
                self._p_count + self._w_count,
                self._p_total + self._w_total,
                maximum,
                self._p_start,
            )
        return self._w_count, self._w_total, self._w_max, self._start
