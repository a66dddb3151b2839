"""Subject name strategies: which subject a record's schema is registered under.

Each is ``(ctx, record_name) -> subject``; ``record_name`` is the schema's full name (Avro
record ``namespace.name``, Protobuf message full name, JSON Schema ``title``).
"""

from __future__ import annotations

from collections.abc import Callable

from kafkaio.errors import SerializationError
from kafkaio.serde.base import SerializationContext

SubjectNameStrategy = Callable[[SerializationContext, "str | None"], str]


def topic_subject_name_strategy(ctx: SerializationContext, record_name: str | None) -> str:
    """``<topic>-key`` / ``<topic>-value`` (the default: one schema lineage per topic)."""
    return f"{ctx.topic}-{ctx.field}"


def record_subject_name_strategy(ctx: SerializationContext, record_name: str | None) -> str:
    """``<record full name>``: one lineage per record type, shared by topics."""
    if not record_name:
        raise SerializationError(
            "the record subject name strategy needs a named schema (an Avro record, a "
            "Protobuf message or a JSON Schema with a title)"
        )
    return record_name


def topic_record_subject_name_strategy(ctx: SerializationContext, record_name: str | None) -> str:
    """``<topic>-<record full name>``: several record types per topic, each with its lineage."""
    return f"{ctx.topic}-{record_subject_name_strategy(ctx, record_name)}"
