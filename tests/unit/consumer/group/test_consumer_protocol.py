"""Consumer protocol bytes: subscriptions and assignments at every version, and sticky user data."""

from __future__ import annotations

import struct

import pytest

from kafkaio.consumer.group.assignors.sticky import MemberData, decode_user_data, encode_user_data
from kafkaio.consumer.group.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kafkaio.errors import KafkaProtocolError
from kafkaio.metadata.cluster import TopicPartition as TP

SUB = Subscription(("b", "a"), b"ud", (TP("a", 1), TP("a", 0), TP("b", 2)), 7, "rack1")


def test_subscription_newest_version_keeps_every_field() -> None:
    data = encode_subscription(SUB)
    assert data[:2] == b"\x00\x03"
    got = decode_subscription(data, group_instance_id="i1")
    assert got == Subscription(
        ("a", "b"), b"ud", (TP("a", 0), TP("a", 1), TP("b", 2)), 7, "rack1", "i1"
    )


@pytest.mark.parametrize(
    ("version", "owned", "generation", "rack"),
    [(0, (), -1, None), (1, True, -1, None), (2, True, 7, None), (3, True, 7, "rack1")],
)
def test_subscription_older_versions_drop_newer_fields(
    version: int, owned: object, generation: int, rack: str | None
) -> None:
    got = decode_subscription(encode_subscription(SUB, version))
    assert got.topics == ("a", "b") and got.user_data == b"ud"
    assert got.owned_partitions == ((TP("a", 0), TP("a", 1), TP("b", 2)) if owned else ())
    assert (got.generation, got.rack_id) == (generation, rack)


def test_subscription_from_a_newer_client_is_read_as_ours() -> None:
    body = encode_subscription(SUB)[2:] + b"\x00\x00\x00\x2a"  # a field we do not know yet
    got = decode_subscription(struct.pack(">h", 9) + body)
    assert got.topics == ("a", "b") and got.generation == 7


@pytest.mark.parametrize(
    "data", [b"", b"\x00", b"\xff\xff" + encode_subscription(SUB)[2:], b"\x00\x01\x00"]
)
def test_bad_subscription_bytes_raise_protocol_errors(data: bytes) -> None:
    with pytest.raises(KafkaProtocolError):
        decode_subscription(data)


def test_assignment_round_trip_and_empty_bytes() -> None:
    a = Assignment((TP("x", 3), TP("x", 1), TP("y", 0)), b"\x01")
    data = encode_assignment(a)
    assert data[:2] == b"\x00\x03"
    assert decode_assignment(data) == Assignment((TP("x", 1), TP("x", 3), TP("y", 0)), b"\x01")
    assert decode_assignment(encode_assignment(a, 0)).partitions == (
        TP("x", 1),
        TP("x", 3),
        TP("y", 0),
    )
    assert decode_assignment(b"") == Assignment(())


def test_sticky_user_data_v1_and_v0() -> None:
    data = encode_user_data([TP("t", 2), TP("t", 0), TP("u", 5)], 4)
    assert decode_user_data(data) == MemberData((TP("t", 0), TP("t", 2), TP("u", 5)), 4)
    v0 = data[:-4]  # the same without the generation
    assert decode_user_data(v0) == MemberData((TP("t", 0), TP("t", 2), TP("u", 5)), None)
    assert decode_user_data(b"\x00\x00\x00\x05junk") is None
