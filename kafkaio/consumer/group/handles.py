"""RequestHandle: the outcome of one asynchronous group operation (a commit, an offset fetch).

The manager completes it; the reactor turns it into a future for the application.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from kafkaio.errors import KafkaError

T = TypeVar("T")


class RequestHandle(Generic[T]):
    """``done`` once finished; then either ``result`` is set or ``error`` is not None."""

    __slots__ = ("_callbacks", "done", "error", "last_error", "result")

    def __init__(self) -> None:
        self.done = False
        self.result: T | None = None
        self.error: KafkaError | None = None
        # the error of the last attempt, while the operation is retried (for timeouts)
        self.last_error: KafkaError | None = None
        self._callbacks: list[Callable[[RequestHandle[T]], None]] = []

    def add_done_callback(self, callback: Callable[[RequestHandle[T]], None]) -> None:
        """Call ``callback(handle)`` when done (at once if it already is)."""
        if self.done:
            callback(self)
        else:
            self._callbacks.append(callback)

    def complete(self, result: T) -> bool:
        """Finish with ``result``; returns False (and does nothing) if already done."""
        if self.done:
            return False
        self.result = result
        self._finish()
        return True

    def fail(self, error: KafkaError) -> bool:
        """Finish with ``error``; returns False (and does nothing) if already done."""
        if self.done:
            return False
        self.error = error
        self._finish()
        return True

    def _finish(self) -> None:
        self.done = True
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def __repr__(self) -> str:
        if not self.done:
            return "<RequestHandle pending>"
        if self.error is not None:
            return f"<RequestHandle failed: {self.error!r}>"
        return f"<RequestHandle done: {self.result!r}>"
