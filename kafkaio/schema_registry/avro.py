"""Avro serdes (fastavro) in the Confluent wire format: ``pip install 'kafkaio[avro]'``."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

from kafkaio.errors import KafkaConfigError, SerializationError
from kafkaio.schema_registry.client import Schema, SchemaRegistryClient
from kafkaio.schema_registry.serde import (
    SchemaRegistryDeserializer,
    SchemaRegistrySerializer,
    referenced_schemas,
    require,
)
from kafkaio.schema_registry.wire import pack_header
from kafkaio.serde.base import SerializationContext


def _fastavro() -> Any:
    require("fastavro.validation", "avro", "the Avro serdes")
    return require("fastavro", "avro", "the Avro serdes")


async def _parse(fastavro: Any, registry: SchemaRegistryClient | None, schema: Schema) -> Any:
    named: dict[str, Any] = {}
    if schema.references:
        if registry is None:
            raise KafkaConfigError("a schema with references needs a registry to resolve them")
        for _, dependency in await referenced_schemas(registry, schema):
            fastavro.parse_schema(json.loads(dependency.schema_str), named_schemas=named)
    return fastavro.parse_schema(json.loads(schema.schema_str), named_schemas=named)


def _avro_error(fastavro: Any, value: Any, parsed: Any, exc: Exception) -> SerializationError:
    """What fastavro could not write, with the field's path when its validator finds one."""
    from fastavro.validation import ValidationError

    try:
        fastavro.validation.validate(value, parsed, raise_errors=True)
    except ValidationError as invalid:
        first = str(invalid.errors[0]) if invalid.errors else str(invalid)
        path = first.split(" is ", 1)[0] if " is " in first else None
        return SerializationError(f"does not fit the Avro schema: {first}", path=path)
    except Exception:  # noqa: BLE001 - the validator's own failure says less than exc
        pass
    return SerializationError(f"does not fit the Avro schema: {type(exc).__name__}: {exc}")


class AvroSerializer(SchemaRegistrySerializer):
    """``value -> 0, schema id, Avro binary``, as Confluent's AvroSerializer writes it.

    ``schema`` is the writer's schema (JSON text, a dict, or a Schema with references);
    None with ``use_latest_version=True, auto_register=False`` writes with the subject's
    latest schema. Values are dicts, or dataclasses / Pydantic models (``to_dict`` converts
    anything else).
    """

    schema_type = "AVRO"

    def __init__(self, registry: SchemaRegistryClient, schema: Any = None, **options: Any) -> None:
        super().__init__(registry, schema, **options)
        self._fastavro = _fastavro()
        raw = self.document
        self._record_name: str | None = None
        if isinstance(raw, dict) and raw.get("type") in ("record", "enum", "fixed"):
            name = raw.get("name", "")
            namespace = raw.get("namespace")
            self._record_name = name if "." in name or not namespace else f"{namespace}.{name}"
        self._parsed: dict[str, Any] = {}

    async def serialize(self, data: Any, ctx: SerializationContext) -> bytes | None:
        if data is None:
            return None
        schema_id, schema = await self.schema_for(ctx, self.schema, self._record_name)
        parsed = self._parsed.get(schema.schema_str)
        if parsed is None:
            parsed = await _parse(self._fastavro, self.registry, schema)
            self._parsed[schema.schema_str] = parsed
        value = self.to_dict(data)
        out = io.BytesIO()
        out.write(pack_header(schema_id))
        try:
            self._fastavro.schemaless_writer(out, parsed, value)
        except Exception as exc:
            raise _avro_error(self._fastavro, value, parsed, exc) from exc
        return out.getvalue()


class AvroDeserializer(SchemaRegistryDeserializer):
    """``0, schema id, Avro binary -> dict`` (or ``from_dict(dict, ctx)``), read with the
    writer's schema from the registry, resolved to ``reader_schema`` when given."""

    schema_type = "AVRO"

    def __init__(
        self,
        registry: SchemaRegistryClient,
        reader_schema: str | dict[str, Any] | None = None,
        *,
        from_dict: Callable[[Any, SerializationContext], Any] | None = None,
        return_record_name: bool = False,
    ) -> None:
        super().__init__(registry)
        self._fastavro = _fastavro()
        if isinstance(reader_schema, str):
            reader_schema = json.loads(reader_schema)
        self._reader = None if reader_schema is None else self._fastavro.parse_schema(reader_schema)
        self.from_dict = from_dict
        self.return_record_name = return_record_name

    async def parse(self, schema: Schema) -> Any:
        return await _parse(self._fastavro, self.registry, schema)

    def decode(self, writer: Any, payload: memoryview, ctx: SerializationContext) -> Any:
        try:
            value = self._fastavro.schemaless_reader(
                io.BytesIO(payload),
                writer,
                self._reader,
                return_record_name=self.return_record_name,
            )
        except Exception as exc:
            raise SerializationError(
                f"cannot read the Avro payload: {type(exc).__name__}: {exc}"
            ) from exc
        return value if self.from_dict is None else self.from_dict(value, ctx)
