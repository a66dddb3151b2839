"""Tests of ExponentialBackoff: growth, cap, jitter bounds and validation."""

from __future__ import annotations

import random

import pytest

from kafkaio.backoff import ExponentialBackoff
from kafkaio.errors import KafkaConfigError


def test_doubles_from_initial_up_to_the_cap() -> None:
    b = ExponentialBackoff(100, 1000, jitter=0)
    assert [b.delay_ms(n) for n in range(7)] == pytest.approx([100, 200, 400, 800, 1000, 1000, 1000])


def test_huge_attempt_counts_stay_at_the_cap() -> None:
    assert ExponentialBackoff(100, 1000, jitter=0).delay_ms(10**9) == pytest.approx(1000)


def test_cap_below_initial_lowers_initial_to_the_cap_as_java() -> None:
    b = ExponentialBackoff(500, 100, jitter=0)
    assert [b.delay_ms(n) for n in range(3)] == [100, 100, 100]


def test_multiplier_one_is_constant() -> None:
    b = ExponentialBackoff(50, 1000, multiplier=1, jitter=0)
    assert [b.delay_ms(n) for n in range(3)] == [50, 50, 50]


@pytest.mark.parametrize(("u", "factor"), [(0.0, 0.8), (0.5, 1.0), (0.75, 1.1)])
def test_jitter_scales_by_up_to_plus_minus_jitter(u: float, factor: float) -> None:
    b = ExponentialBackoff(100, 10_000, jitter=0.2, rng=lambda: u)
    assert b.delay_ms(0) == pytest.approx(100 * factor)
    assert b.delay_ms(3) == pytest.approx(800 * factor)


def test_jitter_near_the_cap_spreads_below_it_and_never_above() -> None:
    low = ExponentialBackoff(100, 1000, jitter=0.2, rng=lambda: 0.0)
    high = ExponentialBackoff(100, 1000, jitter=0.2, rng=lambda: 0.99)
    assert low.delay_ms(50) == pytest.approx(800)
    assert high.delay_ms(50) == pytest.approx(1000)


def test_default_rng_stays_within_bounds() -> None:
    b = ExponentialBackoff(100, 1000)
    delays = [b.delay_ms(1) for _ in range(200)]
    assert all(160 <= d <= 240 for d in delays)
    assert len(set(delays)) > 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"initial_ms": -1}, "backoff times"),
        ({"multiplier": 0.5}, "multiplier"),
        ({"jitter": 1.0}, "jitter"),
        ({"jitter": -0.1}, "jitter"),
    ],
)
def test_invalid_settings_are_rejected(kwargs: dict[str, float], match: str) -> None:
    args: dict[str, float] = {"initial_ms": 100, "max_ms": 1000, **kwargs}
    with pytest.raises(KafkaConfigError, match=match):
        ExponentialBackoff(**args)  # type: ignore[arg-type]


def test_sequence_without_jitter_matches_java() -> None:
    backoff = ExponentialBackoff(50, 1000, jitter=0)
    assert [backoff.delay_ms(n) for n in range(7)] == pytest.approx(
        [50, 100, 200, 400, 800, 1000, 1000]
    )


def test_midpoint_random_is_no_jitter() -> None:
    backoff = ExponentialBackoff(100, 10_000)
    assert backoff.delay_ms(3, lambda: 0.5) == pytest.approx(800)


@pytest.mark.parametrize("attempts", [0, 1, 2, 5, 50])
def test_jitter_bounds(attempts: int) -> None:
    backoff = ExponentialBackoff(50, 1000, jitter=0.2)
    term = min(50 * 2**attempts, 1000)
    rng = random.Random(attempts)
    values = [backoff.delay_ms(attempts, rng.random) for _ in range(2000)]
    assert min(values) >= term * 0.8
    assert max(values) <= min(term * 1.2, 1000)
    assert min(values) < term * 0.85  # the jitter is really applied
    assert backoff.delay_ms(attempts, lambda: 0.0) == pytest.approx(term * 0.8)


def test_initial_above_max_is_capped() -> None:
    assert ExponentialBackoff(5000, 1000).delay_ms(3) == 1000


def test_negative_attempts() -> None:
    with pytest.raises(ValueError):
        ExponentialBackoff(1, 2).delay_ms(-1)
