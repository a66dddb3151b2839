"""timeout_ms_arg: every client's close() and the producer's flush() take milliseconds; the
deprecated seconds still work, with a warning; a wait that is not a number >= 0 is refused."""

from __future__ import annotations

import math

import pytest

from kafkaio.errors import KafkaConfigError
from kafkaio.runtime.shell import timeout_ms_arg


def test_milliseconds_pass_and_none_means_the_default() -> None:
    assert timeout_ms_arg(250, None, None, "Producer.flush") == 250.0
    assert timeout_ms_arg(None, None, 30_000, "Consumer.close") == 30_000
    assert timeout_ms_arg(None, None, None, "Producer.close") is None


def test_seconds_are_deprecated_and_converted() -> None:
    with pytest.warns(DeprecationWarning, match=r"Producer.flush\(timeout=...\) in seconds"):
        assert timeout_ms_arg(None, 1.5, None, "Producer.flush") == 1500.0
    with pytest.warns(DeprecationWarning, match=r"use close\(timeout_ms=...\)"):
        assert timeout_ms_arg(None, 2, None, "Producer.close") == 2000.0


@pytest.mark.parametrize("bad", [-1, math.nan, "100", True])
def test_a_wait_that_is_not_a_number_of_ms_is_refused(bad: object) -> None:
    with pytest.raises(KafkaConfigError, match=r"Producer.close\(\) timeout_ms must be a number >= 0"):
        timeout_ms_arg(bad, None, None, "Producer.close")  # type: ignore[arg-type]
