"""Measure one client run in a fresh child process: wall time, process CPU (every thread,
librdkafka's included), peak RSS, RSS samples; notes raised in the child come back too.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import resource
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Any

from benchmarks import report

MIB = 1024 * 1024
Metrics = dict[str, float]


class ChildError(RuntimeError):
    """A measured run failed in its child process; the message holds its traceback."""


def run_isolated(
    target: Callable[..., Metrics],
    *args: Any,
    timeout: float = 900,
    cpus: frozenset[int] | None = None,
) -> Metrics:
    """``target(*args)`` in a fresh (spawned) Python process, on the cores `cpus` if given
    (every thread it starts too); its metrics plus ``peak_rss_mib``, the child's peak
    resident set size. `target` must be a module-level function (it is pickled by name)."""
    ctx = multiprocessing.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child, args=(sender, target, args, cpus), daemon=True)
    process.start()
    sender.close()
    try:
        if not receiver.poll(timeout):
            raise ChildError(f"{target.__name__}{args!r} did not finish within {timeout:.0f} s")
        status, value, notes = receiver.recv()
    except EOFError:
        process.join(5)
        raise ChildError(
            f"{target.__name__}{args!r}: the child process died (exit code {process.exitcode})"
        ) from None
    finally:
        if process.is_alive():
            process.join(10)
        if process.is_alive():
            process.kill()
            process.join()
        receiver.close()
    for text in notes:
        report.note(text)
    if status != "ok":
        raise ChildError(f"{target.__name__}{args!r} failed in its child process:\n{value}")
    return value  # type: ignore[no-any-return]


def _child(
    sender: Connection,
    target: Callable[..., Metrics],
    args: tuple[Any, ...],
    cpus: frozenset[int] | None,
) -> None:
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
    # peers log expected broker quirks (e.g. aiokafka's InitProducerId on Tansu) as errors;
    # the suites turn what matters into notes
    logging.disable(logging.ERROR)
    try:
        metrics = dict(target(*args))
        metrics.setdefault("peak_rss_mib", peak_rss_mib())  # a JVM child reports its own
        sender.send(("ok", metrics, sorted(report.NOTES)))
    except BaseException:
        sender.send(("error", traceback.format_exc(), sorted(report.NOTES)))
    finally:
        sender.close()


# -- what a child measures --------------------------------------------------------------


def cpu_seconds() -> float:
    """User + system CPU of this process, all threads (getrusage RUSAGE_SELF)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / MIB


def peak_rss_mib() -> float:
    """Peak RSS of this process: VmHWM, else ru_maxrss (which on Linux can include the
    pre-exec peak of the forked parent, so VmHWM is preferred)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Meter:
    """Wall and CPU time of a ``with`` block; ``throughput(records, size)`` gives the
    produce/consume metrics."""

    def __init__(self) -> None:
        self.wall_s = 0.0
        self.cpu_s = 0.0

    def __enter__(self) -> Meter:
        gc.collect()
        self._wall0, self._cpu0 = time.perf_counter(), cpu_seconds()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.wall_s = time.perf_counter() - self._wall0
        self.cpu_s = cpu_seconds() - self._cpu0

    def throughput(self, records: int, size: int) -> Metrics:
        return {
            "msg_per_s": records / self.wall_s,
            "mb_per_s": records * size / self.wall_s / 1e6,
            "cpu_us_per_msg": self.cpu_s / records * 1e6,
            "records": float(records),
        }


class Phases:
    """Times of a consume run's phases: created (before the client is built), first record,
    last record, closed; wall and CPU at each mark. ``metrics(records, size)`` reports the
    steady state (first record to last) as the throughput and CPU per record, and start-up
    (to the first record) and close (after the last) separately, so fixed costs of a client's
    life do not count against its per-record speed."""

    def __init__(self) -> None:
        self.marks: dict[str, tuple[float, float]] = {}

    def mark(self, name: str) -> None:
        if name not in self.marks:
            self.marks[name] = (time.perf_counter(), cpu_seconds())

    def first(self) -> None:
        """Call when the first record arrives (later calls are ignored)."""
        self.mark("first")

    def metrics(self, records: int, size: int) -> Metrics:
        for name in ("created", "first", "last", "closed"):
            if name not in self.marks:
                raise RuntimeError(f"the consume run never marked {name!r}")
        (w0, c0), (w1, c1), (w2, c2), (w3, c3) = (
            self.marks[n] for n in ("created", "first", "last", "closed")
        )
        steady = max(records - 1, 1)  # records after the first one, in w2 - w1
        wall = max(w2 - w1, 1e-9)
        return {
            "msg_per_s": steady / wall,
            "mb_per_s": steady * size / wall / 1e6,
            "cpu_us_per_msg": (c2 - c1) / steady * 1e6,
            "records": float(records),
            "startup_s": w1 - w0,
            "close_s": w3 - w2,
            "whole_msg_per_s": records / (w3 - w0),
        }


class RssSampler:
    """Samples this process's RSS every `interval` seconds in a thread while in ``with``."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.samples.append(rss_mib())

    def __enter__(self) -> RssSampler:
        self.samples.append(rss_mib())
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(rss_mib())

    def summary(self) -> Metrics:
        return {
            "start_rss_mib": self.samples[0],
            "peak_sample_mib": max(self.samples),
            "end_rss_mib": self.samples[-1],
            "growth_mib": max(self.samples) - self.samples[0],
            "rss_samples": float(len(self.samples)),
        }
