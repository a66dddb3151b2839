"""``consume -s avro -r URL``: keys and values written by Schema Registry serializers,
decoded and printed as JSON text (the JSON format embeds them as JSON values)."""

from __future__ import annotations

import json
from typing import Any

from kafkaio.cli.app import UsageError
from kafkaio.serde import Deserializer, SerializationContext
from kafkaio.serde.json_serde import json_default

FORMATS = ("avro", "json")

_dumps = json.JSONEncoder(default=json_default, ensure_ascii=False).encode


class Decoded(bytes):
    """A decoded key or value as UTF-8 JSON text (``--format json`` embeds it as JSON)."""


class _AsJson(Deserializer[Decoded]):
    def __init__(self, inner: Deserializer[Any]) -> None:
        self.inner = inner

    async def deserialize(self, data: bytes | None, ctx: SerializationContext) -> Any:
        if data is None:
            return None
        value = await self.inner.deserialize(data, ctx)
        return Decoded(_dumps(value).encode())


def registry_deserializers(url: str, specs: list[str]) -> dict[str, Any]:
    """``key_deserializer``/``value_deserializer`` for -s specs (``avro``, ``value=json``)."""
    from kafkaio.schema_registry import (
        AvroDeserializer,
        JsonSchemaDeserializer,
        SchemaRegistryClient,
    )

    registry = SchemaRegistryClient(url)
    chosen: dict[str, str] = {}
    for spec in specs:
        field, sep, fmt = spec.rpartition("=")
        fields = [field] if sep else ["value"]
        if sep and field not in ("key", "value"):
            raise UsageError(f"-s {spec!r}: use FORMAT, key=FORMAT or value=FORMAT")
        if fmt not in FORMATS:
            raise UsageError(f"-s {spec!r}: the formats are {', '.join(FORMATS)}")
        for f in fields:
            chosen[f] = fmt
    out: dict[str, Any] = {}
    for field, fmt in chosen.items():
        inner: Deserializer[Any] = (
            AvroDeserializer(registry) if fmt == "avro" else JsonSchemaDeserializer(registry)
        )
        out[f"{field}_deserializer"] = _AsJson(inner)
    return out
