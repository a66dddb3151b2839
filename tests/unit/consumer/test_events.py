"""Application events: the processor dispatches them by type, completes or hands them on,
and fails the incomplete ones at their deadline; the application awaits them."""

from __future__ import annotations

from dataclasses import dataclass

import anyio
import pytest

from kafkaio.consumer.events import ListOffsetsEvent
from kafkaio.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnknownTopicOrPartitionError,
)
from kafkaio.runtime.events import ApplicationEvent, ApplicationEventQueue, BackgroundEventQueue
from kafkaio.runtime.processor import ApplicationEventProcessor


@dataclass(slots=True, eq=False)
class EchoEvent(ApplicationEvent[int]):
    value: int = 0


def _processor() -> tuple[ApplicationEventQueue, ApplicationEventProcessor, list[int]]:
    wakeups: list[int] = []
    queue = ApplicationEventQueue(lambda: wakeups.append(1))
    return queue, ApplicationEventProcessor(queue), wakeups


def test_events_are_processed_on_poll_and_complete() -> None:
    queue, processor, wakeups = _processor()
    processor.register(EchoEvent, lambda e, now: e.complete(e.value * 2))
    event = EchoEvent(1000, 21)
    queue.put(event)
    assert wakeups == [1] and not event.done  # nothing happens before the network turn
    processor.poll(0)
    assert event.result() == 42 and len(queue) == 0


def test_incomplete_event_expires_exactly_at_its_deadline() -> None:
    queue, processor, _ = _processor()
    pending: list[EchoEvent] = []
    processor.register(EchoEvent, lambda e, now: pending.append(e))
    event = EchoEvent(500, 1)
    queue.put(event)
    result = processor.poll(100)
    assert result.next_poll_ms == 400  # the driver comes back at the deadline
    assert processor.poll(499.9).next_poll_ms == pytest.approx(0.1)
    assert not event.done
    processor.poll(500)
    with pytest.raises(KafkaTimeoutError, match="EchoEvent"):
        event.result()
    assert processor.incomplete == 0
    pending[0].complete(3)  # a late completion is ignored
    with pytest.raises(KafkaTimeoutError):
        event.result()


def test_a_timeout_carries_the_last_error_of_the_attempts() -> None:
    # commit() on a topic that does not exist failed after its timeout with "CommitEvent did
    # not complete before its deadline": the broker's UNKNOWN_TOPIC_OR_PARTITION was lost
    queue, processor, _ = _processor()
    handle_errors: list[KafkaError] = []
    processor.register(EchoEvent, lambda e, now: None)
    noted, sourced = EchoEvent(500, 1), EchoEvent(500, 2)
    sourced.error_source = lambda: handle_errors[-1] if handle_errors else None
    queue.put(noted)
    queue.put(sourced)
    processor.poll(0)
    noted.note_error(UnknownTopicOrPartitionError(None, topic="gone", partition=0))
    handle_errors.append(KafkaConnectionError("node 1 refused the connection"))
    processor.poll(500)
    with pytest.raises(KafkaTimeoutError, match="UNKNOWN_TOPIC_OR_PARTITION") as info:
        noted.result()
    assert "did not complete before its deadline" in str(info.value)
    assert isinstance(info.value.__cause__, UnknownTopicOrPartitionError)
    with pytest.raises(KafkaTimeoutError, match="node 1 refused") as info:
        sourced.result()
    assert isinstance(info.value.__cause__, KafkaConnectionError)


def test_event_already_past_deadline_is_not_handled() -> None:
    queue, processor, _ = _processor()
    handled: list[EchoEvent] = []
    processor.register(EchoEvent, lambda e, now: handled.append(e))
    event = EchoEvent(10, 1)
    queue.put(event)
    processor.poll(20)
    assert handled == [] and isinstance(event.error, KafkaTimeoutError)


def test_unknown_event_type_and_failing_handler_fail_the_event() -> None:
    queue, processor, _ = _processor()
    unknown = ListOffsetsEvent(1000, {})
    queue.put(unknown)

    def boom(e: EchoEvent, now: float) -> None:
        raise KafkaError("no such partition")

    processor.register(EchoEvent, boom)
    failing = EchoEvent(1000, 1)
    queue.put(failing)
    processor.poll(0)
    with pytest.raises(KafkaError, match="no handler registered for ListOffsetsEvent"):
        unknown.result()
    with pytest.raises(KafkaError, match="no such partition"):
        failing.result()


def test_background_queue_keeps_order() -> None:
    queue = BackgroundEventQueue()
    seen: list[int] = []
    queue.on_put = lambda: seen.append(len(queue))
    error = KafkaError("x")
    queue.put_error(error)
    queue.put_callback(lambda: None)
    assert seen == [1, 2]
    drained = queue.drain()
    assert drained[0] is error and callable(drained[1]) and len(queue) == 0


async def test_application_waits_for_completion() -> None:
    event = EchoEvent(1000, 1)

    async def complete_later() -> None:
        await anyio.sleep(0.01)
        event.complete(7)

    async with anyio.create_task_group() as tg:
        tg.start_soon(complete_later)
        assert await event.wait(5) == 7


async def test_application_wait_has_its_own_timeout() -> None:
    event = EchoEvent(1000, 1)
    with pytest.raises(KafkaTimeoutError):
        await event.wait(0.01)
    assert event.done
