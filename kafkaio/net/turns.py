"""Turns to write, in the order the senders asked.

A sender that must wait (for an in-flight slot, or behind another sender) takes a turn
before its first await. Waking does not keep order: trio runs the tasks it wakes together
in either order, and on asyncio a request made from a callback can run before a sender
that was just woken. Turns do: only the sender at the head of the line goes on, so requests
to a broker go out in the order they were made (the producer relies on it when several
batches of a partition are in flight). A Connection keeps one line for its writes; the
network driver one per broker for requests waiting for their connection.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import anyio


def _always() -> bool:
    return True


class Turn:
    """One sender's place in a `Turns` line."""

    __slots__ = ("ready",)

    def __init__(self) -> None:
        self.ready: anyio.Event | None = None  # made when the sender waits; set at the head


class Turns:
    """The senders of one connection that have not written yet, in the order they came."""

    __slots__ = ("_line",)

    def __init__(self) -> None:
        self._line: deque[Turn] = deque()

    def __bool__(self) -> bool:
        """True while a sender waits to write: a newcomer must not write before it."""
        return bool(self._line)

    def join(self) -> Turn:
        """A place at the end of the line (take it before the sender's first await)."""
        turn = Turn()
        self._line.append(turn)
        return turn

    def first(self, turn: Turn) -> bool:
        """True if no sender is ahead of `turn`."""
        return self._line[0] is turn

    async def wait(self, turn: Turn, ready: Callable[[], bool] = _always) -> None:
        """Return once every sender ahead of `turn` has left and ``ready()`` holds (at once
        if both do). Whoever makes ``ready()`` true calls `notify`."""
        line = self._line
        while line[0] is not turn or not ready():
            if turn.ready is None or turn.ready.is_set():
                turn.ready = anyio.Event()
            await turn.ready.wait()

    def notify(self) -> None:
        """Wake the sender at the head of the line: what it waits for may have come."""
        if self._line:
            head = self._line[0].ready
            if head is not None:
                head.set()

    def leave(self, turn: Turn) -> None:
        """`turn` wrote (or gave up): the next sender may go. Call exactly once per turn."""
        line = self._line
        if line[0] is turn:
            line.popleft()
            if line and line[0].ready is not None:
                line[0].ready.set()
        else:  # gave up before its turn (cancelled, timed out); by identity, not equality
            del line[next(i for i, t in enumerate(line) if t is turn)]
