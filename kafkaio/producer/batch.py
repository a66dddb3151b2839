"""ProducerBatch: the records of one partition travelling together, and their completion.

Sans-I/O apart from ``wait`` (an anyio Event, made only if someone awaits before the end).
"""

from __future__ import annotations

import logging

import anyio

from kafkaio.metadata.cluster import TopicPartition
from kafkaio.producer.future import DeliveryFuture
from kafkaio.records import BatchBuilder

NO_SEQUENCE = -1
_FINISHED = BatchBuilder()  # stands in for the builder of every completed batch

log = logging.getLogger("kafkaio.producer")


class ProducerBatch:
    """Records appended to one partition, sent in one ProduceRequest, completed at once.

    ``deadline_ms`` is creation time + delivery_timeout_ms: a batch still undelivered then
    fails. ``base_sequence`` is assigned when the batch is first drained by an idempotent
    producer and kept across retries (until an epoch bump re-sequences pending batches).
    """

    __slots__ = (
        "tp",
        "builder",
        "created_ms",
        "deadline_ms",
        "attempts",
        "retry_at_ms",
        "last_error",
        "base_sequence",
        "producer_id",
        "producer_epoch",
        "reserved_bytes",
        "futures",
        "with_callbacks",
        "in_flight",
        "closed",
        "full",
        "done",
        "error",
        "base_offset",
        "log_append_time",
        "_payload",
        "_event",
        "_record_count",
        "limit",
        "observed",
        "parent",
        "parts",
    )

    def __init__(
        self,
        tp: TopicPartition,
        builder: BatchBuilder,
        now: float,
        deadline: float,
        limit: int = 16384,
    ) -> None:
        self.tp = tp
        self.limit = limit  # uncompressed bytes at which the batch is full
        self.observed = False  # its compression ratio went into the topic's estimate
        self.builder = builder
        self.created_ms = now
        self.deadline_ms = deadline
        self.attempts = 0
        self.retry_at_ms = 0.0
        self.last_error: BaseException | None = None  # why the last attempt failed
        self.base_sequence = NO_SEQUENCE
        self.producer_id = -1
        self.producer_epoch = -1
        self.reserved_bytes = 0
        self.futures: list[DeliveryFuture] = []
        self.with_callbacks: list[DeliveryFuture] = []
        self.in_flight = False
        self.closed = False  # no more appends (drained, at its capacity, or being retried)
        # `limit` reached: ready to send; it takes more records until it is drained (see
        # RecordAccumulator: a full batch grows while it waits for the network task)
        self.full = False
        self.done = False
        self.error: BaseException | None = None
        self.base_offset = -1
        self.log_append_time = -1
        self._payload: bytes | None = None
        self._event: anyio.Event | None = None
        self._record_count = -1  # set when done (the builder is dropped then)
        # A batch the broker found too large is split (see RecordAccumulator.split): its
        # records go on in `parts` (first record index, part), each part knows its `parent`,
        # and the batch completes once every part has.
        self.parent: ProducerBatch | None = None
        self.parts: list[tuple[int, ProducerBatch]] | None = None

    @property
    def record_count(self) -> int:
        if self._record_count >= 0:
            return self._record_count
        return self.builder.record_count

    def size_in_bytes(self) -> int:
        """Uncompressed size with header: an upper bound of the encoded size."""
        return self.builder.size_in_bytes()

    def set_producer_state(self, producer_id: int, epoch: int, base_sequence: int) -> None:
        if (producer_id, epoch, base_sequence) != (
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
        ):
            self.producer_id, self.producer_epoch = producer_id, epoch
            self.base_sequence = base_sequence
            self._payload = None

    def payload(self) -> bytes:
        """The encoded (compressed) batch; built once and reused by retries."""
        if self._payload is None:
            builder = self.builder
            builder.set_producer_state(self.producer_id, self.producer_epoch, self.base_sequence)
            self._payload = builder.build(0)
        return self._payload

    # -- completion ----------------------------------------------------------------------

    def complete(self, base_offset: int, log_append_time: int) -> bool:
        """Mark delivered at ``base_offset``; False if it was already completed."""
        if self.done:
            return False
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self._finish()
        return True

    def fail(self, error: BaseException) -> bool:
        """Mark failed with ``error``; False if it was already completed."""
        if self.done:
            return False
        self.error = error
        self._finish()
        return True

    def locate(self, index: int) -> tuple[ProducerBatch, int]:
        """The batch that carried record ``index`` of this one, and its index there (itself
        unless the batch was split)."""
        batch = self
        while batch.parts is not None:
            for start, part in reversed(batch.parts):
                if index >= start:
                    batch, index = part, index - start
                    break
        return batch, index

    def part_done(self) -> bool:
        """One of this split batch's parts completed: complete the batch too once all have
        (failed with the first part's error, if any failed). True if it completed now."""
        parts = self.parts
        if self.done or parts is None or not all(part.done for _, part in parts):
            return False
        self.error = next((p.error for _, p in parts if p.error is not None), None)
        self._finish()  # its records' offsets are their parts' (see locate)
        return True

    def _finish(self) -> None:
        self.done = True
        self.closed = True  # a completed batch takes no more records
        self.in_flight = False
        self._payload = None
        # the records' futures may live on: free the builder's buffer now
        self._record_count = self.builder.record_count
        self.builder = _FINISHED
        if self._event is not None:
            self._event.set()
        for fut in self.with_callbacks:
            try:
                fut._run_callbacks()
            except Exception:  # a user callback must not stop the network task
                log.exception("a delivery callback of a record for %s raised", self.tp)
        self.with_callbacks = []

    async def wait(self) -> None:
        """Wait until the batch is completed (delivered or failed)."""
        if not self.done:
            if self._event is None:
                self._event = anyio.Event()
            await self._event.wait()

    def __repr__(self) -> str:
        return (
            f"<ProducerBatch {self.tp} records={self.record_count} seq={self.base_sequence} "
            f"attempts={self.attempts} done={self.done}>"
        )
