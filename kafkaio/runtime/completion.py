"""Completion: the one way an outcome travels from the network task to the application.

Every asynchronous operation a client's network task finishes for the application (an
application event, a group commit or offset lookup, a transactional call) is a Completion:
the network task calls `complete` or `fail` once (later calls are ignored), the application
awaits `wait` or reads `result()`. Sans-I/O until `wait` is called: creating and completing
one needs no event loop, so request managers are tested with plain calls. (A record's
DeliveryFuture is the one other shape: one per record, on the produce hot path.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import anyio

from kafkaio.errors import KafkaTimeoutError

__all__ = ["Completion", "timeout_error"]

T = TypeVar("T")


class Completion(Generic[T]):
    """``done`` once finished; then ``result()`` returns the value or raises the error.

    ``last_error`` keeps the error of the last attempt while the operation is retried, so a
    timeout can say what went wrong; ``error`` is the error it failed with.
    """

    __slots__ = (
        "_callbacks",
        "_last_error",
        "_value",
        "_waiter",
        "done",
        "error",
        "error_source",
    )

    def __init__(self) -> None:
        self.done = False
        self.error: BaseException | None = None
        self._last_error: BaseException | None = None
        # where a manager keeps the last error of its attempts, if it keeps it elsewhere
        self.error_source: Callable[[], BaseException | None] | None = None
        self._value: Any = None
        self._callbacks: list[Callable[[Any], None]] | None = None  # made when one is added
        self._waiter: anyio.Event | None = None

    @property
    def last_error(self) -> BaseException | None:
        """The last error seen while working on it (an attempt being retried), if any."""
        if self.error_source is not None:
            error = self.error_source()
            if error is not None:
                return error
        return self._last_error

    @last_error.setter
    def last_error(self, error: BaseException | None) -> None:
        self._last_error = error

    def errors_from(self, source: Callable[[], BaseException | None]) -> None:
        """Take the last error from `source` (where a manager keeps it) for the timeout."""
        self.error_source = source

    def note_error(self, error: BaseException | None) -> None:
        """Remember the error of an attempt that will be retried (for the timeout)."""
        if error is not None:
            self._last_error = error

    @property
    def value(self) -> T | None:
        """The value it completed with (None before, or after a failure)."""
        return self._value  # type: ignore[no-any-return]

    def complete(self, value: T) -> bool:
        """Finish with `value`; returns False (and does nothing) if already done."""
        if self.done:
            return False
        self._value = value
        self._finish()
        return True

    def succeed(self) -> bool:
        """Finish without a value (``complete(None)``)."""
        return self.complete(None)  # type: ignore[arg-type]

    def fail(self, error: BaseException) -> bool:
        """Finish with `error`; returns False (and does nothing) if already done."""
        if self.done:
            return False
        self.error = error
        self._finish()
        return True

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        """Call ``callback(self)`` when done (at once if it already is)."""
        if self.done:
            callback(self)
        elif self._callbacks is None:
            self._callbacks = [callback]
        else:
            self._callbacks.append(callback)

    def result(self) -> T:
        """The value, or raise the error; it must be done."""
        if self.error is not None:
            raise self.error
        if not self.done:
            raise RuntimeError(f"{self.describe()} is not complete yet")
        return self._value  # type: ignore[no-any-return]

    async def wait(self, timeout_s: float | None = None) -> T:
        """Wait for it; after `timeout_s` seconds (None: no limit) it fails with a
        KafkaTimeoutError naming the last error of its attempts. Then as `result`."""
        if not self.done:
            if self._waiter is None:
                self._waiter = anyio.Event()
            with anyio.move_on_after(timeout_s):
                await self._waiter.wait()
            if not self.done:
                self.fail(
                    timeout_error(
                        self, f"{self.describe()} did not complete within {timeout_s:g} s"
                    )
                )
        return self.result()

    def describe(self) -> str:
        return type(self).__name__

    def _finish(self) -> None:
        self.done = True
        if self._waiter is not None:
            self._waiter.set()
        callbacks = self._callbacks
        if callbacks is not None:
            self._callbacks = None
            for callback in callbacks:
                callback(self)

    def __repr__(self) -> str:
        state = "pending" if not self.done else f"failed: {self.error!r}" if self.error else "done"
        return f"<{self.describe()} {state}>"


def timeout_error(completion: Completion[Any], message: str) -> KafkaTimeoutError:
    """KafkaTimeoutError(`message`) naming the last error of the attempts (its cause too)."""
    cause = completion.last_error
    if cause is not None:
        message = f"{message} (last error: {cause})"
    error = KafkaTimeoutError(message)
    error.__cause__ = cause
    return error
