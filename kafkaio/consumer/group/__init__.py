"""Consumer group request managers for the classic protocol (sans-I/O state machines).

Coordinator lookup, membership (join/sync/heartbeat/leave), assignors and offset commits.
"""

from __future__ import annotations

from kafkaio.consumer.group.assignors import (
    ConsumerPartitionAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    assignor_for_name,
)
from kafkaio.consumer.group.commit import CommitHandle, CommitManager, FetchCommittedHandle
from kafkaio.consumer.group.consumer_protocol import Assignment, Subscription
from kafkaio.consumer.group.coordinator import (
    Coordinator,
    CoordinatorManager,
    coordinator_connection_id,
)
from kafkaio.consumer.group.errors import CommitFailedError
from kafkaio.consumer.group.events import (
    AssignPartitions,
    GroupError,
    MembershipEvent,
    PartitionsLost,
    RevokePartitions,
)
from kafkaio.consumer.group.generation import NO_GENERATION, Generation
from kafkaio.consumer.group.handles import RequestHandle
from kafkaio.consumer.group.membership import ClassicMembershipManager, MemberState

__all__ = [
    "NO_GENERATION",
    "AssignPartitions",
    "Assignment",
    "ClassicMembershipManager",
    "CommitFailedError",
    "CommitHandle",
    "CommitManager",
    "ConsumerPartitionAssignor",
    "Coordinator",
    "CoordinatorManager",
    "FetchCommittedHandle",
    "Generation",
    "GroupError",
    "MemberState",
    "MembershipEvent",
    "PartitionsLost",
    "RangeAssignor",
    "RequestHandle",
    "RevokePartitions",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "assignor_for_name",
    "coordinator_connection_id",
]
