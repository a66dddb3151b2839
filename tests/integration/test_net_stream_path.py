"""The anyio stream path of Connection (what TLS and trio use) passes the same connection
and hostile-broker tests on asyncio as the AsyncioWire fast path, which they run on by
default."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kafkaio.net.connection as connection

TESTS = Path(__file__).parent.parent


def test_default_asyncio_connections_use_the_wire() -> None:
    assert connection.USE_ASYNCIO_WIRE is (os.environ.get("KAFKAIO_ASYNCIO_WIRE", "1") != "0")


def test_stream_path_passes_the_connection_suites() -> None:
    if os.environ.get("KAFKAIO_ASYNCIO_WIRE") == "0":  # before: a silent return, a pass
        pytest.skip(
            "KAFKAIO_ASYNCIO_WIRE=0: this run takes the stream path already, so the suites "
            "below run in this process"
        )
    env = dict(os.environ, KAFKAIO_ASYNCIO_WIRE="0")
    suites = [
        TESTS / "integration" / "test_net.py",
        TESTS / "chaos" / "test_hostile_broker.py",
        TESTS / "leaks" / "test_deadlines.py",
    ]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *map(str, suites)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout
