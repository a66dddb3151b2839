"""Sensor: windowed count/sum/rate/avg/max, cumulative totals, window roll-over."""

from __future__ import annotations

import pytest

from kafkaio.metrics import Sensor, Stat

W = 1000.0  # a 1 s window keeps the arithmetic readable


def test_cumulative_stats_count_every_recording() -> None:
    s = Sensor(W, 0.0)
    for i, value in enumerate([3.0, 5.0, 1.0]):
        s.record(value, i * 700.0)  # crosses windows: totals do not care
    assert s.read(Stat.TOTAL, 5000.0) == 9.0
    assert s.read(Stat.COUNT, 5000.0) == 3.0
    assert s.read(Stat.VALUE, 5000.0) == 1.0


def test_avg_and_max_cover_the_current_and_previous_window() -> None:
    s = Sensor(W, 0.0)
    s.record(10.0, 100.0)
    s.record(30.0, 900.0)
    s.record(20.0, 1500.0)  # second window
    assert s.read(Stat.AVG, 1600.0) == pytest.approx(20.0)
    assert s.read(Stat.MAX, 1600.0) == 30.0
    # at 2500 the first window has left the two-window horizon
    s.record(4.0, 2500.0)
    assert s.read(Stat.AVG, 2600.0) == pytest.approx(12.0)
    assert s.read(Stat.MAX, 2600.0) == 20.0


def test_stale_windows_read_zero_but_totals_stay() -> None:
    s = Sensor(W, 0.0)
    s.record(7.0, 10.0)
    assert s.read(Stat.MAX, 10_000.0) == 0.0
    assert s.read(Stat.AVG, 10_000.0) == 0.0
    assert s.read(Stat.RATE, 10_000.0) == 0.0
    assert s.read(Stat.TOTAL, 10_000.0) == 7.0
    s.record(2.0, 10_000.0)  # a recording after a long pause starts afresh
    assert s.read(Stat.MAX, 10_001.0) == 2.0


def test_rate_divides_by_at_least_one_window() -> None:
    s = Sensor(W, 0.0)
    s.record(50.0, 100.0)
    # 50 units within the first 200 ms: read as 50 per (at least) one 1 s window
    assert s.read(Stat.RATE, 200.0) == pytest.approx(50.0)
    assert s.read(Stat.COUNT_RATE, 200.0) == pytest.approx(1.0)


def test_rate_spans_both_windows() -> None:
    s = Sensor(W, 0.0)
    for t in range(0, 2000, 100):  # 20 recordings of 1 over 2 s
        s.record(1.0, float(t))
    # windows [0, 1000) and [1000, 2000): 20 units over 1.95 s
    assert s.read(Stat.RATE, 1950.0) == pytest.approx(20 / 1.95)


def test_negative_values_set_max_of_a_fresh_window() -> None:
    s = Sensor(W, 0.0)
    s.record(-5.0, 1.0)
    assert s.read(Stat.MAX, 2.0) == -5.0
