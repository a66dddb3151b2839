"""Exponential backoff with jitter, computed exactly as the Java client's ExponentialBackoff.

The one way kafkaio computes retry and reconnect delays. Pure arithmetic: the caller owns the
clock and the sleeping, and supplies the randomness (`rng`) so tests can fix it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkaio.errors import KafkaConfigError


@dataclass(frozen=True, slots=True)
class ExponentialBackoff:
    """Delay after `attempts` failures in a row: ``initial_ms * multiplier**attempts``, times a
    jitter factor drawn from ``[1 - jitter, 1 + jitter)``, never above ``max_ms``.

    As in Java, ``initial_ms`` above ``max_ms`` is lowered to ``max_ms``, and the exponent
    stops where the curve reaches the cap (so jitter still spreads delays near the cap and
    huge attempt counts cannot overflow). `rng` returns uniform floats in [0, 1).
    """

    initial_ms: float
    max_ms: float
    multiplier: float = 2.0
    jitter: float = 0.2
    rng: Callable[[], float] = field(default=random.random, repr=False, compare=False)
    _exp_max: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.initial_ms < 0 or self.max_ms < 0:
            raise KafkaConfigError(
                f"backoff times must be 0 or positive, got {self.initial_ms} and {self.max_ms}"
            )
        if self.multiplier < 1:
            raise KafkaConfigError(f"backoff multiplier is {self.multiplier}; use 1 or more")
        if not 0 <= self.jitter < 1:
            raise KafkaConfigError(f"backoff jitter is {self.jitter}; use a value in [0, 1)")
        initial = min(self.initial_ms, self.max_ms)
        object.__setattr__(self, "initial_ms", initial)
        exp_max = 0.0
        if self.max_ms > initial and self.multiplier > 1:
            exp_max = math.log(self.max_ms / max(initial, 1.0)) / math.log(self.multiplier)
        object.__setattr__(self, "_exp_max", exp_max)

    def delay_ms(self, attempts: int, rng: Callable[[], float] | None = None) -> float:
        """Milliseconds to wait after `attempts` consecutive failures (0: the first retry)."""
        if attempts < 0:
            raise ValueError(f"attempts must be >= 0, got {attempts}")
        if self._exp_max == 0:
            return self.initial_ms
        term: float = self.initial_ms * self.multiplier ** min(float(attempts), self._exp_max)
        if self.jitter:
            term *= 1.0 - self.jitter + 2.0 * self.jitter * (rng or self.rng)()
        return min(term, self.max_ms)
