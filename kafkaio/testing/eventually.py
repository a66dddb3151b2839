"""Waiting for what a broker makes visible a moment later.

Apache Kafka answers CreateTopics, CreatePartitions and DeleteTopics once the controller has
committed the change; each broker's metadata (what Metadata, and so describe and list calls,
report) catches up shortly after, as Java's AdminClient documents. Tests that look right
after such a call wait with ``eventually``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from kafkaio.errors import KafkaTimeoutError

T = TypeVar("T")


async def eventually(
    fetch: Callable[[], Awaitable[T]],
    until: Callable[[T], bool],
    *,
    timeout: float = 10.0,
    interval: float = 0.05,
    what: str = "the condition",
) -> T:
    """Call ``fetch`` until ``until(result)`` holds; return that result.

    Raises KafkaTimeoutError naming ``what`` and the last result after ``timeout`` s.
    """
    last: object = "no answer yet"
    with anyio.move_on_after(timeout):
        while True:
            result = last = await fetch()
            if until(result):
                return result
            await anyio.sleep(interval)
    raise KafkaTimeoutError(f"{what} did not hold within {timeout} s (last: {last!r})")
