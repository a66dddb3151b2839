"""Which async library runs the current code, without depending on sniffio.

anyio (from 4.16) no longer depends on sniffio: it uses sniffio when it is installed (trio
brings it) and otherwise assumes asyncio whenever an asyncio loop runs. These helpers follow
the same rule, so kafkaio needs nothing beyond anyio.
"""

from __future__ import annotations

import asyncio
from typing import Any

sniffio: Any
try:
    import sniffio
except ImportError:  # not installed: only asyncio can be running (trio needs sniffio)
    sniffio = None


def running_asyncio() -> bool:
    """True when the calling code runs under asyncio (a task or a loop callback)."""
    if sniffio is not None:
        try:
            return bool(sniffio.current_async_library() == "asyncio")
        except sniffio.AsyncLibraryNotFoundError:
            pass
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def enter_asyncio_callback() -> Any:
    """Run an asyncio loop callback (outside any task) as anyio code may: where sniffio is
    installed, anyio asks it for the backend, and it finds no task in a callback, so say it
    is asyncio until `exit_asyncio_callback` (given what this returns). Without sniffio
    anyio sees the running loop by itself."""
    if sniffio is None:
        return None
    return sniffio.current_async_library_cvar.set("asyncio")


def exit_asyncio_callback(token: Any) -> None:
    if token is not None:
        sniffio.current_async_library_cvar.reset(token)
