"""Acknowledgement state of acquired records: per partition, per offset, sans-I/O.

Records move ACQUIRED -> PENDING (acknowledged locally) -> IN_FLIGHT (sent) -> gone; the
acquisition-lock deadline and the acquiring share session decide when an ack cannot apply.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from kafkaio.errors import KafkaError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.share.errors import (
    AcknowledgementError,
    AcquisitionLockTimeoutError,
    ShareSessionResetError,
)
from kafkaio.share.protocol import AckBatch


class AcknowledgeType(enum.IntEnum):
    """How a record is acknowledged (the wire values of KIP-932)."""

    ACCEPT = 1  # processed: never delivered again
    RELEASE = 2  # not processed: deliver again (delivery count + 1)
    REJECT = 3  # unprocessable: never delivered again (archived)


GAP = 0  # an acquired offset with no record (compacted, or a transaction marker)


class DeliveryState(enum.Enum):
    ACQUIRED = "acquired"  # delivered to the application, not acknowledged yet
    PENDING = "pending"  # acknowledged by the application, not sent yet
    IN_FLIGHT = "in_flight"  # sent, the broker has not answered yet


@dataclass(slots=True)
class Delivery:
    """One acquired offset: where it came from and how far its acknowledgement got."""

    offset: int
    delivery_count: int
    lock_deadline_ms: float
    node_id: int
    session_id: int
    state: DeliveryState = DeliveryState.ACQUIRED
    ack_type: int | None = None


@dataclass(frozen=True, slots=True)
class AckOutcome:
    """What became of acknowledgements: offsets of one partition and the error, if any."""

    partition: TopicPartition
    offsets: tuple[int, ...]
    error: KafkaError | None


class Acknowledgements:
    """Tracks every acquired record of one share consumer until its ack is answered.

    Time (``now``, ms) is always an argument. ``acquired`` registers records from a ShareFetch
    response; ``acknowledge`` records the application's decision (raising at once when the
    lock has expired or the session that acquired the record is gone); ``take`` moves the
    pending decisions of a partition into wire batches; ``complete`` settles them.
    """

    def __init__(self) -> None:
        self._parts: dict[TopicPartition, dict[int, Delivery]] = {}

    # -- registering and deciding -----------------------------------------------------------

    def acquired(
        self,
        tp: TopicPartition,
        offset: int,
        delivery_count: int,
        lock_deadline_ms: float,
        node_id: int,
        session_id: int,
    ) -> Delivery | None:
        """Register an acquired offset; None if it repeats a delivery this consumer holds.

        (librdkafka's mock broker re-sends the records a member holds in every ShareFetch
        response until they are acknowledged; a repeat must not reach the application twice.)
        """
        part = self._parts.setdefault(tp, {})
        held = part.get(offset)
        if (
            held is not None
            and held.delivery_count == delivery_count
            and held.session_id == session_id
        ):
            return None
        delivery = Delivery(offset, delivery_count, lock_deadline_ms, node_id, session_id)
        part[offset] = delivery
        return delivery

    def acknowledge(
        self,
        tp: TopicPartition,
        offset: int,
        ack_type: int,
        now: float,
        delivery_count: int | None = None,
    ) -> None:
        """ACQUIRED -> PENDING; raises AcknowledgementError if the ack cannot apply.

        ``delivery_count`` (the record's) tells a stale copy from a later redelivery of the
        same offset: acknowledging the stale one fails like an expired lock.
        """
        delivery = self._parts.get(tp, {}).get(offset)
        if delivery is None:
            raise AcknowledgementError(
                f"{tp} offset {offset} is not a record this consumer holds: it was never "
                "delivered here, was already acknowledged and sent, or its session ended"
            )
        if delivery_count is not None and delivery_count != delivery.delivery_count:
            raise AcquisitionLockTimeoutError(
                f"{tp} offset {offset}: this copy is delivery {delivery_count}, but the "
                f"acquisition lock expired and the record was delivered again (delivery "
                f"{delivery.delivery_count}); acknowledge the newer copy"
            )
        if delivery.state is not DeliveryState.ACQUIRED:
            raise AcknowledgementError(
                f"{tp} offset {offset} was already acknowledged "
                f"({_type_name(delivery.ack_type)}); acknowledge each record once"
            )
        if now >= delivery.lock_deadline_ms:
            del self._parts[tp][offset]
            raise AcquisitionLockTimeoutError(
                f"{tp} offset {offset}: the acquisition lock expired "
                f"{now - delivery.lock_deadline_ms:.0f} ms ago, so the broker released the "
                "record for redelivery and this acknowledgement cannot apply. Acknowledge "
                "sooner or poll fewer records at a time (max_poll_records)"
            )
        delivery.state = DeliveryState.PENDING
        delivery.ack_type = int(ack_type)

    def acknowledge_gap(self, tp: TopicPartition, offset: int) -> None:
        """An acquired offset with no record: acknowledged as a gap without the application."""
        delivery = self._parts.get(tp, {}).get(offset)
        if delivery is not None and delivery.state is DeliveryState.ACQUIRED:
            delivery.state = DeliveryState.PENDING
            delivery.ack_type = GAP

    def state(self, tp: TopicPartition, offset: int) -> DeliveryState | None:
        delivery = self._parts.get(tp, {}).get(offset)
        return None if delivery is None else delivery.state

    def is_held(self, tp: TopicPartition, offset: int, now: float) -> bool:
        """True while the record is ACQUIRED and its lock has not expired (else forget it)."""
        part = self._parts.get(tp)
        delivery = None if part is None else part.get(offset)
        if delivery is None or delivery.state is not DeliveryState.ACQUIRED:
            return False
        if now >= delivery.lock_deadline_ms:
            del part[offset]  # type: ignore[union-attr]
            return False
        return True

    def unacknowledged(self, tp: TopicPartition, offset: int, delivery_count: int) -> bool:
        """True if this delivery of the record is held and not acknowledged yet."""
        d = self._parts.get(tp, {}).get(offset)
        return (
            d is not None
            and d.state is DeliveryState.ACQUIRED
            and d.delivery_count == delivery_count
        )

    def outstanding(self) -> dict[TopicPartition, set[int]]:
        """Offsets acknowledged but not answered yet (PENDING or IN_FLIGHT), by partition."""
        out: dict[TopicPartition, set[int]] = {}
        for tp, part in self._parts.items():
            offsets = {o for o, d in part.items() if d.state is not DeliveryState.ACQUIRED}
            if offsets:
                out[tp] = offsets
        return out

    # -- sending ------------------------------------------------------------------------------

    def pending_partitions(self, node_id: int | None = None) -> list[TopicPartition]:
        """Partitions with decisions not sent yet (of the sessions on ``node_id``)."""
        return [
            tp
            for tp, part in self._parts.items()
            if any(
                d.state is DeliveryState.PENDING and (node_id is None or d.node_id == node_id)
                for d in part.values()
            )
        ]

    def take(self, tp: TopicPartition) -> tuple[list[AckBatch], tuple[int, ...]]:
        """PENDING -> IN_FLIGHT for one partition; returns the wire batches and their offsets.

        Consecutive offsets form one batch; a batch whose offsets share one type sends it
        once, otherwise one type per offset (both forms are KIP-932's).
        """
        part = self._parts.get(tp, {})
        pending = sorted(o for o, d in part.items() if d.state is DeliveryState.PENDING)
        batches: list[AckBatch] = []
        run: list[int] = []
        for offset in pending:
            if run and offset != run[-1] + 1:
                batches.append(_batch(part, run))
                run = []
            run.append(offset)
            part[offset].state = DeliveryState.IN_FLIGHT
        if run:
            batches.append(_batch(part, run))
        return batches, tuple(pending)

    def complete(
        self, tp: TopicPartition, offsets: Iterable[int], error: KafkaError | None
    ) -> AckOutcome:
        """The broker answered (or the request failed): IN_FLIGHT offsets are settled."""
        part = self._parts.get(tp, {})
        settled = []
        for offset in offsets:
            delivery = part.get(offset)
            if delivery is not None and delivery.state is DeliveryState.IN_FLIGHT:
                del part[offset]
                settled.append(offset)
        if not part:
            self._parts.pop(tp, None)
        return AckOutcome(tp, tuple(settled), error)

    def session_ended(self, node_id: int, session_id: int, reason: str) -> list[AckOutcome]:
        """A share session closed or was reset: its records were released by the broker.

        Records not yet answered (ACQUIRED or PENDING) are dropped; the PENDING ones are
        reported as failed. IN_FLIGHT ones are settled by their own request's outcome.
        """
        outcomes = []
        for tp in list(self._parts):
            part = self._parts[tp]
            dropped_pending = []
            for offset, d in list(part.items()):
                if d.node_id != node_id or d.session_id != session_id:
                    continue
                if d.state is DeliveryState.IN_FLIGHT:
                    continue
                del part[offset]
                if d.state is DeliveryState.PENDING and d.ack_type != GAP:
                    dropped_pending.append(offset)
            if dropped_pending:
                error = ShareSessionResetError(
                    f"{tp} offsets {_span(dropped_pending)}: the share session on node "
                    f"{node_id} ended before the acknowledgement was sent ({reason}); the "
                    "broker released these records for redelivery"
                )
                outcomes.append(AckOutcome(tp, tuple(dropped_pending), error))
            if not part:
                del self._parts[tp]
        return outcomes

    def forget_expired(self, now: float) -> int:
        """Drop ACQUIRED records whose lock expired (the broker already released them)."""
        dropped = 0
        for tp in list(self._parts):
            part = self._parts[tp]
            for offset, d in list(part.items()):
                if d.state is DeliveryState.ACQUIRED and now >= d.lock_deadline_ms:
                    del part[offset]
                    dropped += 1
            if not part:
                del self._parts[tp]
        return dropped

    def __len__(self) -> int:
        return sum(len(p) for p in self._parts.values())


def _batch(part: dict[int, Delivery], run: list[int]) -> AckBatch:
    types = [int(part[o].ack_type or 0) for o in run]
    if all(t == types[0] for t in types):
        types = types[:1]
    return AckBatch(run[0], run[-1], types)


def _type_name(ack_type: int | None) -> str:
    if ack_type == GAP:
        return "GAP"
    return AcknowledgeType(ack_type).name if ack_type is not None else "none"


def _span(offsets: list[int]) -> str:
    return str(offsets[0]) if len(offsets) == 1 else f"{offsets[0]}..{offsets[-1]}"
