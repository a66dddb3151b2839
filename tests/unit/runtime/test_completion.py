"""Completion: the one completion type of the clients (events, group handles, transactional
calls)."""

from __future__ import annotations

import anyio
import pytest

from kafkaio.consumer.events import CommitEvent
from kafkaio.consumer.group.handles import RequestHandle
from kafkaio.errors import KafkaError, KafkaTimeoutError
from kafkaio.producer.transaction_state import TxnResult
from kafkaio.runtime.completion import Completion


def test_it_completes_once_and_calls_back_without_an_event_loop() -> None:
    completion: Completion[int] = Completion()
    seen: list[int | None] = []
    completion.add_done_callback(lambda c: seen.append(c.value))
    assert completion.complete(1) and not completion.complete(2)
    assert not completion.fail(KafkaError("late"))
    assert completion.result() == 1 and seen == [1]
    completion.add_done_callback(lambda c: seen.append(c.value))  # at once when done
    assert seen == [1, 1]


def test_a_failure_is_raised_by_result() -> None:
    completion: Completion[int] = Completion()
    with pytest.raises(RuntimeError, match="not complete"):
        completion.result()
    completion.fail(KafkaError("no"))
    with pytest.raises(KafkaError, match="no"):
        completion.result()


async def test_a_timeout_names_the_last_error_of_the_attempts() -> None:
    completion: Completion[int] = Completion()
    completion.note_error(KafkaError("COORDINATOR_NOT_AVAILABLE"))
    with pytest.raises(KafkaTimeoutError, match="COORDINATOR_NOT_AVAILABLE") as raised:
        await completion.wait(0.01)
    assert isinstance(raised.value.__cause__, KafkaError)


async def test_waiting_wakes_when_the_network_task_completes_it() -> None:
    completion: Completion[str] = Completion()
    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.sleep, 0)
        completion.complete("x")
    assert await completion.wait(1) == "x"


def test_events_handles_and_transactional_results_are_completions() -> None:
    for completion in (CommitEvent(0.0), RequestHandle(), TxnResult("commit")):
        assert isinstance(completion, Completion)
        assert completion.succeed()
        assert completion.done and completion.error is None
    assert "commit" in repr(TxnResult("commit"))
