"""Primitives shared by the generated protocol messages: varints, tagged fields, dispatch.

Hand-written and sans-I/O; the generated modules in kafkaio/protocol/messages import from here.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any, TypeAlias

from kafkaio.errors import KafkaProtocolError, UnsupportedVersionError

Buffer: TypeAlias = bytes | bytearray | memoryview

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_NULL16 = b"\xff\xff"
_NULL32 = b"\xff\xff\xff\xff"
_UUID_ZERO = uuid.UUID(int=0)

__all__ = [
    "Buffer", "struct", "_I16", "_I32", "_NULL16", "_NULL32", "_UUID_ZERO",
    "_decode_all", "_decode_at", "_encoder", "_fixed_arrays", "_null", "_r_uvarint", "_skip_tags",
    "_truncated",
    "_uuid",
    "_w_tags", "_w_uvarint", "read_uvarint", "write_uvarint",
]


def _truncated() -> KafkaProtocolError:
    return KafkaProtocolError("message is truncated: a length points past the end of the frame")


def _null(name: str) -> KafkaProtocolError:
    return KafkaProtocolError(f"field {name} is null but is not nullable in this version")


def _uuid(b: memoryview) -> uuid.UUID:
    return uuid.UUID(bytes=bytes(b))


_ARRAYS: dict[tuple[str, int], tuple[struct.Struct, ...]] = {}


def _fixed_arrays(code: str, count: int) -> tuple[struct.Struct, ...]:
    """Structs of big-endian arrays of 0 to `count` - 1 items of struct code `code`, shared by
    the generated modules: element n decodes an array of n items."""
    arrays = _ARRAYS.get((code, count))
    if arrays is None:
        arrays = _ARRAYS[code, count] = tuple(struct.Struct(f">{n}{code}") for n in range(count))
    return arrays


def _r_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """Read an unsigned varint at `pos`; returns (value, next position)."""
    shift = 0
    value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise KafkaProtocolError("unsigned varint is longer than 5 bytes")


def _skip_tags(buf: memoryview, pos: int) -> int:
    """Skip a tagged-fields section of unknown tags; returns the position after it."""
    n, pos = _r_uvarint(buf, pos)
    for _ in range(n):
        _tag, pos = _r_uvarint(buf, pos)
        size, pos = _r_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise _truncated()
    return pos


def _w_uvarint(value: int, out: bytearray) -> None:
    """Append an unsigned varint."""
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _w_tags(tags: list[tuple[int, bytearray]], out: bytearray) -> None:
    _w_uvarint(len(tags), out)
    for tag, data in tags:
        _w_uvarint(tag, out)
        _w_uvarint(len(data), out)
        out += data


read_uvarint = _r_uvarint
write_uvarint = _w_uvarint


def _encoder(
    table: dict[str, dict[int, Callable[[Any, bytearray], None]]], name: str, version: int
) -> Callable[[Any, bytearray], None]:
    try:
        return table[name][version]
    except KeyError:
        versions = sorted(table[name])
        raise UnsupportedVersionError(
            f"{name} version {version} does not exist; this client speaks versions "
            f"{versions[0]}-{versions[-1]}"
        ) from None


_DECODE_ERRORS = (struct.error, IndexError, UnicodeDecodeError, ValueError, OverflowError)


def _decode_at(
    table: dict[str, dict[int, Callable[[memoryview, int], tuple[Any, int]]]],
    name: str,
    buf: memoryview,
    pos: int,
    version: int,
) -> tuple[Any, int]:
    try:
        fn = table[name][version]
    except KeyError:
        versions = sorted(table[name])
        raise UnsupportedVersionError(
            f"{name} version {version} does not exist; this client speaks versions "
            f"{versions[0]}-{versions[-1]}"
        ) from None
    try:
        return fn(buf, pos)
    except KafkaProtocolError:
        raise
    except _DECODE_ERRORS as exc:
        raise KafkaProtocolError(f"could not decode {name} v{version}: {exc}") from exc


def _decode_all(
    table: dict[str, dict[int, Callable[[memoryview, int], tuple[Any, int]]]],
    name: str,
    buf: Buffer,
    version: int,
) -> Any:
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    msg, end = _decode_at(table, name, view, 0, version)
    if end != len(view):
        raise KafkaProtocolError(
            f"{name} v{version}: {len(view) - end} bytes left over after the message; "
            "the frame does not match the negotiated version"
        )
    return msg
