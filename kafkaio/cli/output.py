"""Output helpers of the command-line tool: aligned tables for people, JSON for programs,
and consumed records as raw, JSON or template lines (bytes, written as they are)."""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TextIO

from kafkaio.cli.app import UsageError
from kafkaio.consumer import ConsumerRecord
from kafkaio.errors import KafkaError

DEFAULT_TEMPLATE = "{topic}/{partition}@{offset} {key} {value}"
RecordFormatter = Callable[[ConsumerRecord[bytes | None, bytes | None]], bytes]


class ByteSink(Protocol):
    """Where consumed records are written: a binary stream such as ``sys.stdout.buffer``."""

    def write(self, data: bytes, /) -> object: ...

    def flush(self) -> object: ...


def byte_sink(out: TextIO) -> ByteSink:
    """The binary stream under ``out`` (``sys.stdout.buffer``), so that keys and values are
    written as they are; a text-only stream (``io.StringIO``) gets UTF-8 text with
    undecodable bytes escaped."""
    out.flush()  # anything written as text comes first
    buffer = getattr(out, "buffer", None)
    return _TextSink(out) if buffer is None else buffer


class _TextSink:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def write(self, data: bytes, /) -> int:
        return self.out.write(data.decode("utf-8", "backslashreplace"))

    def flush(self) -> None:
        self.out.flush()


def text(data: bytes | None) -> str | None:
    """Bytes as a str that encodes back to the same bytes (UTF-8; undecodable bytes as
    surrogate escapes, see ``raw``), None stays None."""
    return None if data is None else data.decode("utf-8", "surrogateescape")


def raw(value: str) -> bytes:
    """A str from ``text`` or the command line (argv) back to its bytes."""
    return value.encode("utf-8", "surrogateescape")


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
    """A function rendering one consumed record as one output line of bytes (without
    newline): ``raw`` the value (``key SEP value`` with a key separator), ``json`` an
    object, or ``template`` (also whenever ``template`` is given) a str.format pattern over
    the fields topic, partition, offset, timestamp, key, value and headers. Raw and template
    lines carry keys, values and header values byte for byte (as kcat); JSON carries a
    non-UTF-8 one as ``{"base64": ...}`` and headers as a list of ``[key, value]`` pairs."""
    if template is not None or fmt == "template":
        pattern = template or DEFAULT_TEMPLATE
        try:
            pattern.format_map(
                _fields(ConsumerRecord("t", 0, 0, 0, 0, None, None, (), None, -1, -1))
            )
        except (KeyError, IndexError, ValueError) as exc:
            raise UsageError(f"bad --template {pattern!r}: {exc!r}") from None
        return lambda r: raw(pattern.format_map(_fields(r)))
    if fmt == "json":
        return _as_json
    if key_separator is not None:
        sep = raw(key_separator)
        return lambda r: (r.key or b"") + sep + (r.value or b"")
    return lambda r: r.value or b""


def _as_json(r: ConsumerRecord[bytes | None, bytes | None]) -> bytes:
    line = json.dumps(
        {
            "topic": r.topic,
            "partition": r.partition,
            "offset": r.offset,
            "timestamp": r.timestamp,
            "key": _json_field(r.key),  # a str if UTF-8, else {"base64": ...}; None is null
            "value": _json_field(r.value),
            "headers": [[k, jsonable(v)] for k, v in r.headers],  # keys may repeat
        },
        ensure_ascii=False,
    )
    return line.encode("utf-8", "backslashreplace")  # a lone surrogate as a JSON \u escape


def _json_field(data: bytes | None) -> Any:
    """A key or value for the JSON format: one decoded by -s as the JSON value it is."""
    if type(data) is not bytes and isinstance(data, bytes):  # cli.decoding.Decoded
        return json.loads(data)
    return jsonable(data)


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
