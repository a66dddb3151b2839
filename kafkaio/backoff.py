"""Exponential backoff with jitter, as Kafka's Java client computes retry delays.

Pure arithmetic: the caller supplies the attempt count and, through `rng`, the randomness.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkaio.errors import KafkaConfigError


@dataclass(frozen=True, slots=True)
class ExponentialBackoff:
    """Delay before retry number `attempts`: `initial_ms * multiplier**attempts`, +/- jitter.

    The jittered value is capped at `max_ms` (raised to `initial_ms` if lower, as the Java
    client does). `rng` returns uniform floats in [0, 1); tests pass a constant.
    """

    initial_ms: float
    max_ms: float
    multiplier: float = 2.0
    jitter: float = 0.2
    rng: Callable[[], float] = field(default=random.random, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.initial_ms < 0:
            raise KafkaConfigError(
                f"backoff initial_ms is {self.initial_ms}; use 0 or a positive number"
            )
        if self.multiplier < 1:
            raise KafkaConfigError(f"backoff multiplier is {self.multiplier}; use 1 or more")
        if not 0 <= self.jitter < 1:
            raise KafkaConfigError(f"backoff jitter is {self.jitter}; use a value in [0, 1)")

    def delay_ms(self, attempts: int) -> float:
        """Milliseconds to wait after `attempts` consecutive failures (0 = none yet)."""
        cap = max(self.max_ms, self.initial_ms)
        term = self.initial_ms
        if attempts > 0 and term > 0 and cap > term and self.multiplier > 1:
            # The exponent stops where the curve reaches the cap, so jitter still spreads
            # delays below the cap and huge attempt counts cannot overflow.
            exp_max = math.log(cap / term, self.multiplier)
            term *= self.multiplier ** min(attempts, exp_max)
        if self.jitter:
            term *= 1 - self.jitter + 2 * self.jitter * self.rng()
        return min(term, cap)
