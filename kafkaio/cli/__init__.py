"""The ``kafkaio`` command-line tool (console script and ``python -m kafkaio``).

``main(argv)`` parses the arguments, runs one command and returns its exit code.
"""

from __future__ import annotations

from kafkaio.cli.app import main

__all__ = ["main"]
