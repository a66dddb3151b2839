"""ShareFetchManager: share sessions per leader, ShareFetch / ShareAcknowledge, acquired records.

Sans-I/O. A session opens with a full ShareFetch (epoch 0), goes incremental (epoch 1, 2, ...),
resets to 0 on SHARE_SESSION_NOT_FOUND / INVALID_SHARE_SESSION_EPOCH, and closes with -1.
"""

from __future__ import annotations

import itertools
import logging
import math
import random
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkaio.backoff import ExponentialBackoff
from kafkaio.errors import (
    BrokerResponseError,
    CorruptRecordError,
    InvalidShareSessionEpochError,
    KafkaError,
    KafkaProtocolError,
    ShareSessionNotFoundError,
    error_for_code,
)
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.metadata.manager import MetadataManager
from kafkaio.records import iter_batches
from kafkaio.runtime.requests import PollResult, UnsentRequest
from kafkaio.share.acknowledgements import Acknowledgements, AckOutcome
from kafkaio.share.errors import ShareSessionResetError
from kafkaio.share.membership import ShareMembershipManager
from kafkaio.share.protocol import (
    AckPartition,
    AckTopic,
    FetchTopic,
    ShareAcknowledgeRequestV1,
    ShareAcknowledgeResponseV1,
    ShareFetchRequestV1,
    ShareFetchResponseV1,
)
from kafkaio.share.record import ShareRecord

log = logging.getLogger("kafkaio.share")

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
DEFAULT_LOCK_TIMEOUT_MS = 30_000.0
_MAX_EPOCH = 2**31 - 1
_SESSION_ERRORS = (ShareSessionNotFoundError, InvalidShareSessionEpochError)
_METADATA_ERRORS = {3, 6, 74, 100, 103}  # unknown topic/partition, not leader, fenced epoch, ids
#: The most records one ShareFetch response may acquire in a partition (or 10 x max_records
#: if that is more); a response acquiring more is ignored (reported, and redelivered later).
MAX_ACQUIRED_RECORDS = 100_000
_DECODE_CHUNK = 4096  # records decoded at a time


@dataclass(slots=True, eq=False)
class ShareSession:
    """The share session with one broker (KIP-932): its epoch and the partitions it holds."""

    node_id: int
    session_id: int
    epoch: int = INITIAL_EPOCH
    partitions: set[TopicPartition] = field(default_factory=set)
    in_flight: bool = False
    next_fetch_ms: float = -math.inf
    failures: int = 0

    def next_epoch(self) -> None:
        self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1


@dataclass(slots=True, eq=False)
class AckWaiter:
    """A commit waiting for the acknowledgements outstanding when it was asked for."""

    outstanding: dict[TopicPartition, set[int]]
    on_done: Callable[[dict[TopicPartition, KafkaError | None]], None]
    results: dict[TopicPartition, KafkaError | None] = field(default_factory=dict)

    def settle(self, outcome: AckOutcome) -> bool:
        waiting = self.outstanding.get(outcome.partition)
        if waiting is None:
            return False
        before = len(waiting)
        waiting.difference_update(outcome.offsets)
        if len(waiting) != before:
            if outcome.error is not None or outcome.partition not in self.results:
                self.results[outcome.partition] = outcome.error
        if not waiting:
            del self.outstanding[outcome.partition]
        return not self.outstanding


@dataclass(frozen=True, slots=True)
class ShareFetchConfig:
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 52_428_800
    max_records: int = 500
    batch_size: int = 500
    retry_backoff_ms: float = 100
    retry_backoff_max_ms: float = 1000


class ShareFetchManager:
    """Fetches (acquires) records of the member's assignment and sends acknowledgements.

    `poll(now)` returns ShareFetch requests for leaders whose records the application has
    consumed, piggybacking pending acknowledgements; ShareAcknowledge carries them alone when
    a commit or close asks for it or no fetch will go to that leader. Acquired records wait
    in a buffer (`drain`); a partition's acquired offsets without a record are acknowledged
    as gaps. `on_records` is called when new records arrive.
    """

    def __init__(
        self,
        group_id: str,
        member: ShareMembershipManager,
        metadata: MetadataManager,
        acknowledgements: Acknowledgements,
        config: ShareFetchConfig = ShareFetchConfig(),
        *,
        on_records: Callable[[], None] = lambda: None,
        backoff_jitter: float = 0.2,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.group_id = group_id
        self._member = member
        self._metadata = metadata
        self.acks = acknowledgements
        self.config = config
        self._on_records = on_records
        self._backoff = ExponentialBackoff(
            config.retry_backoff_ms, config.retry_backoff_max_ms, jitter=backoff_jitter, rng=rng
        )
        self._sessions: dict[int, ShareSession] = {}
        self._session_ids = itertools.count(1)
        self._buffer: deque[tuple[int, ShareRecord[Any, Any]]] = deque()
        self._buffered_by_node: dict[int, int] = {}
        self._flush = False
        self._closing = False
        self._waiters: list[AckWaiter] = []
        self._outcomes: list[AckOutcome] = []
        self._errors: list[KafkaError] = []
        self.lock_timeout_ms = DEFAULT_LOCK_TIMEOUT_MS
        self.fetches = 0  # ShareFetch responses handled (tests and stats)

    # -- application side -----------------------------------------------------------------------

    def drain(self, max_records: int, now: float) -> list[ShareRecord[Any, Any]]:
        """Up to `max_records` buffered records whose acquisition lock still holds at `now`.

        Records whose lock expired while buffered are dropped: the broker already released
        them (they come back, with a higher delivery count, from a later fetch).
        """
        out: list[ShareRecord[Any, Any]] = []
        while self._buffer and len(out) < max_records:
            node_id, record = self._buffer.popleft()
            self._buffered_by_node[node_id] -= 1
            if self.acks.is_held(
                TopicPartition(record.topic, record.partition), record.offset, now
            ):
                out.append(record)
        return out

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def drain_outcomes(self) -> list[AckOutcome]:
        outcomes, self._outcomes = self._outcomes, []
        return outcomes

    def drain_errors(self) -> list[KafkaError]:
        errors, self._errors = self._errors, []
        return errors

    def commit(self, on_done: Callable[[dict[TopicPartition, KafkaError | None]], None]) -> None:
        """Send every pending acknowledgement now; `on_done` gets {tp: error or None}."""
        outstanding = self.acks.outstanding()
        if not outstanding:
            on_done({})
            return
        self._waiters.append(AckWaiter(outstanding, on_done))
        self._flush = True

    def close(self) -> None:
        """Stop fetching; send the remaining acknowledgements and close every session (-1)."""
        self._closing = True
        # records still buffered were never seen by the application: the session close
        # releases them on the broker
        self._buffer.clear()
        self._buffered_by_node.clear()

    @property
    def closed(self) -> bool:
        return self._closing and not self._sessions

    # -- request manager ------------------------------------------------------------------------

    def poll(self, now: float) -> PollResult:
        if self._closing:
            return self._poll_close(now)
        targets = self._targets()
        requests: list[UnsentRequest[Any]] = []
        wait = math.inf
        flush_left = False  # a commit's acknowledgements wait for a session's answer
        for node_id in set(targets) | set(self._sessions):
            session = self._sessions.get(node_id)
            if session is None:
                session = self._sessions[node_id] = ShareSession(node_id, next(self._session_ids))
            if session.in_flight:
                flush_left = True
                continue
            wanted = targets.get(node_id, set())
            ack_tps = self._pending_acks(session)
            if not wanted and not session.partitions and not ack_tps:
                continue
            fetch_due = (
                self._buffered_by_node.get(node_id, 0) == 0
                and now >= session.next_fetch_ms
                and (bool(wanted) or bool(session.partitions - wanted))
            )
            if fetch_due:
                requests.append(self._fetch_request(now, session, wanted, ack_tps))
            elif ack_tps and session.epoch > INITIAL_EPOCH and (self._flush or not wanted):
                requests.append(self._ack_request(session, ack_tps, session.epoch))
            elif now < session.next_fetch_ms:
                wait = min(wait, session.next_fetch_ms - now)
        self._flush = self._flush and flush_left
        return PollResult(requests, wait)

    def _poll_close(self, now: float) -> PollResult:
        requests = []
        for session in list(self._sessions.values()):
            if session.in_flight:
                continue
            if session.epoch == INITIAL_EPOCH:
                self._end_session(session, "the consumer closed")
                continue
            requests.append(self._ack_request(session, self._pending_acks(session), FINAL_EPOCH))
        if not self._sessions:
            for waiter in self._waiters:
                waiter.on_done(waiter.results)
            self._waiters.clear()
        return PollResult(requests)

    # -- building requests ----------------------------------------------------------------------

    def _targets(self) -> dict[int, set[TopicPartition]]:
        """Assigned partitions by leader; asks for metadata when an id or leader is unknown."""
        cluster = self._metadata.cluster
        by_node: dict[int, set[TopicPartition]] = {}
        missing = False
        for topic_id, partitions in self._member.assignment.items():
            name = cluster.topic_name(topic_id)
            if name is None:
                missing = True
                continue
            for p in partitions:
                tp = TopicPartition(name, p)
                leader = cluster.leader_for(tp)
                if leader is None or leader < 0:
                    missing = True
                    continue
                by_node.setdefault(leader, set()).add(tp)
        if missing:
            self._metadata.request_update(reset_backoff=False)
        return by_node

    def _pending_acks(self, session: ShareSession) -> list[TopicPartition]:
        return self.acks.pending_partitions(session.node_id)

    def _fetch_request(
        self,
        now: float,
        session: ShareSession,
        wanted: set[TopicPartition],
        ack_tps: list[TopicPartition],
    ) -> UnsentRequest[Any]:
        topics: dict[uuid.UUID, FetchTopic] = {}
        sent_acks: dict[TopicPartition, tuple[int, ...]] = {}
        if session.epoch == INITIAL_EPOCH:
            listed = set(wanted)  # a new session: every partition, and no acknowledgements
            forgotten: set[TopicPartition] = set()
        else:
            listed = (wanted - session.partitions) | set(ack_tps)
            forgotten = session.partitions - wanted - set(ack_tps)
            for tp in ack_tps:
                batches, offsets = self.acks.take(tp)
                sent_acks[tp] = offsets
                self._fetch_topic(topics, tp).partitions.append(AckPartition(tp.partition, batches))
        for tp in listed - set(sent_acks):
            self._fetch_topic(topics, tp).partitions.append(AckPartition(tp.partition))
        forgotten_wire: dict[uuid.UUID, list[int]] = {}
        for tp in forgotten:
            topic_id = self._metadata.cluster.topic_id(tp.topic)
            if topic_id is not None:
                forgotten_wire.setdefault(topic_id, []).append(tp.partition)
        request = ShareFetchRequestV1(
            self.group_id,
            self._member.member_id,
            session.epoch,
            self.config.max_wait_ms,
            self.config.min_bytes,
            self.config.max_bytes,
            self.config.max_records,
            self.config.batch_size,
            [t for t in topics.values() if t.partitions],
            sorted(forgotten_wire.items()),
        )
        new_partitions = (session.partitions | listed) - forgotten
        session.in_flight = True
        sent_epoch, session_id = session.epoch, session.session_id

        def handler(at: float, response: ShareFetchResponseV1 | None, error: BaseException | None) -> None:
            self._on_fetch(
                at, now, session, session_id, sent_epoch, new_partitions, sent_acks, response, error
            )

        timeout = self.config.max_wait_ms + 30_000.0
        return UnsentRequest(session.node_id, request, handler, timeout_ms=timeout)

    def _fetch_topic(self, topics: dict[uuid.UUID, FetchTopic], tp: TopicPartition) -> FetchTopic:
        topic_id = self._metadata.cluster.topic_id(tp.topic)
        if topic_id is None:
            raise KafkaError(f"no topic id known for {tp.topic!r}; metadata is missing it")
        return topics.setdefault(topic_id, FetchTopic(topic_id))

    def _ack_request(
        self, session: ShareSession, ack_tps: list[TopicPartition], epoch: int
    ) -> UnsentRequest[Any]:
        topics: dict[uuid.UUID, AckTopic] = {}
        sent_acks: dict[TopicPartition, tuple[int, ...]] = {}
        for tp in ack_tps:
            topic_id = self._metadata.cluster.topic_id(tp.topic)
            if topic_id is None:
                continue
            batches, offsets = self.acks.take(tp)
            sent_acks[tp] = offsets
            topics.setdefault(topic_id, AckTopic(topic_id)).partitions.append(
                AckPartition(tp.partition, batches)
            )
        request = ShareAcknowledgeRequestV1(
            self.group_id, self._member.member_id, epoch, list(topics.values())
        )
        session.in_flight = True
        session_id = session.session_id

        def handler(at: float, response: ShareAcknowledgeResponseV1 | None, error: BaseException | None) -> None:
            self._on_acknowledge(at, session, session_id, epoch, sent_acks, response, error)

        return UnsentRequest(session.node_id, request, handler)

    # -- responses ------------------------------------------------------------------------------

    def _on_fetch(
        self,
        now: float,
        sent_at: float,
        session: ShareSession,
        session_id: int,
        sent_epoch: int,
        new_partitions: set[TopicPartition],
        sent_acks: dict[TopicPartition, tuple[int, ...]],
        response: ShareFetchResponseV1 | None,
        error: BaseException | None,
    ) -> None:
        session.in_flight = False
        self.fetches += 1
        if response is not None and response.error_code:
            error = error_for_code(response.error_code)(
                response.error_message, group_id=self.group_id, node_id=session.node_id
            )
        if error is not None:
            self._request_failed(now, session, session_id, sent_acks, error)
            return
        assert response is not None  # no error: the response
        session.failures = 0
        session.next_epoch()
        session.partitions = new_partitions
        if response.acquisition_lock_timeout_ms > 0:
            self.lock_timeout_ms = float(response.acquisition_lock_timeout_ms)
        settled: set[TopicPartition] = set()
        got_records = 0
        cluster = self._metadata.cluster
        for topic in response.responses:
            name = cluster.topic_name(topic.topic_id)
            if name is None:
                self._metadata.request_update(reset_backoff=False)
                continue
            for part in topic.partitions:
                tp = TopicPartition(name, part.partition_index)
                if tp in sent_acks:
                    settled.add(tp)
                    ack_error = None
                    if part.acknowledge_error_code:
                        ack_error = error_for_code(part.acknowledge_error_code)(
                            part.acknowledge_error_message,
                            topic=name,
                            partition=part.partition_index,
                        )
                    self._settle(self.acks.complete(tp, sent_acks[tp], ack_error))
                if part.error_code:
                    self._partition_error(tp, part.error_code, part.error_message)
                    continue
                if self._closing:
                    continue  # the session close releases them
                got_records += self._acquire(now, session, tp, part)
        for tp, offsets in sent_acks.items():
            if tp not in settled:
                self._settle(self.acks.complete(tp, offsets, None))
        if got_records:
            self._on_records()
        else:
            # nothing acquired: a broker that answers at once must not be asked in a hot loop
            session.next_fetch_ms = sent_at + min(self.config.max_wait_ms, 100)

    def _acquire(self, now: float, session: ShareSession, tp: TopicPartition, part: Any) -> int:
        if not part.acquired_records:
            return 0
        ranges = [(a.first_offset, a.last_offset, a.delivery_count) for a in part.acquired_records]
        acquired = sum(max(last - first + 1, 0) for first, last, _ in ranges)
        limit = max(MAX_ACQUIRED_RECORDS, 10 * self.config.max_records)
        if acquired > limit:
            # a broker acquiring far more than asked for (or a hostile one claiming 2**62
            # offsets): their locks expire on the broker, which delivers them again
            self._errors.append(
                KafkaProtocolError(
                    f"the broker acquired {acquired} records of {tp} in one ShareFetch "
                    f"response, more than {limit} (10 x max_records, at least "
                    f"{MAX_ACQUIRED_RECORDS}); ignored: they are delivered again once their "
                    "acquisition locks expire"
                )
            )
            return 0
        deadline = now + self.lock_timeout_ms
        found: dict[int, tuple[Any, int]] = {}
        complete = True  # every record of the acquired ranges was decoded
        if part.records:
            lo, hi = min(r[0] for r in ranges), max(r[1] for r in ranges)
            complete = self._records_in(tp, part.records, lo, hi, found)
        count = 0
        for first, last, delivery_count in ranges:
            for offset in range(first, last + 1):
                delivery = self.acks.acquired(
                    tp, offset, delivery_count, deadline, session.node_id, session.session_id
                )
                if delivery is None:
                    continue  # a repeat of a delivery this consumer holds
                hit = found.get(offset)
                if hit is None:
                    if complete:  # no record there (compaction): a gap
                        self.acks.acknowledge_gap(tp, offset)
                    continue  # else its lock expires and the broker delivers it again
                (off, timestamp, key, value, headers), ts_type = hit
                record: ShareRecord[Any, Any] = ShareRecord(
                    tp.topic,
                    tp.partition,
                    off,
                    timestamp,
                    ts_type,
                    key,
                    value,
                    headers,
                    delivery_count,
                )
                self._buffer.append((session.node_id, record))
                count += 1
        self._buffered_by_node[session.node_id] = (
            self._buffered_by_node.get(session.node_id, 0) + count
        )
        return count

    def _records_in(
        self,
        tp: TopicPartition,
        records: Any,
        lo: int,
        hi: int,
        found: dict[int, tuple[Any, int]],
    ) -> bool:
        """Decode the records of offsets `lo`..`hi` into `found` (offset: (record tuple,
        timestamp type)), a few thousand at a time and stopping past `hi`; False when the
        data is corrupt (the error goes to the application, the network task goes on)."""
        try:
            for batch in iter_batches(records, topic=tp.topic, partition=tp.partition):
                if batch.is_control or batch.last_offset < lo or batch.base_offset > hi:
                    continue
                ts_type = batch.timestamp_type
                cursor = batch.cursor()
                while cursor.remaining:
                    for rec in cursor.take(_DECODE_CHUNK):
                        offset = rec[0]
                        if offset > hi:
                            break
                        if offset >= lo:
                            found[offset] = (rec, ts_type)
                    else:
                        continue
                    break
        except CorruptRecordError as exc:
            self._errors.append(exc)
            return False
        return True

    def _on_acknowledge(
        self,
        now: float,
        session: ShareSession,
        session_id: int,
        sent_epoch: int,
        sent_acks: dict[TopicPartition, tuple[int, ...]],
        response: ShareAcknowledgeResponseV1 | None,
        error: BaseException | None,
    ) -> None:
        session.in_flight = False
        if response is not None and response.error_code:
            error = error_for_code(response.error_code)(
                response.error_message, group_id=self.group_id, node_id=session.node_id
            )
        if error is not None:
            if sent_epoch == FINAL_EPOCH:
                failure = error if isinstance(error, KafkaError) else KafkaError(repr(error))
                self._fail_acks(sent_acks, failure)
                self._end_session(session, f"closing it failed: {error!r}")
                return
            self._request_failed(now, session, session_id, sent_acks, error)
            return
        assert response is not None  # no error: the response
        cluster = self._metadata.cluster
        answered: set[TopicPartition] = set()
        for topic in response.responses:
            name = cluster.topic_name(topic.topic_id)
            for part in topic.partitions:
                if name is None:
                    continue
                tp = TopicPartition(name, part.partition_index)
                if tp not in sent_acks:
                    continue
                answered.add(tp)
                ack_error = None
                if part.error_code:
                    ack_error = error_for_code(part.error_code)(
                        part.error_message, topic=name, partition=part.partition_index
                    )
                self._settle(self.acks.complete(tp, sent_acks[tp], ack_error))
        for tp, offsets in sent_acks.items():
            if tp not in answered:
                self._settle(self.acks.complete(tp, offsets, None))
        if sent_epoch == FINAL_EPOCH:
            self._end_session(session, "the consumer closed it")
        else:
            session.next_epoch()

    # -- failures -------------------------------------------------------------------------------

    def _request_failed(
        self,
        now: float,
        session: ShareSession,
        session_id: int,
        sent_acks: dict[TopicPartition, tuple[int, ...]],
        error: BaseException,
    ) -> None:
        kafka_error = error if isinstance(error, KafkaError) else KafkaError(repr(error))
        if isinstance(error, _SESSION_ERRORS):
            ack_error: KafkaError = ShareSessionResetError(
                f"the share session on node {session.node_id} was lost "
                f"({type(error).__name__}); the broker released its records for redelivery"
            )
        else:
            ack_error = kafka_error
        self._fail_acks(sent_acks, ack_error)
        if (
            isinstance(error, BrokerResponseError)
            and not error.retriable
            and not isinstance(error, _SESSION_ERRORS)
        ):
            self._errors.append(kafka_error)
        if isinstance(error, KafkaError) and error.invalid_metadata:
            self._metadata.request_update(reset_backoff=False)
        # Any failed request leaves the session in doubt: open a new one (epoch 0). The
        # broker releases the records of the old session, so their acknowledgements fail.
        log.info("share session on node %d reset after %r", session.node_id, error)
        self._reset_session(session, f"{type(error).__name__}")
        session.failures += 1
        if not isinstance(error, _SESSION_ERRORS):
            session.next_fetch_ms = now + self._backoff.delay_ms(session.failures)

    def _fail_acks(
        self, sent_acks: dict[TopicPartition, tuple[int, ...]], error: KafkaError
    ) -> None:
        for tp, offsets in sent_acks.items():
            self._settle(self.acks.complete(tp, offsets, error))

    def _partition_error(self, tp: TopicPartition, code: int, message: str | None) -> None:
        error = error_for_code(code)(message, topic=tp.topic, partition=tp.partition)
        if code in _METADATA_ERRORS or error.invalid_metadata:
            self._metadata.request_update(reset_backoff=False)
            log.debug("share fetch of %s: %r; refreshing metadata", tp, error)
        elif not error.retriable:
            self._errors.append(error)

    def _reset_session(self, session: ShareSession, reason: str) -> None:
        for outcome in self.acks.session_ended(session.node_id, session.session_id, reason):
            self._settle(outcome)
        self._drop_buffered(session.node_id)
        session.epoch = INITIAL_EPOCH
        session.partitions = set()
        session.session_id = next(self._session_ids)

    def _end_session(self, session: ShareSession, reason: str) -> None:
        for outcome in self.acks.session_ended(session.node_id, session.session_id, reason):
            self._settle(outcome)
        self._drop_buffered(session.node_id)
        self._sessions.pop(session.node_id, None)

    def _drop_buffered(self, node_id: int) -> None:
        if self._buffered_by_node.get(node_id):
            self._buffer = deque(item for item in self._buffer if item[0] != node_id)
            self._buffered_by_node[node_id] = 0

    def _settle(self, outcome: AckOutcome) -> None:
        if not outcome.offsets:
            return
        self._outcomes.append(outcome)
        if self._waiters:
            done = [w for w in self._waiters if w.settle(outcome)]
            for waiter in done:
                self._waiters.remove(waiter)
                waiter.on_done(waiter.results)
