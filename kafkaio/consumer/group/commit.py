"""CommitManager: OffsetCommit (auto, async, sync) and OffsetFetch (committed offsets, positions).

Sans-I/O: requests go to the group coordinator; results come back through RequestHandles.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kafkaio.backoff import ExponentialBackoff
from kafkaio.consumer.group.coordinator import Coordinator, CoordinatorManager
from kafkaio.consumer.group.errors import CommitFailedError
from kafkaio.consumer.group.generation import NO_GENERATION, Generation
from kafkaio.consumer.group.handles import RequestHandle
from kafkaio.consumer.subscription import FetchPosition, FetchState, SubscriptionState
from kafkaio.errors import (
    BrokerResponseError,
    CoordinatorNotAvailableError,
    IllegalGenerationError,
    KafkaError,
    KafkaTimeoutError,
    NotCoordinatorError,
    RebalanceInProgressError,
    RequestTimedOutError,
    UnknownMemberIdError,
    error_for_code,
)
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.protocol.messages import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafkaio.runtime.requests import PollResult, UnsentRequest
from kafkaio.structs import OffsetAndMetadata

log = logging.getLogger("kafkaio.consumer.group")

Offsets = dict[TopicPartition, OffsetAndMetadata]
Committed = dict[TopicPartition, OffsetAndMetadata | None]
CommitHandle = RequestHandle[Offsets]
FetchCommittedHandle = RequestHandle[Committed]

# errors after which the coordinator is looked up again (Java: markCoordinatorUnknown)
_COORDINATOR_ERRORS = (CoordinatorNotAvailableError, NotCoordinatorError, RequestTimedOutError)


class GroupMember(Protocol):
    """What the commit manager needs from the membership manager."""

    group_instance_id: str | None

    def generation_if_stable(self) -> Generation | None: ...

    @property
    def rebalance_in_progress(self) -> bool: ...

    def on_commit_fenced(self, now: float, error: KafkaError, generation: Generation) -> None: ...


@dataclass(slots=True, eq=False)
class _Commit:
    offsets: Offsets
    handle: CommitHandle
    deadline_ms: float
    retry: bool  # retry retriable errors until the deadline (commit_sync)
    auto: bool = False
    attempts: int = 0
    next_attempt_ms: float = -math.inf
    in_flight: bool = False
    generation: Generation | None = None  # captured at the first send
    last_error: KafkaError | None = None


@dataclass(slots=True, eq=False)
class _Fetch:
    partitions: frozenset[TopicPartition]
    handle: FetchCommittedHandle
    deadline_ms: float
    attempts: int = 0
    next_attempt_ms: float = -math.inf
    in_flight: bool = False
    last_error: KafkaError | None = None
    for_positions: bool = False


class CommitManager:
    """Commits and fetches the group's offsets through the coordinator.

    * Auto-commit (``auto_commit``): every ``auto_commit_interval_ms`` commits
      the consumed offsets (``consumed_offsets``, by default ``subscriptions.all_consumed()``)
      minus what was already committed, one at a time,
      retried after the backoff on retriable errors.
    * `commit_async` tries once (after waiting for the coordinator); `commit_sync` retries
      retriable errors until ``deadline_ms`` and then fails with KafkaTimeoutError.
      A commit for a generation that is gone fails with `CommitFailedError` (and makes the
      member rejoin), during a rebalance with RebalanceInProgressError, as in Java.
    * `fetch_committed` (OffsetFetch) retries until its deadline.
    * Partitions that are INITIALIZING get their committed offset looked up automatically:
      ``seek`` (keeping the committed leader epoch), or with ``validate_positions``
      ``seek_unvalidated`` when the commit carries an epoch (for a reactor that runs
      OffsetForLeaderEpoch validation), and ``request_offset_reset`` when nothing is committed.

    ``member`` is None for consumers that use assign() (commits carry no generation).
    ``initialize_positions=False`` leaves INITIALIZING partitions to another manager.
    Requests fill both the old and the v8+ fields, so they encode at any version.
    """

    def __init__(
        self,
        group_id: str,
        subscriptions: SubscriptionState,
        coordinator: CoordinatorManager,
        member: GroupMember | None = None,
        *,
        auto_commit: bool = True,
        auto_commit_interval_ms: float = 5000,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 1000,
        require_stable: bool = True,
        initialize_positions: bool = True,
        validate_positions: bool = False,
        consumed_offsets: Callable[[], dict[TopicPartition, OffsetAndMetadata]] | None = None,
        backoff_jitter: float = 0.2,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.group_id = group_id
        self._subscriptions = subscriptions
        # What auto-commit and commit-before-revoke commit: by default every position, but a
        # consumer that collects records ahead of handing them out passes the positions of
        # what the application really received.
        self._consumed_offsets = consumed_offsets or subscriptions.all_consumed
        self._coordinator = coordinator
        self._member = member
        self.auto_commit = auto_commit
        self._auto_interval_ms = auto_commit_interval_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._backoff = ExponentialBackoff(
            retry_backoff_ms, retry_backoff_max_ms, jitter=backoff_jitter, rng=rng
        )
        self._require_stable = require_stable
        self._initialize_positions = initialize_positions
        self._validate_positions = validate_positions
        self._commits: list[_Commit] = []
        self._fetches: list[_Fetch] = []
        self._next_auto_commit_ms: float | None = None
        self._auto_in_flight = False
        self._committed: dict[TopicPartition, int] = {}  # last offsets known committed
        self._positions_fetch: _Fetch | None = None
        self._positions_failures = 0
        self._next_positions_ms = -math.inf
        self._errors: list[KafkaError] = []
        # told {tp: offset} after each successful commit (the consumer's interceptors)
        self.on_committed: Callable[[dict[TopicPartition, OffsetAndMetadata]], None] | None = (
            None
        )

    # -- application calls ---------------------------------------------------------------

    def commit_async(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], deadline_ms: float = math.inf
    ) -> CommitHandle:
        """Commit once the coordinator is known; no retries (the handle carries the error)."""
        return self._add_commit(offsets, deadline_ms, retry=False)

    def commit_sync(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], deadline_ms: float
    ) -> CommitHandle:
        """Commit, retrying retriable errors until ``deadline_ms``."""
        return self._add_commit(offsets, deadline_ms, retry=True)

    def maybe_auto_commit_sync(self, deadline_ms: float) -> CommitHandle | None:
        """Commit consumed offsets before a revocation or close (None: auto-commit is off)."""
        if not self.auto_commit:
            return None
        return self.commit_sync(self._consumed_offsets(), deadline_ms)

    def fetch_committed(
        self, partitions: Iterable[TopicPartition], deadline_ms: float
    ) -> FetchCommittedHandle:
        """Committed offsets (None where nothing is committed), retried until the deadline."""
        fetch = _Fetch(frozenset(partitions), RequestHandle(), deadline_ms)
        if not fetch.partitions:
            fetch.handle.complete({})
        else:
            self._fetches.append(fetch)
        return fetch.handle

    def drain_errors(self) -> list[KafkaError]:
        """Errors looking up committed offsets for new partitions, for the application."""
        errors, self._errors = self._errors, []
        return errors

    def poll_on_close(self, now: float, connected: Callable[[int], bool]) -> PollResult:
        """The consumer is closing: group operations still pending fail (close() already
        committed what it commits)."""
        self.fail_pending(
            KafkaError("the consumer was closed before this group operation completed")
        )
        return PollResult()

    @property
    def close_done(self) -> bool:
        return True

    def fail_pending(self, error: KafkaError) -> None:
        """Fail every unfinished handle (the consumer unsubscribes or closes). The lookup of
        new partitions' committed offsets starts afresh: partitions assigned later get one
        at once (a late answer to the failed one is ignored)."""
        for op in self._operations():
            op.handle.fail(error)
        self._commits.clear()
        self._fetches.clear()
        self._positions_fetch = None
        self._positions_failures = 0
        self._next_positions_ms = -math.inf

    def _operations(self) -> list[_Commit | _Fetch]:
        return [*self._commits, *self._fetches]

    def _add_commit(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        deadline_ms: float,
        *,
        retry: bool,
    ) -> CommitHandle:
        commit = _Commit(dict(offsets), RequestHandle(), deadline_ms, retry)
        if not commit.offsets:
            commit.handle.complete({})
        else:
            self._commits.append(commit)
        return commit.handle

    # -- request manager -----------------------------------------------------------------

    def poll(self, now: float) -> PollResult:
        self._expire(now)
        self._maybe_auto_commit(now)
        self._maybe_fetch_positions(now)
        coordinator = self._coordinator.coordinator
        requests: list[UnsentRequest[Any]] = []
        waits = [math.inf]
        if self.auto_commit and self._next_auto_commit_ms is not None:
            waits.append(self._next_auto_commit_ms)
        for op in self._operations():
            if op.deadline_ms < math.inf:
                waits.append(op.deadline_ms)
        if coordinator is not None:
            for commit in list(self._commits):
                if not commit.in_flight:
                    if now >= commit.next_attempt_ms:
                        request = self._commit_request(now, commit, coordinator)
                        if request is not None:
                            requests.append(request)
                    else:
                        waits.append(commit.next_attempt_ms)
            for fetch in list(self._fetches):
                if not fetch.in_flight:
                    if now >= fetch.next_attempt_ms:
                        requests.append(self._fetch_request(fetch, coordinator))
                    else:
                        waits.append(fetch.next_attempt_ms)
            if self._positions_fetch is None and self._next_positions_ms > now:
                if self._subscriptions.initializing_partitions():
                    waits.append(self._next_positions_ms)
        return PollResult(requests, max(min(waits) - now, 0.0))

    def _expire(self, now: float) -> None:
        for op in self._operations():
            if now >= op.deadline_ms:
                what = "offset commit" if isinstance(op, _Commit) else "committed offset fetch"
                last = f"; last error: {op.last_error}" if op.last_error is not None else ""
                timeout = KafkaTimeoutError(
                    f"{what} for group {self.group_id!r} did not complete before its "
                    f"deadline{last}. Check that the group coordinator is reachable, or "
                    "allow more time"
                )
                timeout.__cause__ = op.last_error
                op.handle.fail(timeout)
        self._commits = [c for c in self._commits if not c.handle.done]
        self._fetches = [f for f in self._fetches if not f.handle.done]

    # -- auto-commit ---------------------------------------------------------------------

    def _maybe_auto_commit(self, now: float) -> None:
        if not self.auto_commit:
            return
        if self._next_auto_commit_ms is None:
            self._next_auto_commit_ms = now + self._auto_interval_ms
            return
        if now < self._next_auto_commit_ms or self._auto_in_flight:
            return
        self._next_auto_commit_ms = now + self._auto_interval_ms
        if self._subscriptions.has_auto_assignment():
            if self._member is None or self._member.generation_if_stable() is None:
                return  # rebalancing: the revocation commits instead
        changed = {
            tp: om
            for tp, om in self._consumed_offsets().items()
            if self._committed.get(tp) != om.offset
        }
        if not changed:
            return
        commit = _Commit(changed, RequestHandle(), math.inf, retry=False, auto=True)
        self._auto_in_flight = True
        self._commits.append(commit)

    def _on_auto_commit_done(self, now: float, error: KafkaError | None) -> None:
        self._auto_in_flight = False
        if error is not None:
            log.warning("group %r: auto-commit failed: %s", self.group_id, error)
            if error.retriable and self._next_auto_commit_ms is not None:
                # retry after the backoff rather than a whole interval (as Java)
                self._next_auto_commit_ms = min(
                    self._next_auto_commit_ms, now + self._retry_backoff_ms
                )

    # -- OffsetCommit --------------------------------------------------------------------

    def _commit_request(
        self, now: float, commit: _Commit, coordinator: Coordinator
    ) -> UnsentRequest[Any] | None:
        generation = NO_GENERATION
        if self._subscriptions.has_auto_assignment():
            current = None if self._member is None else self._member.generation_if_stable()
            if current is None:
                if self._member is not None and self._member.rebalance_in_progress:
                    self._finish_commit(
                        now,
                        commit,
                        RebalanceInProgressError(
                            "the consumer is rebalancing; call poll() to finish the rebalance "
                            "and then commit again",
                            group_id=self.group_id,
                        ),
                    )
                else:
                    self._finish_commit(
                        now,
                        commit,
                        CommitFailedError(
                            f"cannot commit for group {self.group_id!r}: the consumer is not part "
                            "of an active group generation; poll() to rejoin, then commit again"
                        ),
                    )
                return None
            if commit.generation is not None and commit.generation != current:
                self._finish_commit(
                    now,
                    commit,
                    CommitFailedError(
                        f"the group {self.group_id!r} moved to generation "
                        f"{current.generation_id} while this commit (generation "
                        f"{commit.generation.generation_id}) was being retried; its partitions may "
                        "belong to another member now"
                    ),
                )
                return None
            generation = current
        commit.generation = generation
        commit.in_flight = True
        by_topic: dict[str, list[OffsetCommitRequest.OffsetCommitRequestPartition]] = {}
        for tp, om in sorted(commit.offsets.items()):
            by_topic.setdefault(tp.topic, []).append(
                OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=om.offset,
                    committed_leader_epoch=-1 if om.leader_epoch is None else om.leader_epoch,
                    commit_timestamp=-1,
                    committed_metadata=om.metadata,
                )
            )
        request = OffsetCommitRequest(
            group_id=self.group_id,
            generation_id_or_member_epoch=generation.generation_id,
            member_id=generation.member_id,
            group_instance_id=None if self._member is None else self._member.group_instance_id,
            retention_time_ms=-1,
            topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(t, ps) for t, ps in by_topic.items()
            ],
        )

        def handler(t: float, response: OffsetCommitResponse | None, error: BaseException | None) -> None:
            commit.in_flight = False
            if not commit.handle.done:
                self._on_commit_response(t, commit, response, error)

        return UnsentRequest(coordinator.connection_id, request, handler)

    def _on_commit_response(
        self,
        now: float,
        commit: _Commit,
        response: OffsetCommitResponse | None,
        error: BaseException | None,
    ) -> None:
        failure: KafkaError | None = None
        if error is not None or response is None:
            self._coordinator.mark_unknown(now, f"OffsetCommit failed: {error!r}")
            failure = error if isinstance(error, KafkaError) else KafkaError(repr(error))
            self._retry_or_fail(now, commit, failure, retriable=True)
            return
        for topic in response.topics:
            for p in topic.partitions:
                if p.error_code and failure is None:
                    failure = error_for_code(p.error_code)(
                        None, group_id=self.group_id, topic=topic.name, partition=p.partition_index
                    )
        if failure is None:
            for tp, om in commit.offsets.items():
                self._committed[tp] = om.offset
            self._finish_commit(now, commit, None)
            return
        if isinstance(failure, _COORDINATOR_ERRORS):
            self._coordinator.mark_unknown(now, f"OffsetCommit: {failure.name}")
        if isinstance(failure, (UnknownMemberIdError, IllegalGenerationError)):
            if self._member is not None and commit.generation is not None:
                self._member.on_commit_fenced(now, failure, commit.generation)
            self._finish_commit(
                now,
                commit,
                CommitFailedError(
                    f"the offset commit for group {self.group_id!r} was rejected ({failure.name}): "
                    "the member is no longer in the generation that owned the partitions, which "
                    "may now belong to another member. Poll again to rejoin; if processing is "
                    "slow, lower max_poll_records or raise max_poll_interval_ms"
                ),
            )
            return
        self._retry_or_fail(now, commit, failure, retriable=failure.retriable)

    def _retry_or_fail(
        self, now: float, commit: _Commit, error: KafkaError, *, retriable: bool
    ) -> None:
        commit.last_error = commit.handle.last_error = error
        commit.attempts += 1
        if retriable and commit.retry:
            # retried until the deadline, where _expire fails it with KafkaTimeoutError
            commit.next_attempt_ms = now + self._backoff.delay_ms(commit.attempts)
            return
        self._finish_commit(now, commit, error)

    def _finish_commit(self, now: float, commit: _Commit, error: KafkaError | None) -> None:
        if commit in self._commits:
            self._commits.remove(commit)
        if commit.auto:
            self._on_auto_commit_done(now, error)
        if error is None:
            commit.handle.complete(commit.offsets)
            if self.on_committed is not None and commit.offsets:
                self.on_committed(dict(commit.offsets))
        else:
            commit.handle.fail(error)

    # -- OffsetFetch ---------------------------------------------------------------------

    def _fetch_request(self, fetch: _Fetch, coordinator: Coordinator) -> UnsentRequest[Any]:
        fetch.in_flight = True
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(fetch.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = OffsetFetchRequest(
            group_id=self.group_id,
            topics=[
                OffsetFetchRequest.OffsetFetchRequestTopic(t, ps) for t, ps in by_topic.items()
            ],
            groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=self.group_id,
                    member_id=None,
                    member_epoch=-1,
                    topics=[
                        OffsetFetchRequest.OffsetFetchRequestTopics(t, ps)
                        for t, ps in by_topic.items()
                    ],
                )
            ],
            require_stable=self._require_stable,
        )

        def handler(t: float, response: OffsetFetchResponse | None, error: BaseException | None) -> None:
            fetch.in_flight = False
            if not fetch.handle.done:
                self._on_fetch_response(t, fetch, response, error)

        return UnsentRequest(coordinator.connection_id, request, handler)

    def _on_fetch_response(
        self,
        now: float,
        fetch: _Fetch,
        response: OffsetFetchResponse | None,
        error: BaseException | None,
    ) -> None:
        if error is not None or response is None:
            self._coordinator.mark_unknown(now, f"OffsetFetch failed: {error!r}")
            failure = error if isinstance(error, KafkaError) else KafkaError(repr(error))
            self._retry_or_fail_fetch(now, fetch, failure, retriable=True)
            return
        try:
            result = self._parse_fetch(response, fetch.partitions)
        except BrokerResponseError as exc:
            if isinstance(exc, _COORDINATOR_ERRORS):
                self._coordinator.mark_unknown(now, f"OffsetFetch: {exc.name}")
            self._retry_or_fail_fetch(now, fetch, exc, retriable=exc.retriable)
            return
        if fetch in self._fetches:
            self._fetches.remove(fetch)
        fetch.handle.complete(result)
        if fetch.for_positions:
            self._on_positions(now, fetch)

    def _parse_fetch(
        self, response: OffsetFetchResponse, wanted: frozenset[TopicPartition]
    ) -> Committed:
        topics: list[Any]  # v8+ and v0-7 topic structs have the same fields
        if response.groups:  # v8+
            group = next((g for g in response.groups if g.group_id == self.group_id), None)
            if group is None:
                raise error_for_code(-1)("OffsetFetch response without our group")
            group_error, topics = group.error_code, group.topics
        else:
            group_error, topics = response.error_code, response.topics
        rows = [
            (
                t.name,
                p.partition_index,
                p.committed_offset,
                p.committed_leader_epoch,
                p.metadata,
                p.error_code,
            )
            for t in topics
            for p in t.partitions
        ]
        if group_error:
            raise error_for_code(group_error)(None, group_id=self.group_id)
        result: Committed = dict.fromkeys(wanted)
        for topic, partition, offset, epoch, metadata, code in rows:
            tp = TopicPartition(topic, partition)
            if code:
                raise error_for_code(code)(
                    None, group_id=self.group_id, topic=topic, partition=partition
                )
            if tp in result and offset >= 0:
                result[tp] = OffsetAndMetadata(offset, metadata or "", None if epoch < 0 else epoch)
        return result

    def _retry_or_fail_fetch(
        self, now: float, fetch: _Fetch, error: KafkaError, *, retriable: bool
    ) -> None:
        fetch.last_error = fetch.handle.last_error = error
        fetch.attempts += 1
        if retriable:
            fetch.next_attempt_ms = now + self._backoff.delay_ms(fetch.attempts)
            return
        if fetch in self._fetches:
            self._fetches.remove(fetch)
        fetch.handle.fail(error)
        if fetch.for_positions:
            self._on_positions(now, fetch)

    # -- positions of new partitions -------------------------------------------------------

    def _maybe_fetch_positions(self, now: float) -> None:
        if not self._initialize_positions:
            return
        if self._positions_fetch is not None or now < self._next_positions_ms:
            return
        subs = self._subscriptions
        partitions = [
            tp for tp in subs.initializing_partitions() if not subs.state(tp).pending_revocation
        ]
        if not partitions:
            return
        fetch = _Fetch(frozenset(partitions), RequestHandle(), math.inf, for_positions=True)
        self._fetches.append(fetch)
        self._positions_fetch = fetch

    def _on_positions(self, now: float, fetch: _Fetch) -> None:
        self._positions_fetch = None
        handle = fetch.handle
        if handle.error is not None or handle.value is None:
            self._positions_failures += 1
            if isinstance(handle.error, KafkaError):
                self._errors.append(handle.error)
            self._next_positions_ms = now + self._backoff.delay_ms(self._positions_failures)
            return
        self._positions_failures = 0
        subs = self._subscriptions
        for tp, committed in handle.value.items():
            # the app may have seeked (or the partition gone) while the fetch was in flight
            if (
                not subs.is_assigned(tp)
                or subs.state(tp).fetch_state is not FetchState.INITIALIZING
            ):
                continue
            if committed is None:
                subs.request_offset_reset(tp)
            elif committed.leader_epoch is None or not self._validate_positions:
                subs.seek(tp, committed.offset, committed.leader_epoch)
            else:
                subs.seek_unvalidated(
                    tp, FetchPosition(committed.offset, offset_epoch=committed.leader_epoch)
                )
