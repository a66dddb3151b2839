"""Exponential backoff with jitter, as Apache Kafka's Java ``ExponentialBackoff``.

A pure function of the attempt count and a random source; callers own the clock and sleeping.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ExponentialBackoff:
    """``initial_ms * multiplier**attempts``, capped at ``max_ms``, times a jitter factor.

    The jitter factor is drawn uniformly from ``[1 - jitter, 1 + jitter)``; the result never
    exceeds ``max_ms``. ``initial_ms`` above ``max_ms`` is lowered to ``max_ms``.
    """

    initial_ms: float
    max_ms: float
    multiplier: float = 2.0
    jitter: float = 0.2
    _exp_max: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.initial_ms < 0 or self.max_ms < 0:
            raise ValueError(f"backoff times must be >= 0, got {self.initial_ms}, {self.max_ms}")
        if self.multiplier <= 1:
            raise ValueError(f"backoff multiplier must be > 1, got {self.multiplier}")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"backoff jitter must be in [0, 1), got {self.jitter}")
        initial = min(self.initial_ms, self.max_ms)
        object.__setattr__(self, "initial_ms", initial)
        exp_max = 0.0
        if self.max_ms > initial:
            exp_max = math.log(self.max_ms / max(initial, 1.0)) / math.log(self.multiplier)
        object.__setattr__(self, "_exp_max", exp_max)

    def backoff_ms(self, attempts: int, rand: Callable[[], float] = random.random) -> float:
        """Milliseconds to wait after ``attempts`` failures in a row (0 for the first retry).

        ``rand`` returns a float in [0, 1); pass a seeded ``random.Random().random`` for
        reproducible values.
        """
        if attempts < 0:
            raise ValueError(f"attempts must be >= 0, got {attempts}")
        if self._exp_max == 0:
            return self.initial_ms
        term: float = self.initial_ms * self.multiplier ** min(float(attempts), self._exp_max)
        factor = 1.0 - self.jitter + 2.0 * self.jitter * rand() if self.jitter else 1.0
        return min(term * factor, self.max_ms)
