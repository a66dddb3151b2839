"""GroupEventBridge: turns membership events into steps run on the application side.

The network task queues them (background events); getmany()/close() run them in order:
commit before revoke, the RebalanceListener, then the acknowledgement to the membership.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from kafkaio.consumer.group.events import (
    AssignPartitions,
    GroupError,
    MembershipEvent,
    PartitionsLost,
    RevokePartitions,
)
from kafkaio.consumer.listener import RebalanceListener
from kafkaio.errors import KafkaError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.runtime.events import BackgroundEventQueue
from kafkaio.runtime.requests import PollResult

log = logging.getLogger("kafkaio.consumer")

Partitions = frozenset[TopicPartition]


class RebalancingMember(Protocol):
    """The membership manager as the bridge sees it (GroupMembership, narrowed)."""

    group_id: str

    def drain_events(self) -> list[MembershipEvent]: ...

    def on_revocation_done(self, now: float) -> None: ...

    def on_assignment_done(self, now: float) -> None: ...


class ErrorSource(Protocol):
    def drain_errors(self) -> list[KafkaError]: ...


class RebalanceSteps(Protocol):
    """What the consumer provides for the application-side steps."""

    def listener(self) -> RebalanceListener | None: ...

    def drop_pending(self, partitions: Partitions) -> None:
        """Forget undelivered records of `partitions` (positions move back to them)."""
        ...

    async def commit_before_revoke(self, partitions: Partitions) -> None:
        """Commit consumed offsets of `partitions` if auto-commit is on (errors are logged)."""
        ...

    def step_done(self, step: str) -> None:
        """Tell the network task the step ended ("revocation" or "assignment"): an
        application event (RebalanceStepDoneEvent) the membership acts on there."""
        ...


class GroupEventBridge:
    """A request manager (sends nothing) polled after the group managers.

    `transfer` moves membership events, coordinator errors and commit errors into the
    background queue, in order: errors as errors (raised from the application's poll),
    rebalance events as async callbacks that

    * RevokePartitions: drop undelivered records, commit consumed offsets (auto-commit),
      run ``on_partitions_revoked``, then ``on_revocation_done``;
    * PartitionsLost: drop undelivered records, run ``on_partitions_lost`` (nothing is
      committed), then ``on_revocation_done``;
    * AssignPartitions: run ``on_partitions_assigned``, then ``on_assignment_done``.

    The acknowledgement happens even when the listener raises; the error is raised after.
    """

    def __init__(
        self,
        membership: RebalancingMember,
        error_sources: list[ErrorSource],
        background: BackgroundEventQueue,
        steps: RebalanceSteps,
    ) -> None:
        self._membership = membership
        self._error_sources = error_sources
        self._background = background
        self._steps = steps

    def poll(self, now: float) -> PollResult:
        self.transfer()
        return PollResult()

    def transfer(self) -> None:
        """Queue everything the group managers produced since the last call."""
        for source in self._error_sources:
            for error in source.drain_errors():
                self._background.put_error(error)
        for event in self._membership.drain_events():
            if isinstance(event, GroupError):
                self._background.put_error(event.error)
            elif isinstance(event, RevokePartitions):
                self._background.put_callback(self._callback(self._revoke, event.partitions))
            elif isinstance(event, PartitionsLost):
                self._background.put_callback(self._callback(self._lose, event.partitions))
            elif isinstance(event, AssignPartitions):
                self._background.put_callback(self._callback(self._assign, event.partitions))

    @staticmethod
    def _callback(
        step: Callable[[Partitions], Awaitable[None]], partitions: Partitions
    ) -> Callable[[], Awaitable[None]]:
        def run() -> Awaitable[None]:
            return step(partitions)

        return run

    async def _revoke(self, partitions: Partitions) -> None:
        steps = self._steps
        try:
            steps.drop_pending(partitions)
            await steps.commit_before_revoke(partitions)
            await self._call_listener("on_partitions_revoked", partitions)
        finally:
            steps.step_done("revocation")

    async def _lose(self, partitions: Partitions) -> None:
        steps = self._steps
        try:
            steps.drop_pending(partitions)
            await self._call_listener("on_partitions_lost", partitions)
        finally:
            steps.step_done("revocation")

    async def _assign(self, partitions: Partitions) -> None:
        steps = self._steps
        try:
            await self._call_listener("on_partitions_assigned", partitions)
        finally:
            steps.step_done("assignment")

    async def _call_listener(self, method: str, partitions: Partitions) -> None:
        listener = self._steps.listener()
        log.info(
            "group %r: %s %s",
            self._membership.group_id,
            method.removeprefix("on_partitions_"),
            sorted(partitions),
        )
        if listener is None or not partitions and method != "on_partitions_assigned":
            return
        result: Any = getattr(listener, method)(set(partitions))
        if inspect.isawaitable(result):
            await result
