"""The Confluent wire format: magic byte 0, the schema id (4 bytes, big-endian), the payload;
Protobuf payloads start with the message-index array (zig-zag varints; ``[0]`` is one 0 byte)."""

from __future__ import annotations

import struct

from kafkaio.errors import SerializationError

MAGIC_BYTE = 0
_HEADER = struct.Struct(">bI")
HEADER_SIZE = _HEADER.size


def pack_header(schema_id: int) -> bytes:
    """Magic byte and schema id."""
    return _HEADER.pack(MAGIC_BYTE, schema_id)


def unpack_header(data: bytes) -> int:
    """The schema id of a framed payload; SerializationError if the frame is not there."""
    if len(data) < HEADER_SIZE:
        raise SerializationError(
            f"{len(data)} bytes are too short for the Schema Registry framing (magic byte and "
            "4-byte schema id): was this record written by a Schema Registry serializer?"
        )
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC_BYTE:
        raise SerializationError(
            f"unknown magic byte {magic} (expected {MAGIC_BYTE}): this record was not written "
            "by a Schema Registry serializer"
        )
    return int(schema_id)


def _zigzag_varint(value: int, out: bytearray) -> None:
    value = (value << 1) ^ (value >> 63)
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def encode_message_indexes(indexes: list[int]) -> bytes:
    """The message-index array: the path to the message type among the file's messages."""
    if indexes == [0]:
        return b"\x00"
    out = bytearray()
    _zigzag_varint(len(indexes), out)
    for index in indexes:
        _zigzag_varint(index, out)
    return bytes(out)


def _read_zigzag(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    value = 0
    while True:
        if pos >= len(data):
            raise SerializationError("truncated message-index array in a Protobuf record")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise SerializationError("malformed varint in a Protobuf message-index array")
    return (value >> 1) ^ -(value & 1), pos


def decode_message_indexes(data: bytes | memoryview, pos: int) -> tuple[list[int], int]:
    """The message-index array at ``pos`` and the position after it."""
    count, pos = _read_zigzag(data, pos)
    if count == 0:
        return [0], pos
    if count < 0 or count > 100:
        raise SerializationError(f"implausible message-index count {count} in a Protobuf record")
    indexes = []
    for _ in range(count):
        index, pos = _read_zigzag(data, pos)
        indexes.append(index)
    return indexes, pos
