"""Request and response framing: the size prefix, request/response headers, and dispatch.

Sans-I/O: turns a request object into the bytes of one frame and a received frame back into
(correlation id, response object). The network layer only moves these bytes.
"""

from __future__ import annotations

import struct
from typing import Any, ClassVar, Protocol, TypeVar

from kafkaio.errors import KafkaProtocolError
from kafkaio.protocol._codec import Buffer, _r_uvarint
from kafkaio.protocol.messages import REQUESTS, ApiVersionsResponse

_HEADER_V1 = struct.Struct(">ihhih")  # size, api key, api version, correlation id, client id len
_HEADER_V1_NULL = struct.Struct(">ihhi")
_I32 = struct.Struct(">i")

API_VERSIONS_KEY = 18


class Request(Protocol):
    """What every generated request class provides."""

    API_KEY: ClassVar[int]
    MIN_VERSION: ClassVar[int]
    MAX_VERSION: ClassVar[int]
    FIRST_FLEXIBLE_VERSION: ClassVar[int | None]

    def encode_into(self, version: int, out: bytearray) -> None: ...


R = TypeVar("R")


def is_flexible(cls: Any, version: int) -> bool:
    first: int | None = cls.FIRST_FLEXIBLE_VERSION
    return first is not None and version >= first


def response_class(api_key: int) -> Any:
    """The generated response class for an api key."""
    try:
        return REQUESTS[api_key][1]
    except KeyError:
        raise KafkaProtocolError(f"api key {api_key} is not one kafkaio speaks") from None


def encode_request(
    request: Request, version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """Encode one whole frame: 4-byte size, request header (v1 or v2), body."""
    cls = type(request)
    if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
        raise KafkaProtocolError(
            f"{cls.__name__} version {version} is outside {cls.MIN_VERSION}-{cls.MAX_VERSION}"
        )
    out = bytearray()
    if client_id is None:
        out += _HEADER_V1_NULL.pack(0, cls.API_KEY, version, correlation_id)
        out += b"\xff\xff"
    else:
        cid = client_id.encode()
        out += _HEADER_V1.pack(0, cls.API_KEY, version, correlation_id, len(cid))
        out += cid
    if is_flexible(cls, version):
        out.append(0)  # header v2: empty tagged fields
    request.encode_into(version, out)
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def response_header_flexible(api_key: int, version: int) -> bool:
    """Response header v1 (with tagged fields) iff the API version is flexible.

    ApiVersions is the exception: its response header is always v0, so that a client can read
    the broker's supported versions whatever version it asked with.
    """
    if api_key == API_VERSIONS_KEY:
        return False
    return is_flexible(response_class(api_key), version)


def peek_correlation_id(frame: Buffer) -> int:
    """The correlation id of a response frame (the first 4 bytes, after the size prefix)."""
    if len(frame) < 4:
        raise KafkaProtocolError(f"response frame of {len(frame)} bytes is too short for a header")
    cid: int = _I32.unpack_from(frame, 0)[0]
    return cid


def decode_response(api_key: int, version: int, frame: Buffer) -> Any:
    """Decode a response frame (without its size prefix) of the given api key and version."""
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    pos = 4
    if response_header_flexible(api_key, version):
        try:
            ntags, pos = _r_uvarint(view, pos)
            for _ in range(ntags):
                _tag, pos = _r_uvarint(view, pos)
                size, pos = _r_uvarint(view, pos)
                pos += size
        except IndexError:
            raise KafkaProtocolError("response header is truncated") from None
    cls = response_class(api_key)
    if api_key == API_VERSIONS_KEY and version > 0:
        return _decode_api_versions(view[pos:], version)
    # Bytes after the message are ignored, as the Java client does: some brokers append
    # padding (librdkafka's mock cluster adds a byte to flexible Metadata responses).
    return cls.decode_from(view, pos, version)[0]


def _decode_api_versions(body: memoryview, version: int) -> ApiVersionsResponse:
    """ApiVersions: a broker that does not support `version` answers in v0 with error 35."""
    if len(body) >= 2 and struct.unpack_from(">h", body, 0)[0] == 35:
        return ApiVersionsResponse.decode(body, 0)
    return ApiVersionsResponse.decode(body, version)

