"""A small progress display: a bar with rate on a terminal, a few plain lines when piped."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Counts items towards a total and shows the rate. Cheap to call per batch, not per item."""

    def __init__(self, label: str, total: int, *, stream: TextIO | None = None) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.bytes = 0
        self._stream = stream or sys.stdout
        self._tty = self._stream.isatty()
        self._start = time.perf_counter()
        self._last_draw = 0.0
        self._next_line_pct = 25
        self._printed_at = -1

    def update(self, items: int, nbytes: int = 0) -> None:
        self.done += items
        self.bytes += nbytes
        now = time.perf_counter()
        if self._tty:
            if now - self._last_draw >= 0.1 or self.done >= self.total:
                self._last_draw = now
                self._draw(now)
        elif self.total and self.done * 100 >= self._next_line_pct * self.total:
            while self.done * 100 >= self._next_line_pct * self.total:
                self._next_line_pct += 25
            self._stream.write(self._line(now) + "\n")
            self._stream.flush()
            self._printed_at = self.done

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self._start

    def _line(self, now: float) -> str:
        secs = max(now - self._start, 1e-9)
        pct = 100.0 * self.done / self.total if self.total else 100.0
        return (
            f"{self.label:<9} {self.done:>10,}/{self.total:,} ({pct:5.1f}%) "
            f"{self.done / secs:>11,.0f} msg/s {self.bytes / secs / 1e6:>7.1f} MB/s"
        )

    def _draw(self, now: float) -> None:
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        bar = "#" * filled + "-" * (width - filled)
        self._stream.write(f"\r[{bar}] {self._line(now)}")
        self._stream.flush()

    def finish(self) -> float:
        """End the display; returns the elapsed seconds."""
        now = time.perf_counter()
        if self._tty:
            self._draw(now)
            self._stream.write("\n")
        elif self._printed_at != self.done:
            self._stream.write(self._line(now) + "\n")
        self._stream.flush()
        return now - self._start
