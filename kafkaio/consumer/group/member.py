"""GroupMembership: what the consumer asks of its membership manager, whichever protocol runs
the group (ClassicMembershipManager, JoinGroup/SyncGroup; ConsumerMembershipManager, KIP-848).

The managers satisfy it structurally. Narrower views live next to their users: the commit
manager's ``GroupMember`` and the rebalance bridge's ``RebalancingMember``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Protocol

from kafkaio.consumer.group.events import MembershipEvent
from kafkaio.consumer.group.generation import Generation
from kafkaio.errors import KafkaError

__all__ = ["GroupMembership"]


class GroupMembership(Protocol):
    """A group membership manager as the consumer (application side and its event handlers)
    uses it."""

    group_id: str
    group_instance_id: str | None
    rebalance_timeout_ms: int
    on_transition: Callable[[str, str], None] | None

    @property
    def state(self) -> enum.Enum: ...

    @property
    def generation(self) -> Generation: ...

    @property
    def group_subscription(self) -> frozenset[str]: ...

    @property
    def fatal_error(self) -> KafkaError | None: ...

    @property
    def is_leaving(self) -> bool: ...

    @property
    def needs_application_poll(self) -> bool: ...

    def on_application_poll(self, now: float) -> None: ...

    def on_revocation_done(self, now: float) -> None: ...

    def on_assignment_done(self, now: float) -> None: ...

    def leave(self, now: float, reason: str = "the consumer is being closed") -> None: ...

    def drain_events(self) -> list[MembershipEvent]: ...
