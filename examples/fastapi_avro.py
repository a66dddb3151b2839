"""A FastAPI service whose records are Avro through a Confluent Schema Registry.

    KAFKA_BOOTSTRAP=localhost:9092 KAFKA_TOPIC=orders \\
    SCHEMA_REGISTRY_URL=http://localhost:8081 uvicorn examples.fastapi_avro:app

POST /orders takes an order (JSON, validated by Pydantic) and produces it as Avro: the
serializer registers the schema under ``<topic>-value`` once and writes the Confluent wire
format (magic byte, schema id, Avro binary), so Java, confluent-kafka and kafkaio consumers
all read it. A background ConsumerRunner reads the topic back as ``Order`` models (GET
/orders/recent). GET /health is liveness, GET /ready readiness (partitions assigned). Needs
``pip install 'kafkaio[fastapi,avro,pydantic]'``.
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
from pydantic import BaseModel, Field

from kafkaio import Consumer, Producer
from kafkaio.consumer import ConsumerRecord
from kafkaio.errors import KafkaError, SerializationError
from kafkaio.integrations import ConsumerRunner
from kafkaio.schema_registry import AvroDeserializer, AvroSerializer, SchemaRegistryClient
from kafkaio.serde import SerializationContext

ORDER_SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "com.example.shop",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "customer", "type": "string"},
        {"name": "amount_cents", "type": "long"},
        {"name": "items", "type": {"type": "array", "items": "string"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


class Order(BaseModel):
    order_id: str
    customer: str
    amount_cents: int = Field(ge=0)
    items: list[str] = []
    note: str | None = None


class Placed(BaseModel):
    topic: str
    partition: int
    offset: int


@dataclass(slots=True)
class Shop:
    topic: str
    registry: SchemaRegistryClient
    producer: Producer
    runner: ConsumerRunner
    recent: deque[dict[str, Any]]


def order_from_avro(value: dict[str, Any], ctx: SerializationContext) -> Order:
    """The consumer's ``from_dict``: the Avro record as the API's model."""
    return Order(**value)


def create_app(
    bootstrap_servers: str | None = None,
    topic: str | None = None,
    registry_url: str | None = None,
    *,
    group_id: str = "kafkaio-avro-example",
    consumer_options: Mapping[str, Any] | None = None,
) -> FastAPI:
    """The app; nothing connects until the lifespan starts (uvicorn, or TestClient)."""
    bootstrap = bootstrap_servers or os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092")
    topic_name = topic or os.environ.get("KAFKA_TOPIC", "orders")
    url = registry_url or os.environ.get("SCHEMA_REGISTRY_URL", "http://localhost:8081")
    options = dict(consumer_options or {})
    for key, value in os.environ.items():  # e.g. KAFKAIO_CONSUMER_SESSION_TIMEOUT_MS=6000
        if key.startswith("KAFKAIO_CONSUMER_"):
            options[key.removeprefix("KAFKAIO_CONSUMER_").lower()] = int(value)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        recent: deque[dict[str, Any]] = deque(maxlen=100)

        def remember(record: ConsumerRecord[bytes | None, Order]) -> None:
            recent.append(
                {
                    "partition": record.partition,
                    "offset": record.offset,
                    **record.value.model_dump(),
                }
            )

        async with SchemaRegistryClient(url) as registry:
            consumer = Consumer(
                topic_name,
                bootstrap_servers=bootstrap,
                group_id=group_id,
                auto_offset_reset="earliest",
                enable_auto_commit=False,  # the runner commits what it handled
                value_deserializer=AvroDeserializer(registry, from_dict=order_from_avro),
                **options,
            )
            async with (
                Producer(
                    bootstrap,
                    key_serializer=str.encode,
                    value_serializer=AvroSerializer(registry, ORDER_SCHEMA),
                ) as producer,
                ConsumerRunner(consumer, remember) as runner,
            ):
                app.state.shop = Shop(topic_name, registry, producer, runner, recent)
                yield

    app = FastAPI(title="kafkaio Avro orders example", lifespan=lifespan)

    def shop(request: Request) -> Shop:
        state: Shop = request.app.state.shop
        return state

    @app.post("/orders", status_code=201)
    async def place(order: Order, request: Request) -> Placed:
        s = shop(request)
        try:
            md = await s.producer.send(s.topic, order, key=order.customer)
        except SerializationError as exc:  # e.g. the registry refused the schema
            raise HTTPException(status_code=422, detail=str(exc)) from exc
        except KafkaError as exc:
            raise HTTPException(status_code=503, detail=str(exc)) from exc
        return Placed(topic=md.topic, partition=md.partition, offset=md.offset)

    @app.get("/orders/recent")
    async def recent(request: Request) -> list[dict[str, Any]]:
        return list(shop(request).recent)

    def probe(request: Request, need_ready: bool) -> JSONResponse:
        status = shop(request).runner.status()
        ok = status.ready if need_ready else status.healthy
        body = {"ready": status.ready, "consumer": status.as_dict()}
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.get("/health")
    async def health(request: Request) -> JSONResponse:
        return probe(request, need_ready=False)

    @app.get("/ready")
    async def ready(request: Request) -> JSONResponse:
        return probe(request, need_ready=True)

    return app


app = create_app()
