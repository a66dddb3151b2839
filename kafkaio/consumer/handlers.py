"""The consumer's application events, applied in the network task.

Every Consumer call that changes what the request managers do (subscribe, assign,
unsubscribe, seek, seek_to_beginning / seek_to_end, pause, resume, the end of a rebalance
step, leaving on close, each poll) becomes an application event; the
ApplicationEventProcessor hands it to one of these handlers when the network task drains
the queue, as Java's AsyncKafkaConsumer has its ApplicationEventProcessor do. The
application side keeps only what is its own: the records it collected and not handed out,
the rebalance listener, and its view of calls not applied yet.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafkaio.consumer.events import (
    AssignmentChangeEvent,
    LeaveGroupOnCloseEvent,
    PauseEvent,
    PollEvent,
    RebalanceStepDoneEvent,
    ResetOffsetsEvent,
    ResumeEvent,
    SeekEvent,
    SubscriptionChangeEvent,
    UnsubscribeEvent,
)
from kafkaio.errors import KafkaError

if TYPE_CHECKING:
    from kafkaio.consumer.fetch_buffer import FetchBuffer
    from kafkaio.consumer.group.commit import CommitManager
    from kafkaio.consumer.group.member import GroupMembership
    from kafkaio.consumer.rebalance import GroupEventBridge
    from kafkaio.consumer.subscription import SubscriptionState
    from kafkaio.metadata.manager import MetadataManager
    from kafkaio.runtime.processor import ApplicationEventProcessor

log = logging.getLogger("kafkaio.consumer")


class ConsumerEventHandlers:
    """Applies the consumer's application events to its managers (network task only)."""

    def __init__(
        self,
        processor: ApplicationEventProcessor,
        subscriptions: SubscriptionState,
        metadata: MetadataManager,
        buffer: FetchBuffer,
        membership: GroupMembership | None,
        bridge: GroupEventBridge | None,
        commits: CommitManager | None,
    ) -> None:
        self._processor = processor
        self._subs = subscriptions
        self._metadata = metadata
        self._buffer = buffer
        self._membership = membership
        self._bridge = bridge
        self._commits = commits
        processor.register(SubscriptionChangeEvent, self.on_subscription_change)
        processor.register(AssignmentChangeEvent, self.on_assignment_change)
        processor.register(UnsubscribeEvent, self.on_unsubscribe)
        processor.register(LeaveGroupOnCloseEvent, self.on_leave_on_close)
        processor.register(SeekEvent, self.on_seek)
        processor.register(ResetOffsetsEvent, self.on_reset_offsets)
        processor.register(PauseEvent, self.on_pause)
        processor.register(ResumeEvent, self.on_resume)
        processor.register(PollEvent, self.on_poll)
        processor.register(RebalanceStepDoneEvent, self.on_rebalance_step_done)

    # -- subscription and assignment --------------------------------------------------------

    def on_subscription_change(self, event: SubscriptionChangeEvent, now: float) -> None:
        if event.pattern is not None:
            self._subs.subscribe_pattern(event.pattern)
        else:
            self._subs.subscribe(list(event.topics))
        event.complete(None)

    def on_assignment_change(self, event: AssignmentChangeEvent, now: float) -> None:
        self._subs.assign_from_user(list(event.partitions))
        self._metadata.set_topics(self._subs.subscription())
        self._buffer.retain(self._subs.assigned_partitions())
        event.complete(None)

    def on_unsubscribe(self, event: UnsubscribeEvent, now: float) -> None:
        """Leave the group first when subscribed (revocation runs on the application side);
        drop the subscription once out."""
        membership = self._membership
        if membership is not None and self._subs.has_auto_assignment():
            self._leave(now, "the consumer unsubscribed")

            def out() -> bool:
                if membership.is_leaving:
                    return False
                self._drop_subscription("the consumer unsubscribed")
                return True

            self._processor.complete_when(event, out)
            return
        self._drop_subscription("the consumer unsubscribed")
        event.complete(None)

    def _drop_subscription(self, why: str) -> None:
        self._subs.unsubscribe()
        self._metadata.set_topics(())
        self._buffer.retain(())
        if self._commits is not None:
            self._commits.fail_pending(KafkaError(f"{why} before this group operation completed"))

    def on_leave_on_close(self, event: LeaveGroupOnCloseEvent, now: float) -> None:
        membership = self._membership
        if membership is None or not self._subs.has_auto_assignment():
            event.complete(None)
            return
        self._leave(now, event.reason)
        self._processor.complete_when(event, lambda: not membership.is_leaving)

    def _leave(self, now: float, reason: str) -> None:
        assert self._membership is not None and self._bridge is not None
        self._membership.leave(now, reason)
        self._bridge.transfer()  # the revocation, for the application side to run

    # -- positions ---------------------------------------------------------------------------

    def on_seek(self, event: SeekEvent, now: float) -> None:
        tp = event.partition
        if self._subs.is_assigned(tp):
            self._subs.seek(tp, event.offset, event.leader_epoch)
            self._buffer.remove(tp)
            event.complete(None)
            return
        event.fail(KafkaError(f"seek(): {tp} is not assigned to this consumer"))

    def on_reset_offsets(self, event: ResetOffsetsEvent, now: float) -> None:
        for tp in event.partitions:
            self._subs.request_offset_reset(tp, event.strategy)
            self._buffer.remove(tp)
        event.complete(None)

    def on_pause(self, event: PauseEvent, now: float) -> None:
        self._subs.pause(event.partitions)
        event.complete(None)

    def on_resume(self, event: ResumeEvent, now: float) -> None:
        self._subs.resume(event.partitions)
        event.complete(None)

    # -- the group ---------------------------------------------------------------------------

    def on_poll(self, event: PollEvent, now: float) -> None:
        membership = self._membership
        if membership is not None:
            before = membership.state
            membership.on_application_poll(now)
            if membership.state is not before and self._bridge is not None:
                self._bridge.transfer()
        event.complete(None)

    def on_rebalance_step_done(self, event: RebalanceStepDoneEvent, now: float) -> None:
        membership = self._membership
        if membership is not None:
            if event.step == "assignment":
                membership.on_assignment_done(now)
            else:
                membership.on_revocation_done(now)
            if self._bridge is not None:
                self._bridge.transfer()
        event.complete(None)
