"""Typed JSON serdes: dataclasses (stdlib) and Pydantic models (``pip install kafkaio[pydantic]``).

Deserializers check the JSON against the class's annotations and name the field that does
not fit (``"items[2].sku: expected str, got int"``); unknown JSON fields are ignored, so a
producer may add fields before its consumers know them.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import types
import typing
import uuid
from typing import Any, Generic, TypeVar

from kafkaio.errors import KafkaConfigError, SerializationError
from kafkaio.serde.json_serde import JsonSerializer

T = TypeVar("T")
_NONE = type(None)


class DataclassSerializer(Generic[T]):
    """``instance of cls -> UTF-8 JSON`` (datetimes ISO 8601, Enums by value, bytes base64)."""

    __slots__ = ("cls", "_json")

    def __init__(self, cls: type[T]) -> None:
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise KafkaConfigError(f"DataclassSerializer needs a dataclass, not {cls!r}")
        self.cls = cls
        self._json = JsonSerializer()

    def __call__(self, value: T) -> bytes:
        if not isinstance(value, self.cls):
            raise SerializationError(f"expected a {self.cls.__name__}, got {type(value).__name__}")
        return self._json(value)


class DataclassDeserializer(Generic[T]):
    """``UTF-8 JSON -> instance of cls``, checking each field against its annotation.

    Supports str, int, float, bool, None, Optional/unions, list/tuple/set/dict, Literal,
    nested dataclasses, Enums, datetime/date/time (ISO 8601), UUID, Decimal, bytes (base64)
    and Any. Missing fields with defaults take them; missing required fields are errors.
    """

    __slots__ = ("cls", "_hints")

    def __init__(self, cls: type[T]) -> None:
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise KafkaConfigError(f"DataclassDeserializer needs a dataclass, not {cls!r}")
        self.cls = cls
        typing.get_type_hints(cls)  # fail now on unresolvable annotations

    def __call__(self, data: bytes | None) -> T | None:
        if data is None:
            return None
        try:
            obj = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SerializationError(f"not JSON: {exc}") from exc
        result: T = _convert(obj, self.cls, "")
        return result


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _fail(path: str, tp: Any, obj: Any) -> SerializationError:
    shown = repr(obj)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return SerializationError(
        f"{path or 'value'}: expected {_type_name(tp)}, got {type(obj).__name__} {shown}",
        path=path or None,
    )


def _join(path: str, name: str) -> str:
    return f"{path}{name}" if name.startswith("[") or not path else f"{path}.{name}"


def _convert(obj: Any, tp: Any, path: str) -> Any:  # noqa: C901 - one dispatch over kinds
    if tp is Any:
        return obj
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        args = typing.get_args(tp)
        if obj is None and _NONE in args:
            return None
        for arg in args:
            if arg is _NONE:
                continue
            try:
                return _convert(obj, arg, path)
            except SerializationError:
                continue
        raise _fail(path, tp, obj)
    if origin is typing.Literal:
        if obj in typing.get_args(tp):
            return obj
        raise _fail(path, tp, obj)
    if origin in (list, set, frozenset, tuple) or tp in (list, set, frozenset, tuple):
        if not isinstance(obj, list):
            raise _fail(path, tp, obj)
        args = typing.get_args(tp)
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(obj) != len(args):
                raise _fail(path, tp, obj)
            return tuple(
                _convert(v, a, _join(path, f"[{i}]"))
                for i, (v, a) in enumerate(zip(obj, args, strict=True))
            )
        item = args[0] if args else Any
        items = [_convert(v, item, _join(path, f"[{i}]")) for i, v in enumerate(obj)]
        kind = origin or tp
        return items if kind is list else kind(items)
    if origin is dict or tp is dict:
        if not isinstance(obj, dict):
            raise _fail(path, tp, obj)
        args = typing.get_args(tp)
        value_tp = args[1] if args else Any
        return {k: _convert(v, value_tp, _join(path, str(k))) for k, v in obj.items()}
    if isinstance(tp, type):
        if dataclasses.is_dataclass(tp):
            return _dataclass(obj, tp, path)
        if issubclass(tp, enum.Enum):
            try:
                return tp(obj)
            except ValueError:
                raise _fail(path, tp, obj) from None
        if tp is bool:
            if isinstance(obj, bool):
                return obj
            raise _fail(path, tp, obj)
        if tp is int:
            if isinstance(obj, int) and not isinstance(obj, bool):
                return obj
            raise _fail(path, tp, obj)
        if tp is float:
            if isinstance(obj, int | float) and not isinstance(obj, bool):
                return float(obj)
            raise _fail(path, tp, obj)
        if tp is str:
            if isinstance(obj, str):
                return obj
            raise _fail(path, tp, obj)
        if tp is _NONE:
            if obj is None:
                return None
            raise _fail(path, tp, obj)
        return _parse_scalar(obj, tp, path)
    raise SerializationError(f"{path or 'value'}: unsupported annotation {tp!r}", path=path)


def _parse_scalar(obj: Any, tp: type, path: str) -> Any:
    parsers: dict[type, Any] = {
        datetime.datetime: datetime.datetime.fromisoformat,
        datetime.date: datetime.date.fromisoformat,
        datetime.time: datetime.time.fromisoformat,
        uuid.UUID: uuid.UUID,
        decimal.Decimal: decimal.Decimal,
    }
    if tp is bytes:
        import base64

        if isinstance(obj, str):
            try:
                return base64.b64decode(obj, validate=True)
            except ValueError:
                pass
        raise _fail(path, tp, obj)
    parse = parsers.get(tp)
    if parse is None:
        raise SerializationError(f"{path or 'value'}: unsupported type {tp.__name__}", path=path)
    if isinstance(obj, str) or (tp is decimal.Decimal and isinstance(obj, int | float)):
        try:
            return parse(obj if isinstance(obj, str) else str(obj))
        except (ValueError, decimal.InvalidOperation):
            pass
    raise _fail(path, tp, obj)


def _dataclass(obj: Any, cls: type, path: str) -> Any:
    if not isinstance(obj, dict):
        raise _fail(path, cls, obj)
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    later: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        where = _join(path, f.name)
        if f.name in obj:
            value = _convert(obj[f.name], hints.get(f.name, Any), where)
            (kwargs if f.init else later)[f.name] = value
        elif (
            f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ):
            raise SerializationError(f"{where}: missing (a required field)", path=where)
    instance = cls(**kwargs)
    for name, value in later.items():
        object.__setattr__(instance, name, value)
    return instance


class PydanticSerializer(Generic[T]):
    """``model instance -> JSON`` (``model_dump_json``); dicts are validated first."""

    __slots__ = ("model", "_adapter")

    def __init__(self, model: type[T]) -> None:
        self.model = model
        self._adapter = _type_adapter(model)

    def __call__(self, value: Any) -> bytes:
        from pydantic import ValidationError

        try:
            if not isinstance(value, self.model):
                value = self._adapter.validate_python(value)
            dumped: bytes = self._adapter.dump_json(value)
            return dumped
        except ValidationError as exc:
            raise _pydantic_error(exc) from exc


class PydanticDeserializer(Generic[T]):
    """``JSON -> model instance`` (``model_validate_json``); errors name the field."""

    __slots__ = ("model", "_adapter")

    def __init__(self, model: type[T]) -> None:
        self.model = model
        self._adapter = _type_adapter(model)

    def __call__(self, data: bytes | None) -> T | None:
        if data is None:
            return None
        from pydantic import ValidationError

        try:
            result: T = self._adapter.validate_json(data)
            return result
        except ValidationError as exc:
            raise _pydantic_error(exc) from exc


def _type_adapter(model: Any) -> Any:
    try:
        from pydantic import TypeAdapter
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise KafkaConfigError(
            "the Pydantic serdes need pydantic 2: pip install 'kafkaio[pydantic]'"
        ) from exc
    return TypeAdapter(model)


def _pydantic_error(exc: Any) -> SerializationError:
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": str(exc)}
    path = ""
    for part in first.get("loc", ()):
        path = _join(path, f"[{part}]" if isinstance(part, int) else str(part))
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return SerializationError(
        f"{path or 'value'}: {first.get('msg', 'invalid')}{more}", path=path or None
    )
