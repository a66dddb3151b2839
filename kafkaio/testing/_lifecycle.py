"""``with`` support shared by the test brokers that start and stop processes."""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

_B = TypeVar("_B", bound="StartStop")


class StartStop:
    """``with broker:`` starts it (``start()`` returns the broker) and stops it after."""

    def start(self: _B) -> _B:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self: _B) -> _B:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
