"""A log file for a test broker's output: unlinked at once unless kept, so nothing leaks
when the test process is killed, yet its tail can still be quoted in error messages.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import IO


class LogFile:
    """Where a child process writes stdout/stderr; ``path`` is None unless ``keep``."""

    def __init__(self, prefix: str, *, keep: bool = False) -> None:
        self.file: IO[bytes]
        self.path: Path | None
        if keep:
            fd, name = tempfile.mkstemp(prefix=prefix, suffix=".log")
            self.file = os.fdopen(fd, "w+b")
            self.path = Path(name)
        else:
            self.file = tempfile.TemporaryFile(prefix=prefix, suffix=".log")
            self.path = None

    def write_line(self, text: str) -> None:
        self.file.write(text.encode() + b"\n")
        self.file.flush()

    def tail(self, chars: int = 4000) -> str:
        """The last ``chars`` bytes written (by us or the child), decoded leniently."""
        if self.file.closed:
            if self.path is None or not self.path.exists():
                return ""
            return self.path.read_bytes()[-chars:].decode("utf-8", "replace")
        fd = self.file.fileno()
        size = os.fstat(fd).st_size
        start = max(0, size - chars)
        return os.pread(fd, size - start, start).decode("utf-8", "replace")

    def describe(self) -> str:
        """``"log <path>"`` for kept logs, ``"output"`` otherwise (for error messages)."""
        return f"log {self.path}" if self.path is not None else "output"

    def close(self) -> None:
        self.file.close()
