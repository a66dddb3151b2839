"""Protobuf serdes in the Confluent wire format (magic byte, schema id, message indexes):
``pip install 'kafkaio[protobuf]'``.

The schema registered is the message's file descriptor (base64 of the serialized
FileDescriptorProto, as Confluent's Python serializer registers it); the files it imports are
registered as references under their file names (well-known ``google/protobuf/...`` and
``confluent/...`` files are skipped: registries know them).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from kafkaio.errors import KafkaConfigError, SerializationError
from kafkaio.schema_registry.client import Schema, SchemaReference, SchemaRegistryClient
from kafkaio.schema_registry.serde import (
    SchemaRegistryDeserializer,
    SchemaRegistrySerializer,
    require,
)
from kafkaio.schema_registry.wire import (
    decode_message_indexes,
    encode_message_indexes,
    pack_header,
    unpack_header,
)
from kafkaio.serde.base import SerializationContext

ReferenceSubjectStrategy = Callable[[SerializationContext, Any], str]


def _check_protobuf() -> None:
    require("google.protobuf", "protobuf", "the Protobuf serdes")


def _is_builtin(name: str) -> bool:
    return name.startswith(("confluent/", "google/protobuf/", "google/type/"))


def reference_subject_by_file_name(ctx: SerializationContext, file: Any) -> str:
    """The subject of an imported .proto file: its file name (Confluent's default)."""
    return str(file.name)


def message_indexes(descriptor: Any) -> list[int]:
    """The path of a message type among its file's (nested) message types."""
    path: list[int] = []
    current = descriptor
    while current.containing_type is not None:
        parent = current.containing_type
        path.append(list(parent.nested_types).index(current))
        current = parent
    path.append(list(current.file.message_types_by_name).index(current.name))
    return path[::-1]


def _file_schema(file: Any, references: tuple[SchemaReference, ...] = ()) -> Schema:
    return Schema(
        base64.standard_b64encode(file.serialized_pb).decode("ascii"), "PROTOBUF", references
    )


class ProtobufSerializer(SchemaRegistrySerializer):
    """``message -> 0, schema id, message indexes, protobuf bytes`` (Confluent's format).

    ``message_type`` is the generated message class; ``skip_known_types`` leaves the
    well-known imports out of the references.
    """

    schema_type = "PROTOBUF"

    def __init__(
        self,
        registry: SchemaRegistryClient,
        message_type: type[Any],
        *,
        reference_subject_strategy: ReferenceSubjectStrategy = reference_subject_by_file_name,
        skip_known_types: bool = True,
        **options: Any,
    ) -> None:
        super().__init__(registry, **options)
        _check_protobuf()
        descriptor = getattr(message_type, "DESCRIPTOR", None)
        if descriptor is None:
            raise KafkaConfigError(
                f"ProtobufSerializer needs a generated message class, not {message_type!r}"
            )
        self.message_type = message_type
        self.reference_subject_strategy = reference_subject_strategy
        self.skip_known_types = skip_known_types
        self._indexes = encode_message_indexes(message_indexes(descriptor))
        self._record_name = str(descriptor.full_name)
        self._schemas: dict[str, Schema] = {}  # subject of the message: schema with references

    async def _references(
        self, ctx: SerializationContext, file: Any
    ) -> tuple[SchemaReference, ...]:
        refs = []
        for dependency in file.dependencies:
            if self.skip_known_types and _is_builtin(dependency.name):
                continue
            schema = _file_schema(dependency, await self._references(ctx, dependency))
            subject = self.reference_subject_strategy(ctx, dependency)
            if self.auto_register:
                await self.registry.register_schema(subject, schema, normalize=self.normalize)
            found = await self.registry.lookup_schema(subject, schema, normalize=self.normalize)
            refs.append(SchemaReference(dependency.name, subject, found.version))
        return tuple(refs)

    async def serialize(self, data: Any, ctx: SerializationContext) -> bytes | None:
        if data is None:
            return None
        if not isinstance(data, self.message_type):
            raise SerializationError(
                f"expected a {self.message_type.__name__} message, got {type(data).__name__}"
            )
        schema: Schema | None = None
        if not self.use_latest_version:
            key = f"{ctx.topic}\0{ctx.field}"
            schema = self._schemas.get(key)
            if schema is None:
                file = self.message_type.DESCRIPTOR.file
                schema = _file_schema(file, await self._references(ctx, file))
                self._schemas[key] = schema
        schema_id, _ = await self.schema_for(ctx, schema, self._record_name)
        try:
            payload: bytes = data.SerializeToString()
        except Exception as exc:
            raise SerializationError(f"cannot write the Protobuf message: {exc}") from exc
        return pack_header(schema_id) + self._indexes + payload


class ProtobufDeserializer(SchemaRegistryDeserializer):
    """``0, schema id, message indexes, protobuf bytes -> message_type`` instance.

    Needs no registry: the generated class knows its schema. ``from_message(msg, ctx)``
    may convert the message.
    """

    schema_type = "PROTOBUF"

    def __init__(
        self,
        message_type: type[Any],
        registry: SchemaRegistryClient | None = None,
        *,
        from_message: Callable[[Any, SerializationContext], Any] | None = None,
    ) -> None:
        super().__init__(registry)
        _check_protobuf()
        self.message_type = message_type
        self.from_message = from_message
        self._indexes = message_indexes(message_type.DESCRIPTOR)

    async def deserialize(self, data: bytes | None, ctx: SerializationContext) -> Any:
        if data is None:
            return None
        unpack_header(data)
        indexes, pos = decode_message_indexes(data, 5)
        if indexes != self._indexes:
            raise SerializationError(
                f"the record holds message type index {indexes} of its schema, not "
                f"{self.message_type.DESCRIPTOR.full_name} ({self._indexes})"
            )
        try:
            message = self.message_type.FromString(data[pos:])
        except Exception as exc:
            raise SerializationError(f"cannot read the Protobuf message: {exc}") from exc
        return message if self.from_message is None else self.from_message(message, ctx)
