"""JSON Schema serdes (jsonschema) in the Confluent wire format:
``pip install 'kafkaio[json-schema]'``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kafkaio.errors import SerializationError
from kafkaio.schema_registry.client import Schema, SchemaRegistryClient
from kafkaio.schema_registry.serde import (
    SchemaRegistryDeserializer,
    SchemaRegistrySerializer,
    referenced_schemas,
    require,
)
from kafkaio.schema_registry.wire import pack_header
from kafkaio.serde.base import SerializationContext
from kafkaio.serde.json_serde import json_default

_dumps = json.JSONEncoder(default=json_default, ensure_ascii=False, separators=(",", ":")).encode


def _jsonschema() -> Any:
    return require("jsonschema", "json-schema", "the JSON Schema serdes")


async def _validator(jsonschema: Any, registry: SchemaRegistryClient | None, schema: Schema) -> Any:
    """A validator for ``schema``; referenced schemas resolve by their reference names."""
    document = json.loads(schema.schema_str)
    cls = jsonschema.validators.validator_for(document, default=jsonschema.Draft7Validator)
    if not schema.references or registry is None:
        return cls(document)
    from referencing import Registry, Resource

    resources = []
    for name, dependency in await referenced_schemas(registry, schema):
        contents = json.loads(dependency.schema_str)
        resources.append((name, Resource.from_contents(contents, default_specification=_spec(cls))))
    return cls(document, registry=Registry().with_resources(resources))


def _spec(cls: Any) -> Any:
    from referencing.jsonschema import specification_with

    return specification_with(cls.META_SCHEMA.get("$schema", ""))


def _validate(validator: Any, value: Any) -> None:
    error = next(iter(validator.iter_errors(value)), None)
    if error is None:
        return
    path = ""
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    raise SerializationError(f"{path or 'value'}: {error.message} (JSON Schema)", path=path or None)


class JsonSchemaSerializer(SchemaRegistrySerializer):
    """``value -> 0, schema id, UTF-8 JSON``, validated against the schema first (as
    Confluent's JSONSerializer; compact separators, non-ASCII kept). Values are dicts, lists,
    dataclasses or Pydantic models (``to_dict`` converts anything else)."""

    schema_type = "JSON"

    def __init__(
        self,
        registry: SchemaRegistryClient,
        schema: str | dict[str, Any] | Schema | None = None,
        *,
        validate: bool = True,
        **options: Any,
    ) -> None:
        super().__init__(registry, schema, **options)
        self._jsonschema = _jsonschema()
        document = self.document
        self._record_name: str | None = None
        if isinstance(document, dict) and isinstance(document.get("title"), str):
            self._record_name = document["title"]
        self.validate = validate
        self._validators: dict[str, Any] = {}

    async def serialize(self, data: Any, ctx: SerializationContext) -> bytes | None:
        if data is None:
            return None
        schema_id, schema = await self.schema_for(ctx, self.schema, self._record_name)
        value = self.to_dict(data)
        if self.validate:
            validator = self._validators.get(schema.schema_str)
            if validator is None:
                validator = await _validator(self._jsonschema, self.registry, schema)
                self._validators[schema.schema_str] = validator
            _validate(validator, value)
        try:
            text = _dumps(value)
        except (TypeError, ValueError) as exc:
            raise SerializationError(f"cannot write JSON: {exc}") from exc
        return pack_header(schema_id) + text.encode()


class JsonSchemaDeserializer(SchemaRegistryDeserializer):
    """``0, schema id, JSON -> value`` (or ``from_dict(value, ctx)``), validated against the
    writer's schema (``validate=False``: not), or against ``schema`` when given."""

    schema_type = "JSON"

    def __init__(
        self,
        registry: SchemaRegistryClient | None,
        schema: str | dict[str, Any] | None = None,
        *,
        from_dict: Callable[[Any, SerializationContext], Any] | None = None,
        validate: bool = True,
    ) -> None:
        super().__init__(registry)
        self._jsonschema = _jsonschema()
        self._fixed = None
        if schema is not None:
            document = json.loads(schema) if isinstance(schema, str) else schema
            cls = self._jsonschema.validators.validator_for(
                document, default=self._jsonschema.Draft7Validator
            )
            self._fixed = cls(document)
        self.from_dict = from_dict
        self.validate = validate

    async def writer(self, schema_id: int) -> Any:
        if self._fixed is not None or not self.validate:
            return self._fixed
        return await super().writer(schema_id)

    async def parse(self, schema: Schema) -> Any:
        return await _validator(self._jsonschema, self.registry, schema)

    def decode(self, writer: Any, payload: memoryview, ctx: SerializationContext) -> Any:
        try:
            value = json.loads(bytes(payload))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SerializationError(f"not JSON: {exc}") from exc
        if self.validate and writer is not None:
            _validate(writer, value)
        return value if self.from_dict is None else self.from_dict(value, ctx)
