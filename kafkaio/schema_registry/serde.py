"""What the Schema Registry serdes share: subject, registration, schema-id look-ups."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any, ClassVar

import anyio

from kafkaio.errors import KafkaConfigError, SerializationError
from kafkaio.schema_registry.client import (
    RegisteredSchema,
    Schema,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from kafkaio.schema_registry.strategies import SubjectNameStrategy, topic_subject_name_strategy
from kafkaio.schema_registry.wire import unpack_header
from kafkaio.serde.base import Deserializer, SerializationContext, Serializer


def require(module: str, extra: str, what: str) -> Any:
    """Import an optional dependency, or say which extra installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise KafkaConfigError(f"{what} need {module}: pip install 'kafkaio[{extra}]'") from exc


def load_schema(
    schema: str | dict[str, Any] | Schema | None, schema_type: str
) -> tuple[Schema | None, Any]:
    """A serializer's schema argument (text, a dict or a Schema) as a Schema, with its JSON
    document (None, None for no schema); KafkaConfigError when it is not JSON."""
    if schema is None:
        return None, None
    if isinstance(schema, dict):
        return Schema(json.dumps(schema), schema_type), schema
    if isinstance(schema, str):
        schema = Schema(schema, schema_type)
    try:
        return schema, json.loads(schema.schema_str)
    except json.JSONDecodeError as exc:
        raise KafkaConfigError(f"the {schema_type} schema is not JSON: {exc}") from exc


def default_to_dict(value: Any) -> Any:
    """Dataclasses and Pydantic models as dicts (anything else as it is)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump()
    return value


class SchemaRegistrySerializer(Serializer[Any]):
    """Base of the Avro, JSON Schema and Protobuf serializers.

    ``schema`` is the writer's schema: text, a dict, or a Schema with references (None with
    ``use_latest_version``: the subject's latest). Values go through ``to_dict`` first
    (default: dataclasses and Pydantic models as dicts). The subject comes from
    ``subject_name_strategy`` (default ``<topic>-key|value``). With
    ``auto_register`` (default) the serializer's schema is registered under it (once per
    subject: the client caches the id); without, it must already be there. With
    ``use_latest_version`` the subject's latest schema is used to write (looked up at most
    every ``latest_ttl_s`` seconds) and nothing is registered.
    """

    schema_type: ClassVar[str] = ""

    def __init__(
        self,
        registry: SchemaRegistryClient,
        schema: str | dict[str, Any] | Schema | None = None,
        *,
        to_dict: Callable[[Any], Any] | None = None,
        subject_name_strategy: SubjectNameStrategy = topic_subject_name_strategy,
        auto_register: bool = True,
        use_latest_version: bool = False,
        normalize: bool = False,
        latest_ttl_s: float = 300.0,
    ) -> None:
        self.schema, self.document = load_schema(schema, self.schema_type)
        self.to_dict = to_dict or default_to_dict
        if use_latest_version and auto_register:
            raise KafkaConfigError(
                "use_latest_version=True writes with the subject's latest schema and registers "
                "nothing: pass auto_register=False with it"
            )
        self.registry = registry
        self.subject_name_strategy = subject_name_strategy
        self.auto_register = auto_register
        self.use_latest_version = use_latest_version
        self.normalize = normalize
        self.latest_ttl_s = latest_ttl_s
        self._latest: dict[str, tuple[float, RegisteredSchema]] = {}

    async def schema_for(
        self, ctx: SerializationContext, schema: Schema | None, record_name: str | None
    ) -> tuple[int, Schema]:
        """The schema id to write with, and that schema."""
        subject = self.subject_name_strategy(ctx, record_name)
        try:
            if self.use_latest_version or schema is None:
                now = anyio.current_time()
                cached = self._latest.get(subject)
                if cached is None or now - cached[0] > self.latest_ttl_s:
                    cached = (now, await self.registry.get_latest_version(subject))
                    self._latest[subject] = cached
                return cached[1].schema_id, cached[1].schema
            if self.auto_register:
                schema_id = await self.registry.register_schema(
                    subject, schema, normalize=self.normalize
                )
                return schema_id, schema
            found = await self.registry.lookup_schema(subject, schema, normalize=self.normalize)
            return found.schema_id, schema
        except SchemaRegistryError as exc:
            raise SerializationError(
                f"the Schema Registry refused or lacks the {self.schema_type} schema of subject "
                f"{subject!r}: {exc}"
            ) from exc


class SchemaRegistryDeserializer(Deserializer[Any]):
    """Base of the Schema Registry deserializers: reads the framing, fetches the writer's
    schema by id (cached) and hands it, parsed once per id, to ``decode``."""

    schema_type: ClassVar[str] = ""

    def __init__(self, registry: SchemaRegistryClient | None) -> None:
        self.registry = registry
        self._parsed: dict[int, Any] = {}

    async def writer(self, schema_id: int) -> Any:
        parsed = self._parsed.get(schema_id)
        if parsed is None:
            if self.registry is None:
                raise SerializationError(
                    f"schema id {schema_id}: this deserializer has no registry to look it up"
                )
            try:
                schema = await self.registry.get_schema(schema_id)
            except SchemaRegistryError as exc:
                raise SerializationError(f"cannot get schema id {schema_id}: {exc}") from exc
            if schema.schema_type != self.schema_type:
                raise SerializationError(
                    f"schema id {schema_id} is a {schema.schema_type} schema, not "
                    f"{self.schema_type}: use the matching deserializer"
                )
            parsed = await self.parse(schema)
            self._parsed[schema_id] = parsed
        return parsed

    async def parse(self, schema: Schema) -> Any:
        """The registry's schema in the form ``decode`` uses."""
        return schema

    def decode(self, writer: Any, payload: memoryview, ctx: SerializationContext) -> Any:
        raise NotImplementedError

    async def deserialize(self, data: bytes | None, ctx: SerializationContext) -> Any:
        if data is None:
            return None
        schema_id = unpack_header(data)
        writer = await self.writer(schema_id)
        return self.decode(writer, memoryview(data)[5:], ctx)


async def referenced_schemas(
    registry: SchemaRegistryClient, schema: Schema, seen: set[tuple[str, int]] | None = None
) -> list[tuple[str, Schema]]:
    """Every schema ``schema`` references, depth first (dependencies before dependents)."""
    seen = set() if seen is None else seen
    out: list[tuple[str, Schema]] = []
    for ref in schema.references:
        key = (ref.subject, ref.version)
        if key in seen:
            continue
        seen.add(key)
        found = await registry.get_version(ref.subject, ref.version)
        out.extend(await referenced_schemas(registry, found.schema, seen))
        out.append((ref.name, found.schema))
    return out
