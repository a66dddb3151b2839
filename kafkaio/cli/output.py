"""Output helpers of the command-line tool: aligned tables for people, JSON for programs,
consumed records as raw, JSON or template lines, and byte decoding for keys and values."""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from kafkaio.cli.app import UsageError
from kafkaio.consumer import ConsumerRecord
from kafkaio.errors import KafkaError

DEFAULT_TEMPLATE = "{topic}/{partition}@{offset} {key} {value}"
RecordFormatter = Callable[[ConsumerRecord[bytes | None, bytes | None]], str]


def text(data: bytes | None) -> str | None:
    """Bytes as text (UTF-8, undecodable bytes escaped), None stays None."""
    return None if data is None else data.decode("utf-8", "backslashreplace")


def jsonable(value: Any) -> Any:
    """Dataclasses, enums, errors, tuples, UUIDs and bytes made JSON-friendly."""
    if isinstance(value, KafkaError):
        return {"error": getattr(value, "name", type(value).__name__), "message": str(value)}
    if isinstance(value, enum.Enum):
        return value.name
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):  # TopicPartition
        return jsonable(value._asdict())
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(value).decode()}
    return value


def emit_json(out: TextIO, value: Any) -> None:
    out.write(json.dumps(jsonable(value), indent=2, sort_keys=False) + "\n")


def table(out: TextIO, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print rows under headers, columns left-aligned to their widest cell."""
    cells = [[str(h) for h in headers]] + [["-" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for r in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


def error_text(error: KafkaError | None) -> str:
    return "" if error is None else getattr(error, "name", type(error).__name__)


def record_formatter(
    fmt: str, template: str | None = None, key_separator: str | None = None
) -> RecordFormatter:
    """A function rendering one consumed record as one output line (without newline):
    ``raw`` the value (``key SEP value`` with a key separator), ``json`` an object, or
    ``template`` (also whenever ``template`` is given) a str.format pattern over the fields
    topic, partition, offset, timestamp, key, value and headers."""
    if template is not None or fmt == "template":
        pattern = template or DEFAULT_TEMPLATE
        try:
            pattern.format_map(
                _fields(ConsumerRecord("t", 0, 0, 0, 0, None, None, (), None, -1, -1))
            )
        except (KeyError, IndexError, ValueError) as exc:
            raise UsageError(f"bad --template {pattern!r}: {exc!r}") from None
        return lambda r: pattern.format_map(_fields(r))
    if fmt == "json":
        return _as_json
    if key_separator is not None:
        return lambda r: f"{text(r.key) or ''}{key_separator}{text(r.value) or ''}"
    return lambda r: text(r.value) or ""


def _as_json(r: ConsumerRecord[bytes | None, bytes | None]) -> str:
    return json.dumps(
        {
            "topic": r.topic,
            "partition": r.partition,
            "offset": r.offset,
            "timestamp": r.timestamp,
            "key": text(r.key),
            "value": text(r.value),
            "headers": {k: text(v) for k, v in r.headers},
        },
        ensure_ascii=False,
    )


def _fields(r: ConsumerRecord[bytes | None, bytes | None]) -> dict[str, Any]:
    return {
        "topic": r.topic,
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "key": text(r.key) or "",
        "value": text(r.value) or "",
        "headers": ",".join(f"{k}={text(v)}" for k, v in r.headers),
    }
