"""Partition assignors of the classic consumer protocol: range, roundrobin and sticky.

The group leader runs the assignor every member supports; see `ConsumerPartitionAssignor`.
"""

from __future__ import annotations

from collections.abc import Callable

from kafkaio.consumer.group.assignors.base import (
    AbstractAssignor,
    Assignments,
    ConsumerPartitionAssignor,
    RebalanceProtocol,
    common_protocol,
    supported_protocols,
)
from kafkaio.consumer.group.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafkaio.consumer.group.assignors.rack import (
    PartitionRacks,
    assign_with_racks,
    partition_racks,
)
from kafkaio.consumer.group.assignors.range import RangeAssignor
from kafkaio.consumer.group.assignors.roundrobin import RoundRobinAssignor
from kafkaio.consumer.group.assignors.sticky import StickyAssignor
from kafkaio.errors import KafkaConfigError

BUILTIN_ASSIGNORS: dict[str, Callable[[], ConsumerPartitionAssignor]] = {
    RangeAssignor.name: RangeAssignor,
    RoundRobinAssignor.name: RoundRobinAssignor,
    StickyAssignor.name: StickyAssignor,
    CooperativeStickyAssignor.name: CooperativeStickyAssignor,
}


def assignor_for_name(name: str) -> ConsumerPartitionAssignor:
    """A new built-in assignor for a ``partition_assignment_strategy`` name."""
    try:
        return BUILTIN_ASSIGNORS[name]()
    except KeyError:
        known = ", ".join(sorted(BUILTIN_ASSIGNORS))
        raise KafkaConfigError(
            f"unknown partition assignment strategy {name!r}; use one of: {known}, or pass an "
            "object implementing ConsumerPartitionAssignor"
        ) from None


__all__ = [
    "BUILTIN_ASSIGNORS",
    "AbstractAssignor",
    "Assignments",
    "ConsumerPartitionAssignor",
    "CooperativeStickyAssignor",
    "PartitionRacks",
    "RebalanceProtocol",
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
    "assign_with_racks",
    "assignor_for_name",
    "common_protocol",
    "partition_racks",
    "supported_protocols",
]
