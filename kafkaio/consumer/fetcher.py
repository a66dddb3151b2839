"""FetchManager: the sans-I/O request manager that builds one Fetch request per leader.

It fetches partitions that have a position and no buffered data, at most one request per
node, and files responses into the FetchBuffer (errors -> resets or metadata refreshes).
A partition whose leader named a preferred read replica (KIP-392) is fetched from it.
Requests carry leader epochs (KIP-320); a diverging epoch in a response truncates the position.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkaio.backoff import ExponentialBackoff
from kafkaio.consumer.config import ConsumerConfig
from kafkaio.consumer.fetch_buffer import CompletedFetch, FetchBuffer
from kafkaio.consumer.fetch_session import (
    FETCH_SESSION_TOPIC_ID_ERROR,
    SESSION_ERRORS,
    FetchSession,
    SessionPartition,
    SessionPlan,
)
from kafkaio.consumer.subscription import FetchState, OffsetResetStrategy, SubscriptionState
from kafkaio.consumer.validation import complete_validation
from kafkaio.errors import (
    BrokerResponseError,
    KafkaConnectionError,
    KafkaError,
    OffsetOutOfRangeError,
    error_for_code,
)
from kafkaio.metadata.cluster import BrokerNode, TopicPartition
from kafkaio.metadata.manager import MetadataManager
from kafkaio.protocol.messages import FetchRequest, FetchResponse
from kafkaio.runtime.requests import PollResult, UnsentRequest

log = logging.getLogger("kafkaio.consumer")

_NO_ID = uuid.UUID(int=0)
LAST_NAME_ONLY_FETCH_VERSION = 12  # v13+ identifies topics by id only


@dataclass(slots=True)
class _InFlightFetch:
    """What was asked of one node: fetch offset and last fetched epoch (-1: unknown) per
    partition (every partition of the fetch session, listed in the request or not), topic
    names by id, and the session's part in it."""

    offsets: dict[TopicPartition, int]
    names_by_id: dict[uuid.UUID, str] = field(default_factory=dict)
    last_epochs: dict[TopicPartition, int] = field(default_factory=dict)
    session: SessionPlan | None = None


class FetchManager:
    """Builds Fetch requests for fetchable partitions and handles their responses.

    Fetch sessions (KIP-227, see fetch_session.py): one per node; after a full request
    creates it, requests list only the partitions whose fetch changed and responses only the
    partitions with news. A broker without sessions gets full requests.

    Prefetch: while the application works through a partition's buffered data, the next
    chunk (from where the buffered data ends) is fetched, as long as the partition holds
    less than ``prefetch_bytes`` (default: max_partition_fetch_bytes) and the whole buffer
    less than the buffer cap; memory stays bounded by those two settings.
    Errors travel to the application through `report_error` (the background-event queue).

    Leader epochs (KIP-320, as Java's AbstractFetch): each partition is sent with
    ``current_leader_epoch`` (the epoch its position was validated against, else the
    metadata's) and ``last_fetched_epoch`` (the epoch of the record before the fetch offset:
    the position's, or the buffered data's last batch's for a prefetch). A response naming a
    diverging epoch (Fetch v12+) is not buffered: for a fetch from the position, the position
    is moved back to the divergence (or reset, or a LogTruncationError reported, as in
    `complete_validation`); for a prefetch, the partition's buffered data (which holds the
    divergent records) is dropped, so the next fetch starts from the position and the broker
    checks it again.

    Follower fetching (KIP-392): requests carry ``client_rack``; when a response names a
    preferred read replica for a partition, the partition is fetched from that broker until
    ``metadata_max_age_ms`` passes or a fetch from it fails (then from the leader again,
    which may name a replica anew). Out of range on a follower refetches from the leader
    instead of resetting the position (the follower may lag the leader).
    """

    def __init__(
        self,
        subscriptions: SubscriptionState,
        metadata: MetadataManager,
        buffer: FetchBuffer,
        config: ConsumerConfig,
        report_error: Callable[[BaseException], None],
        *,
        rng: Callable[[], float] | None = None,
        prefetch_bytes: int | None = None,
    ) -> None:
        self._subscriptions = subscriptions
        # fetch ahead while a partition holds fewer buffered bytes than this (0: never)
        self._prefetch_bytes = (
            config.max_partition_fetch_bytes if prefetch_bytes is None else prefetch_bytes
        )
        self._metadata = metadata
        self._buffer = buffer
        self._config = config
        self._report_error = report_error
        kwargs: dict[str, Any] = {} if rng is None else {"rng": rng}
        self._backoff = ExponentialBackoff(
            config.retry_backoff_ms, config.retry_backoff_max_ms, **kwargs
        )
        self._in_flight: dict[int, _InFlightFetch] = {}
        self._sessions: dict[int, FetchSession] = {}
        self._node_failures: dict[int, int] = {}
        self._node_retry_at: dict[int, float] = {}
        self._partition_retry_at: dict[TopicPartition, float] = {}
        self._awaiting_metadata: dict[TopicPartition, int] = {}
        # what the last poll held back until buffered data drains: every fetch (the buffer
        # was full), or the fetches to these nodes
        self._held_all = False
        self._held: set[int] = set()
        # closing (close_sessions): the final requests of open sessions, by node, not sent
        # yet and sent but not answered; called once the last is answered
        self._closing = False
        self._close_plans: dict[int, SessionPlan] = {}
        self._close_in_flight: set[int] = set()
        self._on_closed: Callable[[], None] | None = None

    @property
    def in_flight_nodes(self) -> frozenset[int]:
        return frozenset(self._in_flight)

    def waits_for_drain(self) -> bool:
        """Whether draining the buffer may let this manager send a fetch it could not send
        at its last poll: the buffer was full, or a node with a partition held for its
        buffered data has no fetch in flight. Otherwise the next response's poll sends what
        draining allows, so the consumer need not wake the driver after taking records."""
        return self._held_all or any(node not in self._in_flight for node in self._held)

    def close_sessions(
        self, on_closed: Callable[[], None], reachable: Callable[[int], bool] = lambda node: True
    ) -> None:
        """The consumer is closing: fetch no more, and send every open fetch session on a
        `reachable` node (one with an open connection) a final request (KIP-227 epoch -1) so
        its broker frees it now; as Java's consumer, no connection is made for it. The
        request may go on another open connection to the same broker (``any_connection``),
        so it does not wait behind a fetch the broker holds. Responses to fetches still in
        flight are dropped. ``on_closed()`` is called once every final
        request is answered or failed (at once if none is sent; see `sessions_closed`)."""
        self._closing = True
        self._on_closed = on_closed
        for node, session in self._sessions.items():
            plan = session.close()
            if plan is None:
                continue
            if reachable(node):
                self._close_plans[node] = plan
            else:
                log.debug(
                    "node %d: not connected; fetch session %d left to expire", node, plan.session_id
                )
        self._check_closed()

    def poll_on_close(self, now: float, connected: Callable[[int], bool]) -> PollResult:
        """The client is closing (the driver's close phase): close the fetch sessions of
        connected nodes (`close_sessions`); their final requests."""
        if not self._closing:
            self.close_sessions(lambda: None, connected)
        return self._close_requests()

    @property
    def close_done(self) -> bool:
        return self.sessions_closed

    @property
    def sessions_closed(self) -> bool:
        """True once `close_sessions` was called and its final requests are done."""
        return self._closing and not self._close_plans and not self._close_in_flight

    def _check_closed(self) -> None:
        on_closed = self._on_closed
        if on_closed is not None and self.sessions_closed:
            self._on_closed = None
            on_closed()

    def _close_requests(self) -> PollResult:
        requests = [self._close_request(node, plan) for node, plan in self._close_plans.items()]
        self._close_plans.clear()
        return PollResult(requests, math.inf)

    def _close_request(self, node: int, plan: SessionPlan) -> UnsentRequest[Any]:
        self._close_in_flight.add(node)
        request = self._request(plan)
        request.max_wait_ms = 0  # nothing to wait for: it lists no partitions

        def handler(now: float, response: FetchResponse | None, error: BaseException | None) -> None:
            if error is not None:
                log.debug(
                    "node %d: closing fetch session %d failed: %s", node, plan.session_id, error
                )
            elif response is not None:
                log.debug(
                    "node %d: fetch session %d closed (error code %d)",
                    node,
                    plan.session_id,
                    response.error_code,
                )
            self._close_in_flight.discard(node)
            self._check_closed()

        # on another idle connection to the broker if one is open: on the node's own, the
        # broker would answer it only after the fetch it holds there (up to max wait)
        return UnsentRequest(
            node,
            request,
            handler,
            max_version=None if plan.uses_ids else LAST_NAME_ONLY_FETCH_VERSION,
            any_connection=True,
        )

    # -- requests -------------------------------------------------------------------------

    def poll(self, now: float) -> PollResult:
        if self._closing:
            return self._close_requests()
        if self._buffer.buffered_bytes >= self._config.buffer_max_bytes:
            self._held_all = True
            return PollResult([], math.inf)  # the consumer wakes the driver after draining
        self._held_all = False
        cluster = self._metadata.cluster
        by_node: dict[int, list[tuple[TopicPartition, int | None]]] = {}
        wait = math.inf
        need_metadata = False
        buffer = self._buffer
        subs = self._subscriptions
        held: set[int] = set()  # nodes with a partition waiting for its buffer to drain
        for tp in subs.fetchable_partitions():
            start: int | None = None  # None: from the position
            if buffer.has_data(tp):
                start = buffer.next_offset(tp)
                if start is None or buffer.bytes_for(tp) >= self._prefetch_bytes:
                    leader = cluster.leader_for(tp)
                    if leader is not None:
                        held.add(self._read_replica(tp, leader, now))
                    continue
            seen = self._awaiting_metadata.get(tp)
            if seen is not None:
                if self._metadata.version <= seen:
                    continue
                del self._awaiting_metadata[tp]
            retry_at = self._partition_retry_at.get(tp)
            if retry_at is not None:
                if now < retry_at:
                    wait = min(wait, retry_at - now)
                    continue
                del self._partition_retry_at[tp]
            leader = cluster.leader_for(tp)
            if leader is None:
                need_metadata = True
                continue
            node = self._read_replica(tp, leader, now)
            if node in self._in_flight:
                continue
            node_retry = self._node_retry_at.get(node, -math.inf)
            if now < node_retry:
                wait = min(wait, node_retry - now)
                continue
            by_node.setdefault(node, []).append((tp, start))
        if need_metadata:
            self._metadata.request_update(reset_backoff=False)
        for node in held.intersection(by_node):
            # Only caught-up partitions left to ask for: the broker would hold that request
            # for fetch_max_wait_ms, and the held partitions could not be fetched meanwhile
            # (one request per node). Wait until they drain; draining wakes the driver.
            if all(self._caught_up(tp, start) for tp, start in by_node[node]):
                del by_node[node]
        self._held = held
        requests = [self._build(node, tps) for node, tps in by_node.items()]
        return PollResult(requests, wait)

    def _read_replica(self, tp: TopicPartition, leader: int, now: float) -> int:
        """The node to fetch `tp` from: its preferred read replica while that is fresh, known
        to metadata and not backing off; else the leader. An expired preference is dropped."""
        st = self._subscriptions.state(tp)
        replica = st.preferred_read_replica
        if replica is None:
            return leader
        if now >= st.preferred_read_replica_expires_ms:
            st.preferred_read_replica = None
            return leader
        if self._metadata.cluster.broker(replica) is None:
            return leader
        if now < self._node_retry_at.get(replica, -math.inf):
            return leader
        return replica

    def _clear_read_replica(self, tp: TopicPartition, node: int | None = None) -> None:
        """Forget `tp`'s preferred read replica (only if it is `node`, when given)."""
        subs = self._subscriptions
        if subs.is_assigned(tp):
            st = subs.state(tp)
            if node is None or st.preferred_read_replica == node:
                st.preferred_read_replica = None

    def _caught_up(self, tp: TopicPartition, start: int | None) -> bool:
        """The next fetch of `tp` starts at (or past) its last known high watermark."""
        st = self._subscriptions.state(tp)
        if st.high_watermark is None:
            return False
        if start is None:
            if st.position is None:
                return False
            start = st.position.offset
        return start >= st.high_watermark

    def _build(
        self, node: int, partitions: list[tuple[TopicPartition, int | None]]
    ) -> UnsentRequest[Any]:
        cluster = self._metadata.cluster
        cfg = self._config
        context = _InFlightFetch({})
        wanted: dict[TopicPartition, SessionPartition] = {}
        ids: dict[str, uuid.UUID] = {}
        use_ids = True
        for tp, start in partitions:
            position = self._subscriptions.position(tp)
            assert position is not None
            if start is None:
                start = position.offset
                last_epoch = position.offset_epoch
            else:  # a prefetch: after the buffered data
                last_epoch = self._buffer.next_offset_epoch(tp)
            topic_id = ids.get(tp.topic)
            if topic_id is None:
                topic_id = ids[tp.topic] = cluster.topic_id(tp.topic) or _NO_ID
                if topic_id == _NO_ID:
                    use_ids = False
                else:
                    context.names_by_id[topic_id] = tp.topic
            epoch = position.leader_epoch
            if epoch is None:
                epoch = cluster.leader_epoch(tp)
            sent_epoch = -1 if last_epoch is None else last_epoch
            wanted[tp] = SessionPartition(
                topic_id=topic_id,
                fetch_offset=start,
                current_leader_epoch=-1 if epoch is None else epoch,
                last_fetched_epoch=sent_epoch,
                max_bytes=cfg.max_partition_fetch_bytes,
            )
            context.offsets[tp] = start
            context.last_epochs[tp] = sent_epoch
        session = self._sessions.get(node)
        if session is None:
            session = self._sessions[node] = FetchSession()
        plan = context.session = session.plan(wanted, use_ids)
        request = self._request(plan)
        self._in_flight[node] = context

        def handler(now: float, response: FetchResponse | None, error: BaseException | None) -> None:
            self._on_complete(now, node, context, response, error)

        return UnsentRequest(
            node,
            request,
            handler,
            # the broker may hold the request for max_wait_ms before answering
            timeout_ms=None,
            max_version=None if use_ids else LAST_NAME_ONLY_FETCH_VERSION,
        )

    def _request(self, plan: SessionPlan) -> FetchRequest:
        """The Fetch request of `plan`: its partitions to send and to forget."""
        wanted = plan.wanted
        topics: dict[str, FetchRequest.FetchTopic] = {}
        for tp in plan.send:
            part = wanted[tp]
            topic = topics.get(tp.topic)
            if topic is None:
                topic = topics[tp.topic] = FetchRequest.FetchTopic(
                    topic=tp.topic, topic_id=part.topic_id
                )
            topic.partitions.append(
                FetchRequest.FetchPartition(
                    partition=tp.partition,
                    current_leader_epoch=part.current_leader_epoch,
                    fetch_offset=part.fetch_offset,
                    last_fetched_epoch=part.last_fetched_epoch,
                    partition_max_bytes=part.max_bytes,
                )
            )
        forgotten: dict[tuple[str, uuid.UUID], FetchRequest.ForgottenTopic] = {}
        for tp, topic_id in plan.forget:
            gone = forgotten.get((tp.topic, topic_id))
            if gone is None:
                gone = forgotten[tp.topic, topic_id] = FetchRequest.ForgottenTopic(
                    topic=tp.topic, topic_id=topic_id
                )
            gone.partitions.append(tp.partition)
        cfg = self._config
        return FetchRequest(
            replica_id=-1,
            max_wait_ms=cfg.fetch_max_wait_ms,
            min_bytes=cfg.fetch_min_bytes,
            max_bytes=cfg.fetch_max_bytes,
            isolation_level=cfg.isolation,
            session_id=plan.session_id,
            session_epoch=plan.epoch,
            topics=list(topics.values()),
            forgotten_topics_data=list(forgotten.values()),
            rack_id=cfg.client_rack or "",
        )

    # -- responses ------------------------------------------------------------------------

    def _on_complete(
        self,
        now: float,
        node: int,
        context: _InFlightFetch,
        response: FetchResponse | None,
        error: BaseException | None,
    ) -> None:
        if self._in_flight.get(node) is context:
            del self._in_flight[node]
        if self._closing:
            return  # its session is closed (or closing) and the consumer takes no more
        session = self._sessions[node]  # made by _build, with context.session
        plan = context.session
        assert plan is not None
        if error is None:
            assert isinstance(response, FetchResponse)
            code = response.error_code
            before = session.session_id
            session.on_response(plan, code, response.session_id)
            if session.session_id != before or code in SESSION_ERRORS:
                log.debug(
                    "node %d: fetch session %d -> %d (error code %d)",
                    node,
                    before,
                    session.session_id,
                    code,
                )
            if code in SESSION_ERRORS:
                # the session is lost or out of step: the next request (full) starts anew
                if code == FETCH_SESSION_TOPIC_ID_ERROR:
                    self._metadata.request_update(reset_backoff=False)
                return
            if code:
                error = error_for_code(code)(None, node=node)
        else:
            session.on_failure()
        if error is not None:
            for tp in context.offsets:  # back to the leader for what this replica served
                self._clear_read_replica(tp, node)
            self._node_failed(now, node, error)
            return
        assert response is not None  # no error: the response
        self._node_failures.pop(node, None)
        self._node_retry_at.pop(node, None)
        for topic in response.responses:
            name = topic.topic or context.names_by_id.get(topic.topic_id)
            if name is None:
                continue
            for part in topic.partitions:
                tp = TopicPartition(name, part.partition_index)
                fetch_offset = context.offsets.get(tp)
                if fetch_offset is not None:
                    last_epoch = context.last_epochs.get(tp, -1)
                    self._on_partition(
                        now, node, tp, fetch_offset, last_epoch, part, response.node_endpoints
                    )

    def _on_partition(
        self,
        now: float,
        node: int,
        tp: TopicPartition,
        fetch_offset: int,
        last_epoch: int,
        part: FetchResponse.PartitionData,
        endpoints: list[FetchResponse.NodeEndpoint],
    ) -> None:
        """Handle one partition of a Fetch answer; `endpoints`: the answer's NodeEndpoints
        (KIP-951: the brokers its new leaders name)."""
        subs = self._subscriptions
        if not subs.is_assigned(tp):
            return
        st = subs.state(tp)
        if st.position is None or st.fetch_state is not FetchState.FETCHING:
            return  # reset or sent to validation while the request was in flight
        # the data continues the buffered data, or (nothing buffered) starts at the position
        prefetch = self._buffer.has_data(tp)
        expected = self._buffer.next_offset(tp) if prefetch else st.position.offset
        if expected != fetch_offset:
            return  # seek, reset or a consumed prefetch while the request was in flight
        code = part.error_code
        if code == 0 and part.diverging_epoch.epoch >= 0:
            self._on_diverging(tp, fetch_offset, last_epoch, part.diverging_epoch, prefetch)
            return
        if code == 0:
            if part.preferred_read_replica >= 0:  # KIP-392: fetch from this replica next
                st.preferred_read_replica = part.preferred_read_replica
                st.preferred_read_replica_expires_ms = now + self._config.metadata_max_age_ms
            subs.update_watermarks(
                tp,
                high_watermark=part.high_watermark,
                log_start_offset=part.log_start_offset,
                last_stable_offset=part.last_stable_offset,
            )
            records = part.records
            if records is not None and len(records):
                aborted = None
                if part.aborted_transactions:
                    aborted = [(a.producer_id, a.first_offset) for a in part.aborted_transactions]
                self._buffer.add(CompletedFetch(tp, fetch_offset, records, aborted))
            return
        cls = error_for_code(code)
        self._clear_read_replica(tp)  # any error: back to the leader
        if cls is OffsetOutOfRangeError:
            if prefetch:
                # the log moved past the buffered data's end (retention, truncation): hand
                # the buffered records out first; the fetch from the position then resets
                self._partition_retry_at[tp] = now + self._backoff.delay_ms(1)
                return
            if node != self._metadata.cluster.leader_for(tp):
                # a lagging follower: ask the leader (after a pause) before resetting
                self._partition_retry_at[tp] = now + self._backoff.delay_ms(1)
                return
            if subs.default_reset is OffsetResetStrategy.NONE:
                self._report_error(
                    OffsetOutOfRangeError(
                        f"fetch position {fetch_offset} of {tp} is outside the log and "
                        "auto_offset_reset is 'none'; seek() it to continue",
                        topic=tp.topic,
                        partition=tp.partition,
                        offset=fetch_offset,
                    )
                )
                subs.request_offset_reset(tp, OffsetResetStrategy.NONE)
            else:
                subs.request_offset_reset(tp)
            return
        if cls.invalid_metadata or cls.name in ("FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH"):
            leader = part.current_leader
            metadata = self._metadata
            self._awaiting_metadata[tp] = metadata.request_update(reset_backoff=False)
            if leader.leader_epoch >= 0:
                # KIP-951 (Fetch v12+): a newer leader named here is taken at once, in a
                # snapshot newer than the one awaited: the next fetch goes to it, as Java's
                if leader.leader_id < 0 or not metadata.update_leaders(
                    now,
                    {tp: (leader.leader_id, leader.leader_epoch)},
                    [
                        BrokerNode(n.node_id, n.host, n.port, n.rack)
                        for n in endpoints
                    ],
                ):
                    metadata.observe_leader_epoch(tp, leader.leader_epoch)
            return
        attempts = 1 if cls.retriable else 10
        self._partition_retry_at[tp] = now + self._backoff.delay_ms(attempts)
        if not cls.retriable:
            error: BrokerResponseError = cls(None, topic=tp.topic, partition=tp.partition)
            self._report_error(error)

    def _on_diverging(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        last_epoch: int,
        diverging: FetchResponse.EpochEndOffset,
        prefetch: bool,
    ) -> None:
        """The leader's log diverges from what was fetched before `fetch_offset` (KIP-320)."""
        if prefetch:
            # The divergence lies within (or before) the buffered data, which the position has
            # not reached: drop that data; the next fetch, from the position, is checked anew.
            self._buffer.remove(tp)
            return
        error = complete_validation(
            self._subscriptions,
            tp,
            fetch_offset,
            None if last_epoch < 0 else last_epoch,
            diverging.epoch,
            diverging.end_offset,
        )
        if error is not None:
            self._report_error(error)

    def _node_failed(self, now: float, node: int, error: BaseException) -> None:
        attempts = self._node_failures.get(node, 0)
        self._node_failures[node] = attempts + 1
        self._node_retry_at[node] = now + self._backoff.delay_ms(attempts)
        if isinstance(error, KafkaConnectionError) or (
            isinstance(error, KafkaError) and type(error).invalid_metadata
        ):
            self._metadata.request_update(reset_backoff=False)
