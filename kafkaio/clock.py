"""The clients' monotonic clock: anyio's clock, read cheaply.

On asyncio, anyio's clock is the event loop's ``time()``; reading it directly skips anyio's
backend lookup (a few µs, which the network path pays several times per request).
"""

from __future__ import annotations

import asyncio

import anyio


def monotonic() -> float:
    """Seconds on anyio's clock (the running event loop's clock)."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:  # not asyncio (trio)
        return anyio.current_time()
