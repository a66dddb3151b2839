"""Wire codec of the KIP-932 share-group APIs as brokers speak them: version 1.

Stopgap: the generated codec (from Kafka 4.0-dev JSON) only knows the early-access v0.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kafkaio.errors import KafkaProtocolError
from kafkaio.protocol import messages as m
from kafkaio.protocol.api import Request
from kafkaio.protocol.messages import share_acknowledge as _gen_ack
from kafkaio.protocol.messages import share_fetch as _gen_fetch
from kafkaio.protocol.messages import share_group_heartbeat as _gen_heartbeat

# Version 1 is the first stable version (Kafka 4.1, KIP-932). The heartbeat and acknowledge
# layouts of v1 equal the early-access v0; ShareFetch v1 adds MaxRecords/BatchSize, drops
# PartitionMaxBytes and answers AcquisitionLockTimeoutMs.
SHARE_API_VERSION = 1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_ACQUIRED = struct.Struct(">qqh")


# -- writing ------------------------------------------------------------------------------


def _w_uvarint(value: int, out: bytearray) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _w_string(value: str | None, out: bytearray) -> None:
    if value is None:
        out.append(0)
        return
    data = value.encode()
    _w_uvarint(len(data) + 1, out)
    out += data


# -- reading ------------------------------------------------------------------------------


class _Reader:
    """A cursor over one flexible-version message body."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: memoryview, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    def _fixed(self, st: struct.Struct) -> Any:
        try:
            value = st.unpack_from(self.buf, self.pos)
        except struct.error:
            raise _truncated() from None
        self.pos += st.size
        return value[0] if len(value) == 1 else value

    def i16(self) -> int:
        return int(self._fixed(_I16))

    def i32(self) -> int:
        return int(self._fixed(_I32))

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            if self.pos >= len(self.buf):
                raise _truncated()
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7
            if shift > 28:
                raise KafkaProtocolError("unsigned varint is longer than 5 bytes")

    def bytes_(self) -> bytes | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        end = self.pos + n
        if end > len(self.buf):
            raise _truncated()
        data = bytes(self.buf[self.pos : end])
        self.pos = end
        return data

    def string(self) -> str | None:
        data = self.bytes_()
        return None if data is None else data.decode()

    def uuid(self) -> uuid.UUID:
        end = self.pos + 16
        if end > len(self.buf):
            raise _truncated()
        value = uuid.UUID(bytes=bytes(self.buf[self.pos : end]))
        self.pos = end
        return value

    def count(self) -> int:
        n = self.uvarint() - 1
        if n > len(self.buf) - self.pos:
            raise _truncated()
        return n

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            size = self.uvarint()
            self.pos += size
            if self.pos > len(self.buf):
                raise _truncated()


def _truncated() -> KafkaProtocolError:
    return KafkaProtocolError("share-group response is truncated or does not match v1")


# -- ShareGroupHeartbeat v1 (api key 76) ----------------------------------------------------


@dataclass(slots=True)
class ShareGroupHeartbeatRequestV1(Request["ShareGroupHeartbeatResponseV1"]):
    """ShareGroupHeartbeat v1: join (epoch 0), heartbeat, or leave (epoch -1)."""

    API_KEY: ClassVar[int] = 76
    MIN_VERSION: ClassVar[int] = 1
    MAX_VERSION: ClassVar[int] = 1
    MAX_STABLE_VERSION: ClassVar[int] = 1
    FIRST_FLEXIBLE_VERSION: ClassVar[int | None] = 0

    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: list[str] | None = None

    def encode_into(self, version: int, out: bytearray) -> None:
        # v1's layout is v0's
        m.ShareGroupHeartbeatRequest(
            self.group_id,
            self.member_id,
            self.member_epoch,
            self.rack_id,
            self.subscribed_topic_names,
        ).encode_into(0, out)


# The response type is the generated ShareGroupHeartbeatResponse (same layout as v0).
ShareGroupHeartbeatResponseV1 = m.ShareGroupHeartbeatResponse


# -- ShareAcknowledge v1 (api key 79) -------------------------------------------------------


@dataclass(slots=True)
class AckBatch:
    """Offsets first..last (inclusive) with one acknowledge type, or one per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: list[int]


@dataclass(slots=True)
class AckPartition:
    partition_index: int
    batches: list[AckBatch] = field(default_factory=list)


@dataclass(slots=True)
class AckTopic:
    topic_id: uuid.UUID
    partitions: list[AckPartition] = field(default_factory=list)


def _w_ack_topics(topics: list[AckTopic], out: bytearray, *, fetch: bool) -> None:
    _w_uvarint(len(topics) + 1, out)
    for topic in topics:
        out += topic.topic_id.bytes
        _w_uvarint(len(topic.partitions) + 1, out)
        for part in topic.partitions:
            out += _I32.pack(part.partition_index)
            _w_uvarint(len(part.batches) + 1, out)
            for batch in part.batches:
                out += _I64.pack(batch.first_offset)
                out += _I64.pack(batch.last_offset)
                _w_uvarint(len(batch.acknowledge_types) + 1, out)
                out += bytes(t & 0xFF for t in batch.acknowledge_types)
                out.append(0)
            out.append(0)
        out.append(0)


@dataclass(slots=True)
class ShareAcknowledgeRequestV1(Request["ShareAcknowledgeResponseV1"]):
    """ShareAcknowledge v1: acknowledgements outside a fetch (epoch -1 also closes)."""

    API_KEY: ClassVar[int] = 79
    MIN_VERSION: ClassVar[int] = 1
    MAX_VERSION: ClassVar[int] = 1
    MAX_STABLE_VERSION: ClassVar[int] = 1
    FIRST_FLEXIBLE_VERSION: ClassVar[int | None] = 0

    group_id: str
    member_id: str
    share_session_epoch: int
    topics: list[AckTopic] = field(default_factory=list)

    def encode_into(self, version: int, out: bytearray) -> None:
        _w_string(self.group_id, out)
        _w_string(self.member_id, out)
        out += _I32.pack(self.share_session_epoch)
        _w_ack_topics(self.topics, out, fetch=False)
        out.append(0)


ShareAcknowledgeResponseV1 = m.ShareAcknowledgeResponse


# -- ShareFetch v1 (api key 78) -------------------------------------------------------------


@dataclass(slots=True)
class FetchTopic:
    """Partitions to fetch from (and acknowledge on) in one ShareFetch."""

    topic_id: uuid.UUID
    partitions: list[AckPartition] = field(default_factory=list)


@dataclass(slots=True)
class ShareFetchRequestV1(Request["ShareFetchResponseV1"]):
    """ShareFetch v1: fetch (acquire) records and piggyback acknowledgements."""

    API_KEY: ClassVar[int] = 78
    MIN_VERSION: ClassVar[int] = 1
    MAX_VERSION: ClassVar[int] = 1
    MAX_STABLE_VERSION: ClassVar[int] = 1
    FIRST_FLEXIBLE_VERSION: ClassVar[int | None] = 0

    group_id: str
    member_id: str
    share_session_epoch: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    max_records: int
    batch_size: int
    topics: list[FetchTopic] = field(default_factory=list)
    forgotten: list[tuple[uuid.UUID, list[int]]] = field(default_factory=list)

    def encode_into(self, version: int, out: bytearray) -> None:
        _w_string(self.group_id, out)
        _w_string(self.member_id, out)
        out += struct.pack(
            ">iiiiii",
            self.share_session_epoch,
            self.max_wait_ms,
            self.min_bytes,
            self.max_bytes,
            self.max_records,
            self.batch_size,
        )
        _w_ack_topics([AckTopic(t.topic_id, t.partitions) for t in self.topics], out, fetch=True)
        _w_uvarint(len(self.forgotten) + 1, out)
        for topic_id, partitions in self.forgotten:
            out += topic_id.bytes
            _w_uvarint(len(partitions) + 1, out)
            for p in partitions:
                out += _I32.pack(p)
            out.append(0)
        out.append(0)


@dataclass(slots=True)
class AcquiredRange:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(slots=True)
class ShareFetchPartitionData:
    partition_index: int
    error_code: int
    error_message: str | None
    acknowledge_error_code: int
    acknowledge_error_message: str | None
    leader_id: int
    leader_epoch: int
    records: bytes | None
    acquired_records: list[AcquiredRange]


@dataclass(slots=True)
class ShareFetchTopicData:
    topic_id: uuid.UUID
    partitions: list[ShareFetchPartitionData]


@dataclass(slots=True)
class ShareFetchResponseV1:
    """ShareFetch v1 response (decoded by hand; see the module docstring)."""

    throttle_time_ms: int
    error_code: int
    error_message: str | None
    acquisition_lock_timeout_ms: int
    responses: list[ShareFetchTopicData]
    node_endpoints: list[tuple[int, str, int, str | None]]


def decode_share_fetch_response_v1(buf: memoryview, pos: int) -> tuple[ShareFetchResponseV1, int]:
    r = _Reader(buf, pos)
    throttle = r.i32()
    error_code = r.i16()
    error_message = r.string()
    lock_timeout = r.i32()
    topics = []
    for _ in range(r.count()):
        topic_id = r.uuid()
        parts = []
        for _ in range(r.count()):
            index = r.i32()
            code = r.i16()
            message = r.string()
            ack_code = r.i16()
            ack_message = r.string()
            leader_id = r.i32()
            leader_epoch = r.i32()
            r.skip_tags()
            records = r.bytes_()
            acquired = []
            for _ in range(r.count()):
                first, last, count = r._fixed(_ACQUIRED)
                r.skip_tags()
                acquired.append(AcquiredRange(first, last, count))
            r.skip_tags()
            parts.append(
                ShareFetchPartitionData(
                    index,
                    code,
                    message,
                    ack_code,
                    ack_message,
                    leader_id,
                    leader_epoch,
                    records,
                    acquired,
                )
            )
        r.skip_tags()
        topics.append(ShareFetchTopicData(topic_id, parts))
    nodes = []
    for _ in range(r.count()):
        node_id = r.i32()
        host = r.string() or ""
        port = r.i32()
        rack = r.string()
        r.skip_tags()
        nodes.append((node_id, host, port, rack))
    r.skip_tags()
    response = ShareFetchResponseV1(
        throttle, error_code, error_message, lock_timeout, topics, nodes
    )
    return response, r.pos


def install() -> None:
    """Teach the response decoder v1 of the three share APIs (idempotent, additive only).

    kafkaio's connection decodes responses through the generated classes' version tables;
    this adds a v1 entry to each (v0 and every other API are untouched).
    """
    _gen_heartbeat._DECODERS["ShareGroupHeartbeatResponse"].setdefault(
        1, _gen_heartbeat._DECODERS["ShareGroupHeartbeatResponse"][0]
    )
    _gen_ack._DECODERS["ShareAcknowledgeResponse"].setdefault(
        1, _gen_ack._DECODERS["ShareAcknowledgeResponse"][0]
    )
    _gen_fetch._DECODERS["ShareFetchResponse"].setdefault(1, decode_share_fetch_response_v1)


install()
