"""The clients behind ``produce``, ``consume`` and ``bench``: Producer and Consumer options
from the command's context, and the topic lookup they share (partitions or a clear error)."""

from __future__ import annotations

from typing import Any

from kafkaio.admin import Admin
from kafkaio.cli.app import Context
from kafkaio.consumer import Consumer
from kafkaio.errors import UnknownTopicOrPartitionError, error_for_code
from kafkaio.producer import Producer

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


async def topic_partitions(admin: Admin, topic: str) -> list[int]:
    """The partition indexes of ``topic``; raises UNKNOWN_TOPIC_OR_PARTITION (or the topic's
    own error) when it cannot be used, so a typo never auto-creates a topic."""
    info = (await admin.describe_topics([topic])).get(topic)
    if info is None or info.error:
        code = info.error if info is not None else UnknownTopicOrPartitionError.code
        raise error_for_code(code)(
            f"topic {topic!r} does not exist (create it with `kafkaio topics create {topic}`)",
            topic=topic,
        )
    return [p.partition for p in info.partitions]
