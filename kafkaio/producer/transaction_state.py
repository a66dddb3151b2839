"""The transactional producer's states, its one transition table, and pending call results.

Sans-I/O apart from ``TxnResult.wait`` (an anyio Event, made only if someone awaits early).
"""

from __future__ import annotations

import enum

from kafkaio.producer.errors import TransactionStateError
from kafkaio.runtime.completion import Completion


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


class TxnResult(Completion[None]):
    """The outcome of one transactional call (init, commit, abort, send offsets): a
    Completion (kafkaio.runtime.completion) named after the call.

    Completed by the TransactionManager in the network task; the application awaits it. A
    call that timed out on the application side keeps running: calling it again awaits the
    same result, as in the Java client.
    """

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what

    def describe(self) -> str:
        return f"TxnResult {self.what}"
