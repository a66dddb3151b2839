"""Hostile bytes: truncated, oversized or random frames give KafkaProtocolError, never a hang."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaio.errors import KafkaProtocolError, UnsupportedVersionError
from kafkaio.protocol import messages as m
from kafkaio.protocol.frames import decode_response, encode_request, peek_correlation_id


def _metadata_response() -> m.MetadataResponse:
    part = m.MetadataResponse.MetadataResponsePartition
    topic = m.MetadataResponse.MetadataResponseTopic(
        name="orders",
        topic_id=uuid.uuid4(),
        partitions=[part(partition_index=i, leader_id=1, replica_nodes=[1, 2]) for i in range(3)],
    )
    return m.MetadataResponse(
        brokers=[m.MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=9092)],
        cluster_id="c",
        topics=[topic],
    )


@pytest.mark.parametrize("version", [1, 9, 12])
def test_every_truncation_is_a_protocol_error(version: int) -> None:
    wire = _metadata_response().encode(version)
    for cut in range(len(wire)):
        with pytest.raises(KafkaProtocolError):
            m.MetadataResponse.decode(wire[:cut], version)


def test_trailing_bytes_are_a_protocol_error() -> None:
    wire = _metadata_response().encode(12)
    with pytest.raises(KafkaProtocolError, match="left over"):
        m.MetadataResponse.decode(wire + b"\x00", 12)


def test_huge_array_count_fails_fast() -> None:
    # Brokers array claims 2**31-1 entries in a 10-byte body: must not loop or allocate.
    wire = b"\x00\x00\x00\x00" + b"\x7f\xff\xff\xff" + b"\x00\x00"
    with pytest.raises(KafkaProtocolError):
        m.MetadataResponse.decode(wire, 1)


def test_huge_compact_string_length_fails_fast() -> None:
    # flexible FindCoordinator v4: throttle, then a coordinators array of 1 with a key whose
    # compact length varint claims ~2**28 bytes.
    wire = b"\x00\x00\x00\x00" + b"\x02" + b"\xff\xff\xff\x7f" + b"abc"
    with pytest.raises(KafkaProtocolError):
        m.FindCoordinatorResponse.decode(wire, 4)


def test_overlong_varint_is_rejected() -> None:
    wire = b"\x00\x00\x00\x00" + b"\xff" * 12
    with pytest.raises(KafkaProtocolError):
        m.FindCoordinatorResponse.decode(wire, 4)


def test_unknown_version_is_a_typed_error() -> None:
    with pytest.raises(UnsupportedVersionError):
        m.MetadataRequest().encode(99)
    with pytest.raises(UnsupportedVersionError):
        m.MetadataResponse.decode(b"", 99)


def test_unknown_tagged_fields_are_skipped() -> None:
    # An ApiVersionsRequest v3 body, then a tag section with one unknown tag (7) of 3 bytes.
    body = bytearray(m.ApiVersionsRequest(client_software_name="a", client_software_version="b").encode(3))
    assert body[-1] == 0
    body[-1:] = b"\x01\x07\x03xyz"
    decoded = m.ApiVersionsRequest.decode(bytes(body), 3)
    assert decoded.client_software_name == "a"


def test_request_frame_layout() -> None:
    frame = encode_request(m.MetadataRequest(topics=None), 12, 42, "cid")
    size = int.from_bytes(frame[:4], "big")
    assert size == len(frame) - 4
    assert frame[4:6] == (3).to_bytes(2, "big")  # api key
    assert frame[6:8] == (12).to_bytes(2, "big")  # version
    assert frame[8:12] == (42).to_bytes(4, "big")  # correlation id
    assert frame[12:14] == (3).to_bytes(2, "big") and frame[14:17] == b"cid"
    assert frame[17] == 0  # header v2 tagged fields
    assert m.MetadataRequest.decode(frame[18:], 12) == m.MetadataRequest(topics=None)


def test_response_frame_round_trip_with_header_tags() -> None:
    msg = _metadata_response()
    frame = (7).to_bytes(4, "big") + b"\x01\x05\x02zz" + msg.encode(12)  # header v1, unknown tag
    assert peek_correlation_id(frame) == 7
    assert decode_response(3, 12, frame) == msg


def test_api_versions_v0_fallback() -> None:
    # A broker that does not know ApiVersions v3 answers in v0 with UNSUPPORTED_VERSION (35).
    v0 = m.ApiVersionsResponse(
        error_code=35, api_keys=[m.ApiVersionsResponse.ApiVersion(api_key=18, max_version=2)]
    ).encode(0)
    resp = decode_response(18, 3, (1).to_bytes(4, "big") + v0)
    assert resp.error_code == 35 and resp.api_keys[0].max_version == 2


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.sampled_from([(3, 1), (3, 12), (1, 4), (1, 16), (0, 9), (11, 7)]))
def test_random_bytes_only_raise_protocol_errors(data: bytes, api: tuple[int, int]) -> None:
    key, version = api
    try:
        decode_response(key, version, (0).to_bytes(4, "big") + data)
    except KafkaProtocolError:
        pass
