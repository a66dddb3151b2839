"""RequestHandle: the outcome of one asynchronous group operation (a commit, an offset fetch).

The manager completes it; the consumer turns it into the application event's outcome. It is
a Completion (kafkaio.runtime.completion), the one completion type of the clients.
"""

from __future__ import annotations

from typing import TypeVar

from kafkaio.runtime.completion import Completion

T = TypeVar("T")


class RequestHandle(Completion[T]):
    """``done`` once finished; then either ``value`` is set or ``error`` is not None."""

    __slots__ = ()
