"""PositionValidationManager: the sans-I/O request manager that validates fetch positions (KIP-320).

After a leader change, or for a committed offset that carries a leader epoch, it asks the leader
(OffsetForLeaderEpoch) where the position's epoch ends, and resets or reports truncated positions.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkaio.backoff import ExponentialBackoff
from kafkaio.consumer.errors import LogTruncationError
from kafkaio.consumer.subscription import (
    FetchPosition,
    FetchState,
    OffsetResetStrategy,
    SubscriptionState,
)
from kafkaio.errors import (
    BrokerResponseError,
    ClusterAuthorizationFailedError,
    FencedLeaderEpochError,
    KafkaConnectionError,
    KafkaError,
    UnsupportedVersionError,
    error_for_code,
)
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.metadata.manager import MetadataManager
from kafkaio.protocol.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from kafkaio.runtime.requests import PollResult, UnsentRequest
from kafkaio.structs import OffsetAndMetadata

log = logging.getLogger("kafkaio.consumer")

CONSUMER_REPLICA_ID = -1
_Leader = tuple[int, int]  # (leader node id, leader epoch)


@dataclass(frozen=True, slots=True)
class _Sent:
    """The position a validation request was sent for (answers for other positions are stale)."""

    offset: int
    offset_epoch: int


def complete_validation(
    subscriptions: SubscriptionState,
    tp: TopicPartition,
    offset: int,
    offset_epoch: int | None,
    end_epoch: int,
    end_offset: int,
) -> LogTruncationError | None:
    """Apply the leader's answer "epoch `end_epoch` ends at `end_offset`" to the position
    (`offset`, `offset_epoch`) it was asked about: an OffsetForLeaderEpoch result, or a Fetch
    response's diverging epoch (KIP-595) for a FETCHING partition.

    Does nothing if the partition's position moved since (seek, reset, records consumed).
    Otherwise: the position is kept if the epoch ends at or after it; moved back to the first
    divergent offset if the epoch ends before it (log truncation); reset by auto_offset_reset
    if the leader knows nothing of the epoch (-1). With auto_offset_reset 'none' the two last
    cases return a LogTruncationError instead, and the partition stays unfetched until seek().
    An answer with an end offset but epoch -1 (OffsetForLeaderEpoch v0) is read as the end
    of the requested epoch.
    """
    if not subscriptions.is_assigned(tp):
        return None
    st = subscriptions.state(tp)
    position = st.position
    if (
        position is None
        or st.fetch_state not in (FetchState.AWAIT_VALIDATION, FetchState.FETCHING)
        or position.offset != offset
        or position.offset_epoch != offset_epoch
    ):
        return None
    if end_offset >= 0 and end_epoch < 0 and offset_epoch is not None:
        end_epoch = offset_epoch  # v0 answers carry no epoch
    no_reset = subscriptions.default_reset is OffsetResetStrategy.NONE
    if end_offset < 0 or end_epoch < 0:
        if no_reset:
            st.fetch_state = FetchState.AWAIT_VALIDATION
            error = LogTruncationError({tp: offset}, {tp: None})
            st.truncation = (error, position)
            return error
        log.info(
            "%s: the leader has no record of epoch %s at offset %d (log truncation); "
            "resetting the position (auto_offset_reset=%r)",
            tp,
            offset_epoch,
            offset,
            subscriptions.default_reset.value,
        )
        subscriptions.request_offset_reset(tp)
        return None
    if end_offset < offset:
        if no_reset:
            st.fetch_state = FetchState.AWAIT_VALIDATION
            error = LogTruncationError(
                {tp: offset}, {tp: OffsetAndMetadata(end_offset, "", end_epoch)}
            )
            st.truncation = (error, position)
            return error
        log.info(
            "%s: log truncation detected at offset %d (epoch %s); moving the position back to "
            "%d, the first offset that diverges",
            tp,
            offset,
            offset_epoch,
            end_offset,
        )
        subscriptions.seek_validated(
            tp, FetchPosition(end_offset, end_epoch, position.leader_id, position.leader_epoch)
        )
        return None
    st.fetch_state = FetchState.FETCHING
    return None


class PositionValidationManager:
    """Validates positions of AWAIT_VALIDATION partitions with OffsetForLeaderEpoch.

    * Leader changes: whenever the metadata or the assignment changes, a FETCHING partition
      whose leader (node or epoch) differs from the one its position was last checked
      against moves to AWAIT_VALIDATION, if its position has an epoch. Positions set without
      a leader (seek, resets) count as checked against the leader of that time.
    * Any AWAIT_VALIDATION partition (a committed offset with an epoch, a leader change,
      another component's decision) is checked with the leader: current_leader_epoch is the
      metadata's epoch, leader_epoch the position's. The answer goes through
      `complete_validation`; LogTruncationErrors go to `report_error`.
    * Positions without an epoch, partitions whose metadata has no epoch, and leaders that do
      not speak OffsetForLeaderEpoch (or may not use it) are not validated: they just fetch.
      Neither are positions whose epoch is the leader's current one (unlike Java, which asks):
      a leader never truncates its log within its own epoch, and if the metadata is stale,
      the Fetch's current_leader_epoch is fenced, the metadata refreshed, and the leader
      change validated then. (This also keeps the librdkafka mock cluster usable: it reports
      the partition's current epoch as every committed offset's epoch.)
    * FENCED_LEADER_EPOCH and other stale-metadata errors wait for newer metadata, then retry
      after the backoff; other errors retry after the backoff (non-retriable ones are also
      reported).

    Poll it before the FetchManager, so a new leader is never fetched unchecked.
    """

    def __init__(
        self,
        subscriptions: SubscriptionState,
        metadata: MetadataManager,
        report_error: Callable[[BaseException], None],
        *,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 1000,
        rng: Callable[[], float] | None = None,
    ) -> None:
        self._subscriptions = subscriptions
        self._metadata = metadata
        self._report_error = report_error
        kwargs: dict[str, Any] = {} if rng is None else {"rng": rng}
        self._backoff = ExponentialBackoff(retry_backoff_ms, retry_backoff_max_ms, **kwargs)
        self._seen_version: tuple[int, int] | None = None  # (metadata version, assignment id)
        self._seen_leaders: dict[TopicPartition, _Leader] = {}
        self._in_flight: dict[TopicPartition, _Sent] = {}
        self._attempts: dict[TopicPartition, int] = {}
        self._retry_at: dict[TopicPartition, float] = {}
        self._awaiting_metadata: dict[TopicPartition, int] = {}
        self._reported: dict[TopicPartition, _Sent] = {}  # truncations waiting for a seek
        self._unsupported: set[int] = set()

    @property
    def unsupported_nodes(self) -> frozenset[int]:
        """Brokers found not to offer OffsetForLeaderEpoch: their partitions are not validated."""
        return frozenset(self._unsupported)

    # -- polling --------------------------------------------------------------------------

    def poll(self, now: float) -> PollResult:
        self._check_leader_changes()
        subs = self._subscriptions
        cluster = self._metadata.cluster
        wanted: dict[int, dict[TopicPartition, tuple[int, _Sent]]] = {}
        wait = math.inf
        need_metadata = False
        for tp in subs.partitions_needing_validation():
            if tp in self._in_flight:
                continue
            position = subs.state(tp).position
            if position is None:  # nothing to validate: find a position
                subs.request_offset_reset(tp)
                continue
            reported = self._reported.get(tp)
            if reported is not None:
                if _matches(position, reported):
                    continue  # the application must seek
                del self._reported[tp]
            seen = self._awaiting_metadata.get(tp)
            if seen is not None:
                if self._metadata.version <= seen:
                    continue
                del self._awaiting_metadata[tp]
            retry_at = self._retry_at.get(tp)
            if retry_at is not None:
                if now < retry_at:
                    wait = min(wait, retry_at - now)
                    continue
                del self._retry_at[tp]
            leader = cluster.leader_for(tp)
            epoch = cluster.leader_epoch(tp)
            if leader is None:
                need_metadata = True
                continue
            if (
                position.offset_epoch is None
                or epoch is None
                or position.offset_epoch == epoch  # written by this leader in this epoch
                or leader in self._unsupported
            ):
                self._skip(tp, position, leader, epoch)
                continue
            position.leader_id, position.leader_epoch = leader, epoch
            sent = _Sent(position.offset, position.offset_epoch)
            self._in_flight[tp] = sent
            wanted.setdefault(leader, {})[tp] = (epoch, sent)
        self._prune()
        if need_metadata:
            self._metadata.request_update()
        return PollResult([self._build(node, parts) for node, parts in wanted.items()], wait)

    def _check_leader_changes(self) -> None:
        """On a metadata or assignment change, send FETCHING partitions whose leader moved
        to validation (Java's validatePositionsOnMetadataChange)."""
        subs = self._subscriptions
        version = (self._metadata.version, subs.assignment_id)
        if version == self._seen_version:
            return
        self._seen_version = version
        cluster = self._metadata.cluster
        seen = self._seen_leaders
        for tp in list(seen):
            if not subs.is_assigned(tp):
                del seen[tp]
        for tp in subs.assigned_partitions():
            leader, epoch = cluster.leader_for(tp), cluster.leader_epoch(tp)
            if leader is None or epoch is None:
                continue  # keep the last known leader until a new one is known
            previous = seen.get(tp)
            seen[tp] = current = (leader, epoch)
            st = subs.state(tp)
            position = st.position
            if st.fetch_state is not FetchState.FETCHING or position is None:
                continue
            checked: _Leader | None = previous
            if position.leader_id is not None and position.leader_epoch is not None:
                checked = (position.leader_id, position.leader_epoch)
            if (
                checked is not None
                and checked != current
                and position.offset_epoch is not None
                and leader not in self._unsupported
            ):
                log.debug(
                    "%s: leader changed %s -> %s; validating the position", tp, checked, current
                )
                subs.seek_unvalidated(
                    tp, FetchPosition(position.offset, position.offset_epoch, leader, epoch)
                )
            else:
                position.leader_id, position.leader_epoch = current

    def _skip(
        self, tp: TopicPartition, position: FetchPosition, leader: int, epoch: int | None
    ) -> None:
        """Trust the position without asking the leader."""
        self._attempts.pop(tp, None)
        self._subscriptions.seek_validated(
            tp, FetchPosition(position.offset, position.offset_epoch, leader, epoch)
        )

    def _prune(self) -> None:
        subs = self._subscriptions
        for table in (self._attempts, self._retry_at, self._awaiting_metadata, self._reported):
            for tp in [tp for tp in table if not subs.is_assigned(tp)]:
                del table[tp]

    # -- requests and answers -------------------------------------------------------------

    def _build(self, node: int, parts: dict[TopicPartition, tuple[int, _Sent]]) -> UnsentRequest[Any]:
        topics: dict[str, OffsetForLeaderEpochRequest.OffsetForLeaderTopic] = {}
        for tp, (current_epoch, sent) in parts.items():
            topic = topics.get(tp.topic)
            if topic is None:
                topic = topics[tp.topic] = OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                    topic=tp.topic
                )
            topic.partitions.append(
                OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                    partition=tp.partition,
                    current_leader_epoch=current_epoch,
                    leader_epoch=sent.offset_epoch,
                )
            )
        request = OffsetForLeaderEpochRequest(
            replica_id=CONSUMER_REPLICA_ID, topics=list(topics.values())
        )

        def handler(now: float, response: OffsetForLeaderEpochResponse | None, error: BaseException | None) -> None:
            self._on_response(now, node, parts, response, error)

        return UnsentRequest(node, request, handler)

    def _on_response(
        self,
        now: float,
        node: int,
        parts: dict[TopicPartition, tuple[int, _Sent]],
        response: OffsetForLeaderEpochResponse | None,
        error: BaseException | None,
    ) -> None:
        for tp, (_, sent) in parts.items():
            if self._in_flight.get(tp) is sent:
                del self._in_flight[tp]
        if isinstance(error, UnsupportedVersionError):
            log.info(
                "broker %d does not offer OffsetForLeaderEpoch; positions of its partitions "
                "are not validated after leader changes",
                node,
            )
            self._unsupported.add(node)
            for tp, (_, sent) in parts.items():
                self._skip_if_current(tp, sent, node)
            return
        if error is not None:
            if isinstance(error, KafkaConnectionError) or (
                isinstance(error, KafkaError) and type(error).invalid_metadata
            ):
                self._metadata.request_update()
            for tp in parts:
                self._retry_later(now, tp)
            return
        assert isinstance(response, OffsetForLeaderEpochResponse)
        truncated: dict[TopicPartition, int] = {}
        divergent: dict[TopicPartition, OffsetAndMetadata | None] = {}
        answered: set[TopicPartition] = set()
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition)
                entry = parts.get(tp)
                if entry is None or tp in answered:
                    continue
                answered.add(tp)
                sent = entry[1]
                if p.error_code:
                    self._on_partition_error(now, tp, sent, node, error_for_code(p.error_code))
                    continue
                self._attempts.pop(tp, None)
                result = complete_validation(
                    self._subscriptions,
                    tp,
                    sent.offset,
                    sent.offset_epoch,
                    p.leader_epoch,
                    p.end_offset,
                )
                if result is not None:
                    self._reported[tp] = sent
                    truncated.update(result.positions)
                    divergent.update(result.divergent_offsets)
        for tp in parts:
            if tp not in answered:
                self._retry_later(now, tp)
        # the leader may have moved again while the request was out: look again
        self._seen_version = None
        if truncated:
            self._report_error(LogTruncationError(truncated, divergent))

    def _on_partition_error(
        self,
        now: float,
        tp: TopicPartition,
        sent: _Sent,
        node: int,
        cls: type[BrokerResponseError],
    ) -> None:
        if cls is ClusterAuthorizationFailedError:
            # old versions (v0-v2) are for replicas only on secured clusters: do without
            self._skip_if_current(tp, sent, node)
            return
        if cls.invalid_metadata or cls is FencedLeaderEpochError:
            self._awaiting_metadata[tp] = self._metadata.request_update()
        elif cls.retriable:  # e.g. UNKNOWN_LEADER_EPOCH: the broker is behind our metadata
            self._metadata.request_update()
        else:
            self._report_error(
                cls("OffsetForLeaderEpoch failed", topic=tp.topic, partition=tp.partition)
            )
        self._retry_later(now, tp)

    def _retry_later(self, now: float, tp: TopicPartition) -> None:
        attempts = self._attempts.get(tp, 0)
        self._attempts[tp] = attempts + 1
        self._retry_at[tp] = now + self._backoff.delay_ms(attempts)

    def _skip_if_current(self, tp: TopicPartition, sent: _Sent, node: int) -> None:
        subs = self._subscriptions
        if not subs.is_assigned(tp):
            return
        st = subs.state(tp)
        position = st.position
        if st.fetch_state is FetchState.AWAIT_VALIDATION and _matches(position, sent):
            assert position is not None
            self._skip(tp, position, node, position.leader_epoch)


def _matches(position: FetchPosition | None, sent: _Sent) -> bool:
    return (
        position is not None
        and position.offset == sent.offset
        and position.offset_epoch == sent.offset_epoch
    )
