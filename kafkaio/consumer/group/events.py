"""Steps the membership manager asks the reactor to run on the application side.

The reactor drains them in order (`ClassicMembershipManager.drain_events`) and acknowledges.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkaio.errors import KafkaError
from kafkaio.metadata.cluster import TopicPartition


@dataclass(frozen=True, slots=True)
class RevokePartitions:
    """Give up these partitions before rejoining or leaving (the generation is still valid).

    The reactor commits consumed offsets first (`CommitManager.maybe_auto_commit_sync`),
    runs the listener's ``on_partitions_revoked`` on the application side, then calls
    `ClassicMembershipManager.on_revocation_done`.
    """

    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class PartitionsLost:
    """These partitions were lost (the member was fenced or expired): do not commit them.

    The reactor runs the listener's ``on_partitions_lost`` and then calls
    `ClassicMembershipManager.on_revocation_done`.
    """

    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class AssignPartitions:
    """The group assigned these partitions; `SubscriptionState` already holds them.

    The reactor runs the listener's ``on_partitions_assigned`` on the application side, then
    calls `ClassicMembershipManager.on_assignment_done`.
    """

    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class GroupError:
    """An error to raise from the application's next poll. ``fatal``: the member stopped
    (state FATAL) and will not rejoin by itself."""

    error: KafkaError
    fatal: bool


MembershipEvent = RevokePartitions | PartitionsLost | AssignPartitions | GroupError
