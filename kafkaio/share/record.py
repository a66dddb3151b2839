"""ShareRecord: a record a share consumer acquired, with its delivery count and its ack verbs.

``await record.ack()`` / ``release()`` / ``reject()`` record the decision; it is sent with the
next poll or ``commit()`` (explicit acknowledgement mode).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from kafkaio.share.acknowledgements import AcknowledgeType

K = TypeVar("K")
V = TypeVar("V")

# (record, type) -> awaitable: the consumer's acknowledge, bound when the record is made
Acknowledger = Callable[["ShareRecord[Any, Any]", AcknowledgeType], Awaitable[None]]


async def _unbound(record: ShareRecord[Any, Any], ack_type: AcknowledgeType) -> None:
    from kafkaio.share.errors import AcknowledgementError

    raise AcknowledgementError(
        f"{record.topic}[{record.partition}] offset {record.offset} was not delivered by a "
        "ShareConsumer; acknowledge records through the consumer that returned them"
    )


@dataclass(slots=True, eq=False)
class ShareRecord(Generic[K, V]):
    """One acquired record. ``delivery_count`` is 1 on first delivery and grows with each
    redelivery (after a release, a lock timeout or a consumer leaving)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: K
    value: V
    headers: Sequence[tuple[str, bytes | None]]
    delivery_count: int
    _acknowledger: Acknowledger = field(default=_unbound, repr=False)

    async def ack(self) -> None:
        """Accept: processed, never delivered again."""
        await self._acknowledger(self, AcknowledgeType.ACCEPT)

    async def release(self) -> None:
        """Release: not processed; deliver again (to this or another consumer)."""
        await self._acknowledger(self, AcknowledgeType.RELEASE)

    async def reject(self) -> None:
        """Reject: unprocessable; never delivered again."""
        await self._acknowledger(self, AcknowledgeType.REJECT)
