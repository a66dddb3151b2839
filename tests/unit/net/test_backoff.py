"""ExponentialBackoff: Java's sequence without jitter, bounds with jitter."""

from __future__ import annotations

import random

import pytest

from kafkaio.net.backoff import ExponentialBackoff


def test_sequence_without_jitter_matches_java() -> None:
    backoff = ExponentialBackoff(50, 1000, jitter=0)
    assert [backoff.backoff_ms(n) for n in range(7)] == pytest.approx(
        [50, 100, 200, 400, 800, 1000, 1000]
    )


def test_midpoint_random_is_no_jitter() -> None:
    backoff = ExponentialBackoff(100, 10_000)
    assert backoff.backoff_ms(3, lambda: 0.5) == pytest.approx(800)


@pytest.mark.parametrize("attempts", [0, 1, 2, 5, 50])
def test_jitter_bounds(attempts: int) -> None:
    backoff = ExponentialBackoff(50, 1000, jitter=0.2)
    term = min(50 * 2**attempts, 1000)
    rng = random.Random(attempts)
    values = [backoff.backoff_ms(attempts, rng.random) for _ in range(2000)]
    assert min(values) >= term * 0.8
    assert max(values) <= min(term * 1.2, 1000)
    assert min(values) < term * 0.85  # the jitter is really applied
    assert backoff.backoff_ms(attempts, lambda: 0.0) == pytest.approx(term * 0.8)


def test_initial_above_max_is_capped() -> None:
    assert ExponentialBackoff(5000, 1000).backoff_ms(3) == 1000


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial_ms": -1, "max_ms": 10},
        {"initial_ms": 1, "max_ms": 10, "multiplier": 1},
        {"initial_ms": 1, "max_ms": 10, "jitter": 1.5},
    ],
)
def test_invalid(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        ExponentialBackoff(**kwargs)  # type: ignore[arg-type]


def test_negative_attempts() -> None:
    with pytest.raises(ValueError):
        ExponentialBackoff(1, 2).backoff_ms(-1)
