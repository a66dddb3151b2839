"""OffsetsManager: the sans-I/O request manager for ListOffsets (resets and offset queries).

Resets positions of partitions awaiting one (earliest / latest), with backoff on errors, and
answers offsets_for_times / beginning_offsets / end_offsets and position() events.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkaio.backoff import ExponentialBackoff
from kafkaio.consumer.errors import NoOffsetForPartitionError
from kafkaio.consumer.events import AwaitPositionsEvent, ListOffsetsEvent
from kafkaio.consumer.subscription import FetchState, OffsetResetStrategy, SubscriptionState
from kafkaio.errors import KafkaError, error_for_code
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.metadata.manager import MetadataManager
from kafkaio.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from kafkaio.runtime.requests import PollResult, UnsentRequest

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
_STRATEGY_TIMESTAMP = {
    OffsetResetStrategy.EARLIEST: EARLIEST_TIMESTAMP,
    OffsetResetStrategy.LATEST: LATEST_TIMESTAMP,
}

# (offset, timestamp, leader_epoch) or None when no record is at/after the timestamp
OffsetAnswer = tuple[int, int, "int | None"] | None
_Callback = Callable[[float, TopicPartition, OffsetAnswer, BaseException | None], None]


@dataclass(slots=True)
class _Query:
    """One offsets lookup (an application event): partitions still to answer."""

    event: ListOffsetsEvent
    remaining: dict[TopicPartition, int]
    results: dict[TopicPartition, OffsetAnswer] = field(default_factory=dict)
    in_flight: set[TopicPartition] = field(default_factory=set)
    retry_at: dict[TopicPartition, float] = field(default_factory=dict)
    attempts: int = 0


class OffsetsManager:
    """Position resets and offset lookups through ListOffsets to each partition's leader.

    ``initialize_without_group``: partitions without a position go straight to a reset (no
    group_id, so there is no committed offset to look up).
    """

    def __init__(
        self,
        subscriptions: SubscriptionState,
        metadata: MetadataManager,
        *,
        isolation_level: int = 0,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 1000,
        initialize_without_group: bool = True,
        rng: Callable[[], float] | None = None,
    ) -> None:
        self._subscriptions = subscriptions
        self._metadata = metadata
        self._isolation = isolation_level
        kwargs: dict[str, Any] = {} if rng is None else {"rng": rng}
        self._backoff = ExponentialBackoff(retry_backoff_ms, retry_backoff_max_ms, **kwargs)
        self._initialize_without_group = initialize_without_group
        self._resetting: dict[TopicPartition, OffsetResetStrategy] = {}
        self._reset_attempts: dict[TopicPartition, int] = {}
        self._queries: list[_Query] = []
        self._position_waiters: list[AwaitPositionsEvent] = []

    # -- application events ---------------------------------------------------------------

    def list_offsets(self, event: ListOffsetsEvent, now: float) -> None:
        """Start answering a ListOffsetsEvent; it completes when every partition is answered."""
        if not event.timestamps:
            event.complete({})
            return
        self._metadata.add_topics({tp.topic for tp in event.timestamps})
        self._queries.append(_Query(event, dict(event.timestamps)))

    def await_positions(self, event: AwaitPositionsEvent, now: float) -> None:
        self._position_waiters.append(event)
        self._check_positions()

    # -- polling --------------------------------------------------------------------------

    def poll(self, now: float) -> PollResult:
        subs = self._subscriptions
        if self._initialize_without_group:
            for tp in subs.initializing_partitions():
                subs.request_offset_reset(tp)
        wait = math.inf
        # what to send: {leader: {tp: (timestamp, callback)}}
        wanted: dict[int, dict[TopicPartition, tuple[int, _Callback]]] = {}
        cluster = self._metadata.cluster
        need_metadata = False
        for tp, retry_at in self._pending_resets():
            if now < retry_at:
                wait = min(wait, retry_at - now)
                continue
            st = subs.state(tp)
            assert st.reset_strategy is not None
            leader = cluster.leader_for(tp)
            if leader is None:
                need_metadata = True
                continue
            strategy = st.reset_strategy
            ts = _STRATEGY_TIMESTAMP.get(strategy, LATEST_TIMESTAMP)
            self._resetting[tp] = strategy
            wanted.setdefault(leader, {})[tp] = (ts, self._reset_callback(strategy))
        for query in list(self._queries):
            if query.event.done:
                self._queries.remove(query)
                continue
            for tp, ts in query.remaining.items():
                if tp in query.in_flight:
                    continue
                retry_at = query.retry_at.get(tp, -math.inf)
                if now < retry_at:
                    wait = min(wait, retry_at - now)
                    continue
                leader = cluster.leader_for(tp)
                if leader is None:
                    need_metadata = True
                    continue
                if tp in wanted.get(leader, ()):
                    # one ListOffsets asks once per partition: this waits for the next poll
                    # (the answer to what goes now polls again), not replace the reset's ask
                    continue
                query.in_flight.add(tp)
                wanted.setdefault(leader, {})[tp] = (ts, self._query_callback(query))
        if need_metadata:
            self._metadata.request_update()
        self._check_positions()
        requests = [self._build(node, parts) for node, parts in wanted.items()]
        return PollResult(requests, wait)

    def _pending_resets(self) -> list[tuple[TopicPartition, float]]:
        """Partitions awaiting a reset (paused ones too, so position() answers for them)
        and not being reset now, with the time they may next be tried."""
        out = []
        for tp in self._subscriptions.assigned_partitions():
            st = self._subscriptions.state(tp)
            if (
                st.fetch_state is FetchState.AWAIT_RESET
                and st.reset_strategy is not OffsetResetStrategy.NONE
                and tp not in self._resetting
            ):
                out.append((tp, st.next_reset_allowed_ms))
        return out

    def _build(
        self, node: int, parts: dict[TopicPartition, tuple[int, _Callback]]
    ) -> UnsentRequest[Any]:
        cluster = self._metadata.cluster
        topics: dict[str, ListOffsetsRequest.ListOffsetsTopic] = {}
        for tp, (ts, _) in parts.items():
            topic = topics.get(tp.topic)
            if topic is None:
                topic = topics[tp.topic] = ListOffsetsRequest.ListOffsetsTopic(name=tp.topic)
            epoch = cluster.leader_epoch(tp)
            topic.partitions.append(
                ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=tp.partition,
                    current_leader_epoch=-1 if epoch is None else epoch,
                    timestamp=ts,
                    max_num_offsets=1,
                )
            )
        request = ListOffsetsRequest(
            replica_id=-1, isolation_level=self._isolation, topics=list(topics.values())
        )

        def handler(now: float, response: ListOffsetsResponse | None, error: BaseException | None) -> None:
            answered: set[TopicPartition] = set()
            if error is None:
                assert isinstance(response, ListOffsetsResponse)
                for t in response.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition_index)
                        entry = parts.get(tp)
                        if entry is None or tp in answered:
                            continue
                        answered.add(tp)
                        if p.error_code:
                            entry[1](
                                now,
                                tp,
                                None,
                                error_for_code(p.error_code)(
                                    None, topic=tp.topic, partition=tp.partition
                                ),
                            )
                        else:
                            entry[1](now, tp, _answer(p), None)
            for tp, (_, callback) in parts.items():
                if tp not in answered:
                    callback(
                        now,
                        tp,
                        None,
                        error
                        or KafkaError(f"the ListOffsets response did not mention {tp}; retrying"),
                    )
            if error is not None and getattr(type(error), "retriable", False):
                self._metadata.request_update()

        return UnsentRequest(node, request, handler)

    # -- outcomes -------------------------------------------------------------------------

    def _reset_callback(self, strategy: OffsetResetStrategy) -> _Callback:
        def on_answer(
            now: float, tp: TopicPartition, answer: OffsetAnswer, error: BaseException | None
        ) -> None:
            if self._resetting.get(tp) is strategy:
                del self._resetting[tp]
            subs = self._subscriptions
            if not subs.is_assigned(tp):
                return
            st = subs.state(tp)
            if st.fetch_state is not FetchState.AWAIT_RESET or st.reset_strategy is not strategy:
                return  # a seek or another reset replaced this one
            if error is None and answer is not None:
                self._reset_attempts.pop(tp, None)
                offset, _, epoch = answer
                subs.seek(tp, offset, epoch)
                return
            attempts = self._reset_attempts.get(tp, 0)
            self._reset_attempts[tp] = attempts + 1
            st.next_reset_allowed_ms = now + self._backoff.delay_ms(attempts)
            if isinstance(error, KafkaError) and type(error).invalid_metadata:
                self._metadata.request_update()

        return on_answer

    def _query_callback(self, query: _Query) -> _Callback:
        def on_answer(
            now: float, tp: TopicPartition, answer: OffsetAnswer, error: BaseException | None
        ) -> None:
            query.in_flight.discard(tp)
            if query.event.done:
                return
            if error is None:
                query.remaining.pop(tp, None)
                if answer is not None and answer[1] < 0 <= query.event.timestamps[tp]:
                    answer = None  # a timestamp lookup that matched no record
                query.results[tp] = answer
                if not query.remaining:
                    query.event.complete(query.results)
                return
            if isinstance(error, KafkaError) and not (
                type(error).retriable or type(error).invalid_metadata
            ):
                query.event.fail(error)
                return
            if isinstance(error, KafkaError) and type(error).invalid_metadata:
                self._metadata.request_update()
            query.event.note_error(error)
            query.retry_at[tp] = now + self._backoff.delay_ms(query.attempts)
            query.attempts += 1

        return on_answer

    def _check_positions(self) -> None:
        if not self._position_waiters:
            return
        subs = self._subscriptions
        waiting = []
        for event in self._position_waiters:
            if event.done:
                continue
            missing = [tp for tp in event.partitions if not subs.is_assigned(tp)]
            if missing:
                event.fail(
                    KafkaError(
                        f"{', '.join(map(str, missing))} not assigned to this consumer; "
                        "assign() them before asking for positions"
                    )
                )
                continue
            states = {tp: subs.state(tp) for tp in event.partitions}
            no_offset = [
                tp
                for tp, st in states.items()
                if st.fetch_state is FetchState.AWAIT_RESET
                and st.reset_strategy is OffsetResetStrategy.NONE
            ]
            if no_offset:
                event.fail(NoOffsetForPartitionError(no_offset))
                continue
            truncated = [e for st in states.values() if (e := st.truncated()) is not None]
            if truncated:  # auto_offset_reset 'none': only a seek() moves it on
                event.fail(truncated[0])
                continue
            if all(
                st.fetch_state is FetchState.FETCHING and st.position is not None
                for st in states.values()
            ):
                event.complete({tp: st.position.offset for tp, st in states.items() if st.position})
                continue
            waiting.append(event)
        self._position_waiters = waiting


def _answer(p: ListOffsetsResponse.ListOffsetsPartitionResponse) -> OffsetAnswer:
    offset = p.offset
    if offset < 0 and p.old_style_offsets:  # v0
        offset = p.old_style_offsets[0]
    if offset < 0:
        return None
    epoch = p.leader_epoch if p.leader_epoch >= 0 else None
    return (offset, p.timestamp, epoch)
