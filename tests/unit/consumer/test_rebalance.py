"""GroupEventBridge: membership events become application-side steps, run in order:
commit before revoke, then the listener, then the acknowledgement; errors stay in order."""

from __future__ import annotations

import inspect

from kafkaio.consumer.group.events import (
    AssignPartitions,
    GroupError,
    MembershipEvent,
    PartitionsLost,
    RevokePartitions,
)
from kafkaio.consumer.listener import RebalanceListener
from kafkaio.consumer.rebalance import GroupEventBridge, Partitions
from kafkaio.errors import GroupAuthorizationFailedError, KafkaError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.runtime.events import BackgroundEventQueue

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


class Log:
    def __init__(self) -> None:
        self.steps: list[str] = []


class FakeMembership:
    group_id = "g"

    def __init__(self, log: Log) -> None:
        self.log = log
        self.events: list[MembershipEvent] = []

    def drain_events(self) -> list[MembershipEvent]:
        events, self.events = self.events, []
        return events

    def on_revocation_done(self, now: float) -> None:
        self.log.steps.append(f"revocation_done@{now:g}")

    def on_assignment_done(self, now: float) -> None:
        self.log.steps.append(f"assignment_done@{now:g}")


class FakeErrors:
    def __init__(self, *errors: KafkaError) -> None:
        self.errors = list(errors)

    def drain_errors(self) -> list[KafkaError]:
        errors, self.errors = self.errors, []
        return errors


class Listener(RebalanceListener):
    """Async revoke, sync assign; lost falls back to revoked (the default)."""

    def __init__(self, log: Log, fail_on: str | None = None) -> None:
        self.log = log
        self.fail_on = fail_on

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.log.steps.append(f"listener.revoked{sorted(p.partition for p in revoked)}")
        if self.fail_on == "revoked":
            raise ValueError("listener failed")

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.log.steps.append(f"listener.assigned{sorted(p.partition for p in assigned)}")


class Steps:
    def __init__(self, log: Log, listener: RebalanceListener | None) -> None:
        self.log = log
        self._listener = listener
        self.clock = 0.0

    def listener(self) -> RebalanceListener | None:
        return self._listener

    def drop_pending(self, partitions: Partitions) -> None:
        self.log.steps.append(f"drop{sorted(p.partition for p in partitions)}")

    async def commit_before_revoke(self, partitions: Partitions) -> None:
        self.log.steps.append(f"commit{sorted(p.partition for p in partitions)}")

    def step_done(self, step: str) -> None:
        # the consumer submits a RebalanceStepDoneEvent; the network task tells the membership
        self.log.steps.append(f"{step}_done")


def make(
    listener_fail: str | None = None, *, listener: bool = True, errors: tuple[KafkaError, ...] = ()
) -> tuple[GroupEventBridge, FakeMembership, BackgroundEventQueue, Log]:
    log = Log()
    membership = FakeMembership(log)
    background = BackgroundEventQueue()
    steps = Steps(log, Listener(log, listener_fail) if listener else None)
    bridge = GroupEventBridge(membership, [FakeErrors(*errors)], background, steps)
    return bridge, membership, background, log


async def run_application_side(background: BackgroundEventQueue) -> list[BaseException]:
    """What Consumer._run_background does: callbacks in order, errors collected."""
    raised: list[BaseException] = []
    for item in background.drain():
        if isinstance(item, BaseException):
            raised.append(item)
            continue
        try:
            result = item()
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            raised.append(exc)
    return raised


async def test_revoke_commits_then_runs_the_listener_then_acknowledges() -> None:
    bridge, membership, background, log = make()
    membership.events = [RevokePartitions(frozenset({A, B})), AssignPartitions(frozenset({B}))]
    assert bridge.poll(0).requests == []  # the network task only queues
    assert log.steps == [] and len(background) == 2
    assert await run_application_side(background) == []
    assert log.steps == [
        "drop[0, 1]",
        "commit[0, 1]",
        "listener.revoked[0, 1]",
        "revocation_done",
        "listener.assigned[1]",
        "assignment_done",
    ]


async def test_lost_partitions_are_not_committed_and_default_to_revoked() -> None:
    bridge, membership, background, log = make()
    membership.events = [PartitionsLost(frozenset({A}))]
    bridge.transfer()
    await run_application_side(background)
    assert log.steps == ["drop[0]", "listener.revoked[0]", "revocation_done"]


async def test_a_failing_listener_still_acknowledges_and_its_error_surfaces() -> None:
    bridge, membership, background, log = make("revoked")
    membership.events = [RevokePartitions(frozenset({A})), AssignPartitions(frozenset({A}))]
    bridge.transfer()
    raised = await run_application_side(background)
    assert [type(e) for e in raised] == [ValueError]
    assert "revocation_done" in log.steps
    assert log.steps.index("revocation_done") < log.steps.index("listener.assigned[0]")


async def test_errors_and_steps_keep_their_order_without_a_listener() -> None:
    denied = GroupAuthorizationFailedError(None, group_id="g")
    bridge, membership, background, log = make(listener=False, errors=(denied,))
    fatal = KafkaError("fenced")
    membership.events = [AssignPartitions(frozenset({A})), GroupError(fatal, fatal=True)]
    bridge.transfer()
    raised = await run_application_side(background)
    assert raised == [denied, fatal]  # coordinator/commit errors first, then membership's
    assert log.steps == ["assignment_done"]
