"""The transactional producer's application events: init, send offsets, commit and abort go to
the network task, which applies them to the TransactionManager and completes them with the
transactional call's result (kafkaio.runtime.events; Java's producer makes these calls on the
TransactionManager under a lock, kafkaio's on one task). ``begin_transaction()`` stays a local
state change, as Java's: it sends nothing, and records sent right after must see it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafkaio.metadata.cluster import TopicPartition
from kafkaio.runtime.events import ApplicationEvent
from kafkaio.structs import ConsumerGroupMetadata, OffsetAndMetadata


@dataclass(slots=True, eq=False)
class InitTransactionsEvent(ApplicationEvent[None]):
    """init_transactions(): InitProducerId (fences older instances of the id)."""


@dataclass(slots=True, eq=False)
class SendOffsetsEvent(ApplicationEvent[None]):
    """send_offsets_to_transaction(): AddOffsetsToTxn, then TxnOffsetCommit."""

    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    group: Any = None  # ConsumerGroupMetadata


@dataclass(slots=True, eq=False)
class CommitTransactionEvent(ApplicationEvent[None]):
    """commit_transaction(): EndTxn(commit) once every record of the transaction is acked."""


@dataclass(slots=True, eq=False)
class AbortTransactionEvent(ApplicationEvent[None]):
    """abort_transaction(): EndTxn(abort); unsent records of the transaction fail."""


__all__ = [
    "AbortTransactionEvent",
    "CommitTransactionEvent",
    "ConsumerGroupMetadata",
    "InitTransactionsEvent",
    "SendOffsetsEvent",
]
