"""A FastAPI app that owns a kafkaio Producer and a group Consumer through its lifespan.

    KAFKA_BOOTSTRAP=localhost:9092 KAFKA_TOPIC=events uvicorn examples.fastapi_app:app

POST /produce sends a record and returns where it landed; a background ConsumerRunner keeps
the last records of the topic in memory (GET /recent); GET /health (liveness) shows the
consumer loop's state and lag per partition and the client's health snapshot (connections,
group state; 503 when either is unhealthy, 200 while the group is still joining); GET /ready
(readiness) is 503 until the consumer has partitions; GET /metrics the clients' metrics
(Java names). Shutdown stops the loop,
commits what was handled and leaves the group. Needs ``pip install 'kafkaio[fastapi]'``.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from kafkaio import Consumer, Producer
from kafkaio.consumer import ConsumerRecord
from kafkaio.errors import KafkaConfigError, KafkaError
from kafkaio.integrations import ConsumerRunner


class ProduceRequest(BaseModel):
    value: str
    key: str | None = None
    partition: int | None = None


class ProduceResponse(BaseModel):
    topic: str
    partition: int
    offset: int


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


def health_body(k: Kafka) -> tuple[dict[str, Any], bool, bool]:
    """The /health and /ready answer: the consumer loop's status and the clients' health
    snapshots (connections, group state, lag), whether both are healthy (alive) and whether
    the consumer is also ready (partitions assigned)."""
    status = k.runner.status()
    client = k.runner.consumer.health()
    healthy = status.healthy and client.healthy
    ready = healthy and status.ready
    body = {
        "status": "ok" if ready else ("joining" if healthy else "degraded"),
        "ready": ready,
        "consumer": status.as_dict(),
        "consumer_client": client.as_dict(),
        "producer": {"buffered_bytes": k.producer.buffered_bytes},
    }
    return body, healthy, ready


def producer_metrics(producer: Producer) -> dict[str, Any]:
    """The producer's metrics, where this kafkaio version has them."""
    read = getattr(producer, "metrics", None)
    return read() if callable(read) else {}


def create_app(
    bootstrap_servers: str | None = None,
    topic: str | None = None,
    *,
    group_id: str = "kafkaio-fastapi-example",
    recent_size: int = 100,
    consumer_options: Mapping[str, Any] | None = None,
) -> FastAPI:
    """The app; nothing connects until the lifespan starts (uvicorn, or TestClient)."""
    bootstrap = bootstrap_servers or os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092")
    topic_name = topic or os.environ.get("KAFKA_TOPIC", "kafkaio-example")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
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
            app.state.kafka = Kafka(topic_name, producer, runner, recent)
            yield
        # leaving: the runner committed and left the group, then the producer flushed

    app = FastAPI(title="kafkaio FastAPI example", lifespan=lifespan)

    def kafka(request: Request) -> Kafka:
        state: Kafka = request.app.state.kafka
        return state

    @app.post("/produce")
    async def produce(body: ProduceRequest, request: Request) -> ProduceResponse:
        k = kafka(request)
        try:
            md = await k.producer.send(
                k.topic,
                body.value.encode(),
                key=None if body.key is None else body.key.encode(),
                partition=body.partition,
            )
        except KafkaConfigError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        except KafkaError as exc:
            raise HTTPException(status_code=503, detail=str(exc)) from exc
        return ProduceResponse(topic=md.topic, partition=md.partition, offset=md.offset)

    @app.get("/recent")
    async def recent(request: Request) -> list[dict[str, Any]]:
        return kafka(request).recent.snapshot()

    @app.get("/health")
    async def health(request: Request) -> JSONResponse:
        body, healthy, _ = health_body(kafka(request))
        return JSONResponse(body, status_code=200 if healthy else 503)

    @app.get("/ready")
    async def ready(request: Request) -> JSONResponse:
        body, _, is_ready = health_body(kafka(request))
        return JSONResponse(body, status_code=200 if is_ready else 503)

    @app.get("/metrics")
    async def metrics(request: Request) -> dict[str, Any]:
        k = kafka(request)
        return {"consumer": k.runner.consumer.metrics(), "producer": producer_metrics(k.producer)}

    return app


app = create_app()
