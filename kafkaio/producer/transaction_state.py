"""The transactional producer's states, its one transition table, and pending call results.

Sans-I/O apart from ``TxnResult.wait`` (an anyio Event, made only if someone awaits early).
"""

from __future__ import annotations

import enum

import anyio

from kafkaio.producer.errors import TransactionStateError


class TxnState(enum.Enum):
    """The states of Java's TransactionManager, with the same names and meaning."""

    UNINITIALIZED = "uninitialized"  # no producer id yet: init_transactions() not called
    INITIALIZING = "initializing"  # InitProducerId (first one, or an epoch bump) under way
    READY = "ready"  # between transactions
    IN_TRANSACTION = "in-transaction"  # begin_transaction() called
    COMMITTING_TRANSACTION = "committing"  # flushing, then EndTxn(commit)
    ABORTING_TRANSACTION = "aborting"  # dropping unsent records, then EndTxn(abort)
    ABORTABLE_ERROR = "abortable-error"  # the transaction failed: only abort is allowed
    FATAL_ERROR = "fatal-error"  # the producer cannot go on: close it


S = TxnState
# target state -> the states it may be entered from (FATAL_ERROR: from any state)
_ALLOWED_FROM: dict[TxnState, frozenset[TxnState]] = {
    S.UNINITIALIZED: frozenset(),
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.ABORTING_TRANSACTION}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset(
        {S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR, S.INITIALIZING}
    ),
    S.FATAL_ERROR: frozenset(TxnState),
}


def check_transition(source: TxnState, target: TxnState) -> None:
    """Raise TransactionStateError unless ``source -> target`` is in the transition table."""
    if source not in _ALLOWED_FROM[target]:
        raise TransactionStateError(
            f"the transactional producer cannot go from state {source.value} to {target.value}"
        )


class TxnResult:
    """The outcome of one transactional call (init, commit, abort, send offsets).

    Completed by the TransactionManager in the network task; the application awaits it. A
    call that timed out on the application side keeps running: calling it again awaits the
    same result, as in the Java client.
    """

    __slots__ = ("what", "done", "error", "_event")

    def __init__(self, what: str) -> None:
        self.what = what
        self.done = False
        self.error: BaseException | None = None
        self._event: anyio.Event | None = None

    def succeed(self) -> None:
        self._finish(None)

    def fail(self, error: BaseException) -> None:
        self._finish(error)

    def _finish(self, error: BaseException | None) -> None:
        if self.done:
            return
        self.done = True
        self.error = error
        if self._event is not None:
            self._event.set()

    async def wait(self) -> None:
        """Wait until completed, then raise its error if it failed."""
        if not self.done:
            if self._event is None:
                self._event = anyio.Event()
            await self._event.wait()
        if self.error is not None:
            raise self.error

    def __repr__(self) -> str:
        state = "pending" if not self.done else "failed" if self.error else "done"
        return f"<TxnResult {self.what} {state}>"
