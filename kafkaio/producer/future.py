"""What the application gets back for a record: RecordMetadata and the DeliveryFuture to await.

A future belongs to its ProducerBatch; the batch completes all its futures at once.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkaio.errors import KafkaError

if TYPE_CHECKING:
    from kafkaio.producer.batch import ProducerBatch


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where a record landed: its topic, partition and offset, as the broker acknowledged.

    ``offset`` is -1 with acks=0 (the broker does not answer). ``timestamp`` is the broker's
    log-append time when the topic uses LogAppendTime, else the record's own timestamp.
    Sizes are -1 for a null key or value.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int


class DeliveryFuture:
    """The outcome of one record: ``await fut`` gives RecordMetadata or raises the error.

    ``done()``, ``result()``, ``exception()`` and ``add_done_callback(fn)`` work without
    awaiting. Callbacks run in the producer's network task; keep them short and non-blocking.
    """

    __slots__ = ("_batch", "_index", "_timestamp", "_key_size", "_value_size", "_callbacks")

    def __init__(
        self, batch: ProducerBatch, index: int, timestamp: int, key_size: int, value_size: int
    ) -> None:
        self._batch = batch
        self._index = index
        self._timestamp = timestamp
        self._key_size = key_size
        self._value_size = value_size
        self._callbacks: list[Callable[[DeliveryFuture], Any]] | None = None

    def done(self) -> bool:
        return self._batch.done

    @property
    def batch_closed(self) -> bool:
        """True once the record's batch takes no more records (sent, or at its capacity:
        a full batch takes records until it is sent, see RecordAccumulator)."""
        return self._batch.closed

    def exception(self) -> BaseException | None:
        """The delivery error, or None once delivered. Raises if not done yet."""
        batch = self._batch
        if not batch.done:
            raise KafkaError("the record is not delivered yet: await the future first")
        if batch.parts is not None:  # split: the part that carried this record tells
            return batch.locate(self._index)[0].error
        return batch.error

    def result(self) -> RecordMetadata:
        """The record's metadata; raises its delivery error, or if it is not done yet."""
        batch = self._batch
        if not batch.done:
            raise KafkaError("the record is not delivered yet: await the future first")
        index = self._index
        if batch.parts is not None:  # split: the part that carried this record tells
            batch, index = batch.locate(index)
        if batch.error is not None:
            raise batch.error
        offset = batch.base_offset + index if batch.base_offset >= 0 else -1
        timestamp = batch.log_append_time if batch.log_append_time >= 0 else self._timestamp
        return RecordMetadata(
            batch.tp.topic,
            batch.tp.partition,
            offset,
            timestamp,
            self._key_size,
            self._value_size,
        )

    def add_done_callback(self, fn: Callable[[DeliveryFuture], Any]) -> None:
        """Call ``fn(future)`` once the record is delivered or failed (now, if it is done)."""
        if self._batch.done:
            fn(self)
            return
        if self._callbacks is None:
            self._callbacks = []
            self._batch.with_callbacks.append(self)
        self._callbacks.append(fn)

    def _run_callbacks(self) -> None:
        callbacks, self._callbacks = self._callbacks, None
        for fn in callbacks or ():
            fn(self)

    async def wait(self) -> RecordMetadata:
        """Wait for the outcome; the same as ``await future``."""
        await self._batch.wait()
        return self.result()

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        return self.wait().__await__()

    def __repr__(self) -> str:
        state = "pending" if not self._batch.done else "failed" if self._batch.error else "done"
        return f"<DeliveryFuture {self._batch.tp} #{self._index} {state}>"
