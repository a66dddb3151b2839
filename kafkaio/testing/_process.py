"""Child processes of the test-broker helpers: they die with the process that started them.

Linux's PR_SET_PDEATHSIG signals a child when the *thread* that forked it ends, not the
process. A broker started from a worker thread (a fixture run through ``anyio.to_thread``,
a restart after a fault) would be killed when that thread ends, so `popen_tied` forks from
the main thread, or else from one spawner thread that lives as long as the process: either
way the child is signalled when the process dies (a test run killed by its CI timeout, a
SIGKILL), and only then.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

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


_Job = tuple[Callable[[], "subprocess.Popen[Any]"], "Future[subprocess.Popen[Any]]"]
_jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
_spawner: threading.Thread | None = None
_spawner_lock = threading.Lock()


def _spawn_forever() -> None:
    while True:
        start, future = _jobs.get()
        try:
            future.set_result(start())
        except BaseException as exc:  # handed to the caller's thread
            future.set_exception(exc)


def popen_tied(
    args: Any, *, sig: int = signal.SIGTERM, **kwargs: Any
) -> subprocess.Popen[Any]:
    """``subprocess.Popen(args, **kwargs)`` whose child gets ``sig`` when this process dies,
    whichever thread calls it (see the module's docstring)."""

    def start() -> subprocess.Popen[Any]:
        return subprocess.Popen(args, preexec_fn=die_with_parent(sig), **kwargs)  # noqa: PLW1509

    if threading.current_thread() is threading.main_thread():
        return start()
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = threading.Thread(
                target=_spawn_forever, name="kafkaio-testing-spawner", daemon=True
            )
            _spawner.start()
    future: Future[subprocess.Popen[Any]] = Future()
    _jobs.put((start, future))
    return future.result()
