"""One turn of the network driver (it reads the event loop's clock, hence async tests): what a manager asks of the metadata manager after the
latter was polled in the same turn is not slept on; after a response, which managers are polled."""

from __future__ import annotations

import math
from typing import Any

from kafkaio.metadata.manager import MetadataManager
from kafkaio.net.config import ConnectionConfig
from kafkaio.net.manager import ConnectionManager
from kafkaio.protocol.messages import MetadataRequest
from kafkaio.runtime.driver import NetworkDriver, now_ms
from kafkaio.runtime.requests import PollResult, UnsentRequest
from tests.unit.net._fake_broker import metadata_response


class WatchesTopic:
    """A manager that, polled, wants a topic the metadata does not have yet (as the
    consumer's event processor does on assign([...]))."""

    def __init__(self, metadata: MetadataManager) -> None:
        self.metadata = metadata
        self.topic: str | None = None

    def poll(self, now: float) -> PollResult:
        if self.topic is not None:
            self.metadata.add_topics([self.topic])
        return PollResult([], math.inf)


def _driver() -> tuple[NetworkDriver, MetadataManager, WatchesTopic]:
    metadata = MetadataManager()
    # a snapshot loaded a second ago: fresh, and past the backoff between two requests
    then = now_ms() - 1000.0
    [first] = metadata.poll(then).requests
    first.handler(then, metadata_response("cluster"), None)
    manager = WatchesTopic(metadata)
    connections = ConnectionManager("127.0.0.1:9", ConnectionConfig())
    return NetworkDriver(connections, metadata, [manager]), metadata, manager


async def test_nothing_to_do_sleeps_until_the_metadata_ages() -> None:
    driver, _, _ = _driver()
    requests, wait = driver._poll_managers()
    assert requests == []
    assert wait > 60_000  # metadata_max_age_ms away, not a busy loop


async def test_a_topic_asked_for_after_the_metadata_poll_is_fetched_in_the_next_turn() -> None:
    driver, _, manager = _driver()
    manager.topic = "orders"
    requests, wait = driver._poll_managers()
    assert requests == []  # the metadata manager was polled before the topic was asked for
    assert wait == 0.0  # so the driver turns again at once
    requests, _ = driver._poll_managers()
    [request] = requests
    assert [t.name for t in request.request.topics] == ["orders"]


class Counts:
    """A manager that counts its polls and asks to be polled again after ``next_poll_ms``;
    each poll returns the requests in ``to_send`` (once)."""

    def __init__(self, next_poll_ms: float, *, self_contained: bool = False) -> None:
        self.polls = 0
        self.next_poll_ms = next_poll_ms
        self.self_contained = self_contained
        self.to_send: list[UnsentRequest[Any]] = []

    def poll(self, now: float) -> PollResult:
        self.polls += 1
        sent, self.to_send = self.to_send, []
        return PollResult(sent, self.next_poll_ms)


def _counting_driver(
    *managers: Counts,
) -> tuple[NetworkDriver, MetadataManager]:
    driver, metadata, _ = _driver()
    return NetworkDriver(driver.connections, metadata, list(managers)), metadata


async def test_requests_carry_the_position_of_their_manager() -> None:
    first, second = Counts(math.inf), Counts(math.inf)
    driver, _ = _counting_driver(first, second)
    second.to_send = [UnsentRequest(1, MetadataRequest(topics=[]), lambda *_: None)]
    requests, _ = driver._poll_managers()
    assert [r.manager for r in requests] == [2]  # the metadata manager is first


async def test_after_a_self_contained_managers_response_only_it_and_the_due_are_polled() -> None:
    idle = Counts(math.inf)  # nothing to do until an application event
    later = Counts(60_000.0)  # wants a poll in a minute
    due = Counts(0.0)  # wants a poll at once
    answered = Counts(math.inf, self_contained=True)
    driver, metadata = _counting_driver(idle, later, due, answered)
    metadata_polls = 0
    original = metadata.poll

    def count_metadata(now: float) -> PollResult:
        nonlocal metadata_polls
        metadata_polls += 1
        return original(now)

    metadata.poll = count_metadata  # type: ignore[method-assign]
    driver._poll_managers()
    assert [m.polls for m in (idle, later, due, answered)] == [1, 1, 1, 1]
    polls_before = metadata_polls
    _, wait = driver._poll_managers(answered=4)
    assert [m.polls for m in (idle, later, due, answered)] == [1, 1, 2, 2]
    assert metadata_polls == polls_before  # fresh metadata: not polled
    assert wait == 0.0  # `due` still wants a poll at once
    due.next_poll_ms = math.inf
    _, wait = driver._poll_managers(answered=4)
    assert 59_000.0 < wait <= 60_000.0  # the minute `later` asked for still counts
    # the handler asked the metadata manager for an update: it is polled too
    metadata.request_update()
    requests, _ = driver._poll_managers(answered=4)
    assert metadata_polls == polls_before + 1
    assert [type(r.request) for r in requests] == [MetadataRequest]
    assert [m.polls for m in (idle, later, due, answered)] == [1, 1, 3, 4]


async def test_after_a_response_of_another_manager_all_are_polled() -> None:
    idle = Counts(math.inf)
    answered = Counts(math.inf)  # not self-contained: its handlers may change the others
    contained = Counts(math.inf, self_contained=True)
    driver, _ = _counting_driver(idle, answered, contained)
    driver._poll_managers()
    driver._poll_managers(answered=2)
    assert [m.polls for m in (idle, answered, contained)] == [2, 2, 2]
    driver._poll_managers()  # a turn of the loop (an application event woke it): all
    assert [m.polls for m in (idle, answered, contained)] == [3, 3, 3]
