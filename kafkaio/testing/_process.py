"""Child processes of the test-broker helpers: they die with the thread that started them."""

from __future__ import annotations

import signal
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn`` that makes the child get ``sig`` when the starting thread ends.

    Linux only (prctl PR_SET_PDEATHSIG); elsewhere the child outlives a killed parent.
    """

    def preexec() -> None:  # runs in the child between fork and exec
        import ctypes

        try:
            libc = ctypes.CDLL(None)
            libc.prctl(_PR_SET_PDEATHSIG, sig)
        except (OSError, AttributeError):
            pass

    return preexec
