"""One turn of the network driver (it reads the event loop's clock, hence async tests): what a manager asks of the metadata manager after the
latter was polled in the same turn is not slept on."""

from __future__ import annotations

import math

from kafkaio.metadata.manager import MetadataManager
from kafkaio.net.config import ConnectionConfig
from kafkaio.net.manager import ConnectionManager
from kafkaio.runtime.driver import NetworkDriver, now_ms
from kafkaio.runtime.requests import PollResult
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
