"""``async for record in consumer``: each step takes the next record already fetched.

A module of its own so that the optional mypyc build (``make accel``) compiles the step: a
compiled coroutine costs about half what an interpreted one does, and `async for` runs one
per record. Anything but a record already at hand (none left, a background event to
deliver, an unsubscribe under way, a closed consumer) goes to ``Consumer.__anext__``.
"""

from __future__ import annotations

from collections import deque
from typing import Any


class IterationGate:
    """One per consumer: ``open`` except while an unsubscribe is under way (it reopens once
    that is done) and once the consumer is closed; while shut, every step goes through
    ``Consumer.__anext__``. A native attribute, so the compiled step reads it without a
    Python attribute lookup."""

    def __init__(self) -> None:
        self.open = True


class RecordIterator:
    """What ``Consumer.__aiter__`` returns: one per `async for` loop."""

    def __init__(
        self, consumer: Any, gate: IterationGate, pending: deque[Any], background: deque[Any]
    ) -> None:
        self._consumer = consumer  # a Consumer (not imported: it is not compiled)
        self._gate = gate
        self._pending = pending  # the consumer's records fetched and not handed out yet
        self._background = background  # its background events (errors, callbacks)

    def __aiter__(self) -> RecordIterator:
        return self

    async def __anext__(self) -> Any:
        if self._gate.open and not self._background:
            pending = self._pending
            if pending:
                return pending.popleft()
        return await self._consumer.__anext__()
