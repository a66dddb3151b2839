"""The step of ``async for record in consumer`` (RecordIterator, compiled by ``make accel``):
records already fetched are handed out in order; anything else goes to the consumer."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest

from kafkaio.consumer.iteration import IterationGate, RecordIterator


class FakeConsumer:
    """The consumer's side of the iterator: its gate, and ``__anext__`` for the rest."""

    def __init__(self) -> None:
        self.gate = IterationGate()
        self._closed = False
        self.slow_steps = 0

    async def __anext__(self) -> Any:
        self.slow_steps += 1
        if self._closed:
            raise StopAsyncIteration
        return "from the consumer"


def _iterator(*records: str) -> tuple[RecordIterator, FakeConsumer, deque[Any], deque[Any]]:
    consumer = FakeConsumer()
    pending: deque[Any] = deque(records)
    background: deque[Any] = deque()
    return RecordIterator(consumer, consumer.gate, pending, background), consumer, pending, background


async def test_records_at_hand_are_handed_out_in_order_without_the_consumer() -> None:
    iterator, consumer, pending, _ = _iterator("a", "b", "c")
    assert iterator.__aiter__() is iterator
    assert [await iterator.__anext__() for _ in range(3)] == ["a", "b", "c"]
    assert consumer.slow_steps == 0
    assert not pending


async def test_no_record_at_hand_asks_the_consumer() -> None:
    iterator, consumer, _, _ = _iterator()
    assert await iterator.__anext__() == "from the consumer"
    assert consumer.slow_steps == 1


async def test_a_background_event_goes_first() -> None:
    iterator, consumer, pending, background = _iterator("a")
    background.append(RuntimeError("a rebalance callback failed"))
    assert await iterator.__anext__() == "from the consumer"
    assert consumer.slow_steps == 1
    assert list(pending) == ["a"]  # not handed out past the event


async def test_a_closed_gate_goes_to_the_consumer() -> None:
    iterator, consumer, pending, _ = _iterator("a")
    consumer.gate.open = False  # an unsubscribe under way
    assert await iterator.__anext__() == "from the consumer"
    assert list(pending) == ["a"]


async def test_a_closed_consumer_ends_the_loop_with_records_left() -> None:
    iterator, consumer, pending, _ = _iterator("a")
    consumer._closed, consumer.gate.open = True, False
    with pytest.raises(StopAsyncIteration):
        await iterator.__anext__()
    assert list(pending) == ["a"]


async def test_async_for_takes_the_records_then_what_the_consumer_says() -> None:
    iterator, consumer, _, _ = _iterator("a", "b")
    seen = []
    async for record in iterator:
        seen.append(record)
        if len(seen) == 3:
            consumer._closed, consumer.gate.open = True, False
    assert seen == ["a", "b", "from the consumer"]
