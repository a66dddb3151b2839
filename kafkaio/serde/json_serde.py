"""JSON serdes: plain callables (the clients' fast path), UTF-8, compact separators."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import enum
import json
import uuid
from collections.abc import Callable
from typing import Any

from kafkaio.errors import SerializationError


def json_default(obj: Any) -> Any:
    """What ``json.dumps`` cannot write by itself: dataclasses, datetimes (ISO 8601), dates,
    UUIDs, Decimals (as str), Enums (their value), bytes (base64) and sets (as lists)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    if isinstance(obj, datetime.datetime | datetime.date | datetime.time):
        return obj.isoformat()
    if isinstance(obj, uuid.UUID | decimal.Decimal):
        return str(obj)
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(obj)).decode("ascii")
    if isinstance(obj, set | frozenset):
        return sorted(obj, key=repr)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


class JsonSerializer:
    """``value -> UTF-8 JSON bytes`` (``json.dumps`` with compact separators).

    ``default`` handles types json cannot write (default: :func:`json_default`);
    ``sort_keys`` makes equal dicts equal bytes.
    """

    __slots__ = ("_dumps",)

    def __init__(
        self, *, default: Callable[[Any], Any] | None = json_default, sort_keys: bool = False
    ) -> None:
        encoder = json.JSONEncoder(
            default=default, ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys
        )
        self._dumps = encoder.encode

    def __call__(self, value: Any) -> bytes:
        try:
            return self._dumps(value).encode()
        except (TypeError, ValueError) as exc:
            raise SerializationError(
                f"cannot write JSON: {exc}", path=_bad_path(value, self._dumps)
            ) from exc


class JsonDeserializer:
    """``UTF-8 JSON bytes -> value`` (None stays None)."""

    __slots__ = ("_loads",)

    def __init__(self, *, object_hook: Callable[[dict[str, Any]], Any] | None = None) -> None:
        self._loads = json.JSONDecoder(object_hook=object_hook).decode

    def __call__(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return self._loads(data.decode())
        except UnicodeDecodeError as exc:
            raise SerializationError(f"not UTF-8 text: {exc}") from exc
        except json.JSONDecodeError as exc:
            raise SerializationError(f"not JSON: {exc}") from exc


def _bad_path(value: Any, dumps: Callable[[Any], str], prefix: str = "") -> str | None:
    """The first field of `value` that `dumps` cannot write, as a path ("a.b[2]")."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        items: list[tuple[str, Any]] = [
            (f.name, getattr(value, f.name)) for f in dataclasses.fields(value)
        ]
    elif isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, list | tuple):
        items = [(f"[{i}]", v) for i, v in enumerate(value)]
    else:
        return None
    for name, item in items:
        path = f"{prefix}{name}" if name.startswith("[") or not prefix else f"{prefix}.{name}"
        try:
            dumps(item)
        except (TypeError, ValueError):
            return _bad_path(item, dumps, path) or path
    return None
