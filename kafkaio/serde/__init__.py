"""Serializers and deserializers: the shapes the clients accept, JSON, dataclasses, Pydantic.

Schema Registry serdes (Avro, JSON Schema, Protobuf) are in :mod:`kafkaio.schema_registry`.
"""

from kafkaio.errors import SerializationError
from kafkaio.serde.base import Deserializer, SerializationContext, Serializer
from kafkaio.serde.json_serde import JsonDeserializer, JsonSerializer, json_default
from kafkaio.serde.typed import (
    DataclassDeserializer,
    DataclassSerializer,
    PydanticDeserializer,
    PydanticSerializer,
)

__all__ = [
    "DataclassDeserializer",
    "DataclassSerializer",
    "Deserializer",
    "JsonDeserializer",
    "JsonSerializer",
    "PydanticDeserializer",
    "PydanticSerializer",
    "SerializationContext",
    "SerializationError",
    "Serializer",
    "json_default",
]
