"""The hand-written v1 codec of the share APIs, checked against Kafka 4.1's v1 field layout."""

from __future__ import annotations

import struct
import uuid

import pytest

from kafkaio.errors import KafkaProtocolError
from kafkaio.protocol import messages as m
from kafkaio.protocol.frames import decode_response, encode_request
from kafkaio.share.protocol import (
    AckBatch,
    AckPartition,
    FetchTopic,
    ShareFetchRequestV1,
    ShareGroupHeartbeatRequestV1,
    decode_share_fetch_response_v1,
)

TID = uuid.UUID(int=0x1234)


def compact_str(s: str | None) -> bytes:
    return b"\x00" if s is None else bytes([len(s) + 1]) + s.encode()


def test_share_fetch_v1_request_layout() -> None:
    req = ShareFetchRequestV1(
        "g",
        "m",
        3,
        500,
        1,
        1000,
        50,
        25,
        [FetchTopic(TID, [AckPartition(0, [AckBatch(5, 6, [1, 2])])])],
        [(TID, [4])],
    )
    out = bytearray()
    req.encode_into(1, out)
    expected = (
        compact_str("g")
        + compact_str("m")
        + struct.pack(
            ">iiiiii", 3, 500, 1, 1000, 50, 25
        )  # epoch, wait, min, max, MaxRecords, BatchSize
        + b"\x02"
        + TID.bytes
        + b"\x02"  # one topic, one partition
        + struct.pack(">i", 0)  # no PartitionMaxBytes in v1
        + b"\x02"
        + struct.pack(">qq", 5, 6)
        + b"\x03\x01\x02"
        + b"\x00"  # one batch
        + b"\x00"
        + b"\x00"  # partition tags, topic tags
        + b"\x02"
        + TID.bytes
        + b"\x02"
        + struct.pack(">i", 4)
        + b"\x00"  # forgotten
        + b"\x00"
    )
    assert bytes(out) == expected


def test_share_fetch_v1_response_decodes_lock_timeout_and_acquired_records() -> None:
    body = (
        struct.pack(">ih", 0, 0)
        + b"\x00"
        + struct.pack(">i", 15_000)
        + b"\x02"
        + TID.bytes
        + b"\x02"
        + struct.pack(">ih", 2, 0)
        + b"\x00"
        + struct.pack(">h", 121)
        + compact_str("late")
        + struct.pack(">ii", 1, 7)
        + b"\x00"  # current leader + its tags
        + b"\x04abc"  # records (3 bytes)
        + b"\x02"
        + struct.pack(">qqh", 10, 12, 2)
        + b"\x00"
        + b"\x00"
        + b"\x00"
        + b"\x01"  # no node endpoints
        + b"\x00"
    )
    resp, end = decode_share_fetch_response_v1(memoryview(body), 0)
    assert end == len(body)
    assert resp.acquisition_lock_timeout_ms == 15_000
    [topic] = resp.responses
    [p] = topic.partitions
    assert (p.partition_index, p.acknowledge_error_code, p.acknowledge_error_message) == (
        2,
        121,
        "late",
    )
    assert (p.leader_id, p.leader_epoch, p.records) == (1, 7, b"abc")
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records] == [
        (10, 12, 2)
    ]
    with pytest.raises(KafkaProtocolError):
        decode_share_fetch_response_v1(memoryview(body[:-8]), 0)


def test_frames_decode_v1_share_responses_through_the_installed_decoders() -> None:
    frame = (
        struct.pack(">i", 9)
        + b"\x00"
        + m.ShareGroupHeartbeatResponse(
            member_id="x", member_epoch=4, heartbeat_interval_ms=5
        ).encode(0)
    )
    decoded = decode_response(76, 1, frame)
    assert (decoded.member_id, decoded.member_epoch) == ("x", 4)


def test_heartbeat_v1_request_frame_is_flexible_v1() -> None:
    frame = encode_request(ShareGroupHeartbeatRequestV1("g", "m", 0, None, ["t"]), 1, 7, "c")
    size, key, version, cid = struct.unpack_from(">ihhi", frame, 0)
    assert (size, key, version, cid) == (len(frame) - 4, 76, 1, 7)
