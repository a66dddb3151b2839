"""An aiohttp app that owns a kafkaio Producer and a group Consumer through a cleanup context.

    KAFKA_BOOTSTRAP=localhost:9092 KAFKA_TOPIC=events python examples/aiohttp_app.py

POST /produce ({"value": ..., "key": ..., "partition": ...}) sends a record and returns
where it landed; a background ConsumerRunner keeps the last records in memory (GET /recent);
GET /health (liveness) shows the consumer loop's state and lag per partition and the client's
health snapshot (connections, group state; 503 when either is unhealthy, 200 while the group
is still joining); GET /ready (readiness) is 503 until the consumer has partitions; GET /metrics the
clients' metrics (Java names). Cleanup stops the loop, commits what was handled and leaves
the group. Needs ``pip install 'kafkaio[aiohttp]'``.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from kafkaio import Consumer, Producer
from kafkaio.consumer import ConsumerRecord
from kafkaio.errors import KafkaConfigError, KafkaError
from kafkaio.integrations import ConsumerRunner


class RecentRecords:
    """The last `size` records consumed, newest last (the consumer's handler)."""

    def __init__(self, size: int) -> None:
        self._records: deque[dict[str, Any]] = deque(maxlen=size)

    def add(self, record: ConsumerRecord[bytes | None, bytes | None]) -> None:
        self._records.append(
            {
                "topic": record.topic,
                "partition": record.partition,
                "offset": record.offset,
                "timestamp": record.timestamp,
                "key": None if record.key is None else record.key.decode(errors="replace"),
                "value": None if record.value is None else record.value.decode(errors="replace"),
            }
        )

    def snapshot(self) -> list[dict[str, Any]]:
        return list(self._records)


@dataclass(slots=True)
class Kafka:
    topic: str
    producer: Producer
    runner: ConsumerRunner
    recent: RecentRecords


KAFKA = web.AppKey("kafka", Kafka)


def create_app(
    bootstrap_servers: str | None = None,
    topic: str | None = None,
    *,
    group_id: str = "kafkaio-aiohttp-example",
    recent_size: int = 100,
    consumer_options: Mapping[str, Any] | None = None,
) -> web.Application:
    """The app; the clients start when the app starts (web.run_app, or a TestServer)."""
    bootstrap = bootstrap_servers or os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092")
    topic_name = topic or os.environ.get("KAFKA_TOPIC", "kafkaio-example")

    async def kafka_context(app: web.Application) -> AsyncIterator[None]:
        recent = RecentRecords(recent_size)
        consumer = Consumer(
            topic_name,
            bootstrap_servers=bootstrap,
            group_id=group_id,
            auto_offset_reset="earliest",
            enable_auto_commit=False,  # the runner commits what its handler finished
            **dict(consumer_options or {}),
        )
        async with (
            Producer(bootstrap, linger_ms=5) as producer,
            ConsumerRunner(consumer, recent.add) as runner,
        ):
            app[KAFKA] = Kafka(topic_name, producer, runner, recent)
            yield

    async def produce(request: web.Request) -> web.Response:
        k = request.app[KAFKA]
        body = await request.json()
        value = body.get("value") if isinstance(body, dict) else None
        if not isinstance(value, str):
            raise web.HTTPBadRequest(text='send JSON like {"value": "...", "key": "..."}')
        key, partition = body.get("key"), body.get("partition")
        if partition is not None and (
            isinstance(partition, bool) or not isinstance(partition, int)
        ):
            raise web.HTTPBadRequest(text="partition must be an integer or null")
        try:
            md = await k.producer.send(
                k.topic,
                value.encode(),
                key=None if key is None else str(key).encode(),
                partition=partition,
            )
        except KafkaConfigError as exc:
            raise web.HTTPBadRequest(text=str(exc)) from exc
        except KafkaError as exc:
            raise web.HTTPServiceUnavailable(text=str(exc)) from exc
        return web.json_response(
            {"topic": md.topic, "partition": md.partition, "offset": md.offset}
        )

    async def recent(request: web.Request) -> web.Response:
        return web.json_response(request.app[KAFKA].recent.snapshot())

    def health_body(k: Kafka) -> tuple[dict[str, Any], bool, bool]:
        status = k.runner.status()
        client = k.runner.consumer.health()
        healthy = status.healthy and client.healthy  # alive (also while joining the group)
        ready = healthy and status.ready  # partitions assigned
        body = {
            "status": "ok" if ready else ("joining" if healthy else "degraded"),
            "ready": ready,
            "consumer": status.as_dict(),
            "consumer_client": client.as_dict(),  # connections, group state, lag
            "producer": {"buffered_bytes": k.producer.buffered_bytes},
        }
        return body, healthy, ready

    async def health(request: web.Request) -> web.Response:
        body, healthy, _ = health_body(request.app[KAFKA])
        return web.json_response(body, status=200 if healthy else 503)

    async def ready(request: web.Request) -> web.Response:
        body, _, is_ready = health_body(request.app[KAFKA])
        return web.json_response(body, status=200 if is_ready else 503)

    async def metrics(request: web.Request) -> web.Response:
        k = request.app[KAFKA]
        read = getattr(k.producer, "metrics", None)
        return web.json_response(
            {
                "consumer": k.runner.consumer.metrics(),
                "producer": read() if callable(read) else {},
            }
        )

    app = web.Application()
    app.cleanup_ctx.append(kafka_context)
    app.router.add_post("/produce", produce)
    app.router.add_get("/recent", recent)
    app.router.add_get("/health", health)
    app.router.add_get("/ready", ready)
    app.router.add_get("/metrics", metrics)
    return app


if __name__ == "__main__":
    web.run_app(create_app(), port=int(os.environ.get("PORT", "8080")))
