"""The "consumer" embedded protocol of classic groups: member subscriptions and assignments.

Bytes are an int16 version followed by ConsumerProtocolSubscription/Assignment of that version.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from kafkaio.errors import KafkaProtocolError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.protocol.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription

PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = ConsumerProtocolSubscription.MAX_VERSION
ASSIGNMENT_VERSION = ConsumerProtocolAssignment.MAX_VERSION

_VERSION = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class Subscription:
    """One member's subscription as the leader sees it.

    ``generation`` is the member's last generation (-1: unknown); ``group_instance_id`` comes
    from the JoinGroup response, not from these bytes (assignors use it to order members).
    """

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation: int = -1
    rack_id: str | None = None
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    """The partitions the leader gave one member, plus the assignor's opaque user data."""

    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


def _group_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return by_topic


def _read_version(data: bytes, what: str) -> tuple[int, memoryview]:
    if len(data) < 2:
        raise KafkaProtocolError(
            f"consumer protocol {what} of {len(data)} bytes is too short for its version header"
        )
    (version,) = _VERSION.unpack_from(data, 0)
    if version < 0:
        raise KafkaProtocolError(f"consumer protocol {what} has negative version {version}")
    return version, memoryview(data)


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    """Serialize as ``version`` (the newest by default, as the Java client writes v3)."""
    body = ConsumerProtocolSubscription(
        topics=sorted(sub.topics),
        user_data=sub.user_data,
        owned_partitions=[
            ConsumerProtocolSubscription.TopicPartition(t, ps)
            for t, ps in _group_by_topic(sub.owned_partitions).items()
        ],
        generation_id=sub.generation,
        rack_id=sub.rack_id,
    )
    return _VERSION.pack(version) + body.encode(version)


def decode_subscription(data: bytes, group_instance_id: str | None = None) -> Subscription:
    """Parse any version; a version newer than ours is read as ours (new fields are appended,
    so the bytes we know come first and the rest is ignored)."""
    version, buf = _read_version(data, "subscription")
    msg, _ = ConsumerProtocolSubscription.decode_from(buf, 2, min(version, SUBSCRIPTION_VERSION))
    owned = tuple(TopicPartition(t.topic, p) for t in msg.owned_partitions for p in t.partitions)
    return Subscription(
        tuple(msg.topics),
        msg.user_data,
        owned,
        msg.generation_id,
        msg.rack_id,
        group_instance_id,
    )


def encode_assignment(assignment: Assignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    body = ConsumerProtocolAssignment(
        assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(t, ps)
            for t, ps in _group_by_topic(assignment.partitions).items()
        ],
        user_data=assignment.user_data,
    )
    return _VERSION.pack(version) + body.encode(version)


def decode_assignment(data: bytes) -> Assignment:
    """Parse any version; empty bytes (a member the leader gave nothing) is no partitions."""
    if not data:
        return Assignment(())
    version, buf = _read_version(data, "assignment")
    msg, _ = ConsumerProtocolAssignment.decode_from(buf, 2, min(version, ASSIGNMENT_VERSION))
    parts = tuple(TopicPartition(t.topic, p) for t in msg.assigned_partitions for p in t.partitions)
    return Assignment(parts, msg.user_data)
