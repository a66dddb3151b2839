"""The clients behind ``produce``, ``consume`` and ``bench``: Producer and Consumer options
from the command's context, and the topic lookup they share (partitions or a clear error)."""

from __future__ import annotations

from typing import Any

import anyio

from kafkaio.admin import Admin
from kafkaio.cli.app import Context, UsageError
from kafkaio.consumer import Consumer
from kafkaio.errors import (
    InvalidTopicError,
    KafkaTimeoutError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kafkaio.producer import Producer
from kafkaio.validate import check_topic

CLIENT_ID = "kafkaio-cli"
_FETCH_MAX_WAIT_MS = 500


def _connection_options(ctx: Context) -> dict[str, Any]:
    options = dict(ctx.options)
    options.setdefault("client_id", CLIENT_ID)
    options.setdefault("request_timeout_ms", min(ctx.timeout_ms, 30_000))
    return options


def producer(ctx: Context, **options: Any) -> Producer:
    """A Producer for ``ctx``: ``--timeout-ms`` bounds waits for metadata and buffer space,
    and the delivery of each record."""
    conn = _connection_options(ctx)
    delivery_ms = max(ctx.timeout_ms, conn["request_timeout_ms"] + 100)
    settings: dict[str, Any] = {
        "max_block_ms": ctx.timeout_ms,
        "delivery_timeout_ms": delivery_ms,
        **conn,
        **options,
        **ctx.client_options,  # -X wins
    }
    return Producer(ctx.bootstrap, **settings)


def consumer(ctx: Context, **options: Any) -> Consumer:
    """A Consumer for ``ctx`` (``--timeout-ms`` is the deadline of its offset lookups and
    commits); ``options`` add group settings and the reset policy."""
    conn = _connection_options(ctx)
    settings: dict[str, Any] = {
        "default_api_timeout_ms": ctx.timeout_ms,
        "fetch_max_wait_ms": min(_FETCH_MAX_WAIT_MS, conn["request_timeout_ms"] // 2),
        **conn,
        **options,
        **ctx.client_options,  # -X wins
    }
    return Consumer(bootstrap_servers=ctx.bootstrap, **settings)


async def until_shown(admin: Admin, topic: str, *, created: bool, timeout_ms: int) -> None:
    """Return once the brokers' metadata shows ``topic`` created (every partition with a
    leader) or, with ``created=False``, deleted. Apache Kafka answers CreateTopics and
    DeleteTopics once its controller has committed the change; its brokers show it a moment
    later, so the next command (a new process, often) could miss it without this wait."""
    delay = 0.01
    with anyio.move_on_after(timeout_ms / 1000):
        while True:
            info = (await admin.describe_topics([topic])).get(topic)
            if info is None or info.error:
                if not created:
                    return
            elif created and all(p.leader is not None for p in info.partitions):
                return
            await anyio.sleep(delay)
            delay = min(delay * 2, 0.2)
    change = "created" if created else "deleted"
    raise KafkaTimeoutError(
        f"topic {topic!r} was {change}, but the brokers' metadata did not show it within "
        f"{timeout_ms} ms (--timeout-ms)"
    )


async def topic_partitions(admin: Admin, topic: str) -> list[int]:
    """The partition indexes of ``topic``; raises UNKNOWN_TOPIC_OR_PARTITION (or the topic's
    own error) when it cannot be used, so a typo never auto-creates a topic."""
    check_topic_name(topic)
    info = (await admin.describe_topics([topic])).get(topic)
    if info is None or info.error:
        code = info.error if info is not None else UnknownTopicOrPartitionError.code
        if code != UnknownTopicOrPartitionError.code:
            raise error_for_code(code)(f"topic {topic!r} cannot be used", topic=topic)
        raise error_for_code(code)(
            f"topic {topic!r} does not exist (create it with `kafkaio topics create {topic}`)",
            topic=topic,
        )
    return [p.partition for p in info.partitions]


def check_topic_name(topic: str) -> None:
    """A usage error for a topic name Kafka refuses (before stdin is read or a broker is
    asked: a broker answers it as a topic that does not exist)."""
    try:
        check_topic(topic)
    except InvalidTopicError as exc:
        raise UsageError(str(exc)) from None
