"""MetadataManager: the sans-I/O request manager that keeps a ClusterMetadata snapshot fresh.

It decides when to send a MetadataRequest and for which topics; the I/O driver sends it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kafkaio.backoff import ExponentialBackoff
from kafkaio.errors import BrokerResponseError, KafkaConfigError, KafkaError, error_for_code
from kafkaio.metadata.cluster import BrokerNode, ClusterMetadata, TopicPartition
from kafkaio.protocol.messages import MetadataRequest, MetadataResponse
from kafkaio.runtime.requests import PollResult, UnsentRequest


@dataclass(frozen=True, slots=True)
class _InFlight:
    topics: frozenset[str] | None  # None: all topics
    full: bool  # the request covered every topic worth keeping
    version: int  # the version its snapshot will carry
    update_seq: int  # request_update() calls made before it was sent


class MetadataManager:
    """Owns the current ClusterMetadata, the topics of interest and the refresh schedule.

    Drive it like this: call `poll(now)` and send what it returns (encode the request with
    the highest MetadataRequest version both sides support, at least 1: in v0 an empty
    topic list means all topics); deliver the outcome with `on_response` or `on_failure`
    (a timeout or a lost connection is a failure). At most one request is in flight.

    Refreshes happen every `metadata_max_age_ms`, when `request_update` asks for one, when
    topics without metadata are added, and after retriable topic errors. Every request is
    rate limited: `retry_backoff_ms` after a response, growing exponentially up to
    `retry_backoff_max_ms` while requests fail or responses carry retriable errors. Topics
    never seen before are the exception after a clean response: they are fetched at once,
    as the Java client does (a producer that meets 100 new topics one after the other would
    otherwise wait `retry_backoff_ms` for each).

    As in the Java client, responses that show no newer leader epoch (and no new partition
    or recreated topic) count as equivalent: while a client keeps asking for updates to
    retry a request (``request_update(reset_backoff=False)``, e.g. a broker answering
    NOT_LEADER_OR_FOLLOWER while the metadata still names it), the refreshes back off
    exponentially from `retry_backoff_ms` to `retry_backoff_max_ms`. A response with a newer
    epoch, new topics of interest, a failure or an expired snapshot start the count over.

    Each published snapshot has a larger `version` than the one before, so a caller can wait
    for "a snapshot newer than v" (see `request_update`).
    """

    def __init__(
        self,
        *,
        metadata_max_age_ms: float = 300_000,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 1000,
        allow_auto_topic_creation: bool = False,
        backoff_jitter: float = 0.2,
        rng: Callable[[], float] = random.random,
    ) -> None:
        for name, value in (
            ("metadata_max_age_ms", metadata_max_age_ms),
            ("retry_backoff_ms", retry_backoff_ms),
            ("retry_backoff_max_ms", retry_backoff_max_ms),
        ):
            if value < 0:
                raise KafkaConfigError(f"{name} is {value}; use 0 or a positive number")
        self._max_age_ms = metadata_max_age_ms
        self._backoff = ExponentialBackoff(
            retry_backoff_ms, retry_backoff_max_ms, jitter=backoff_jitter, rng=rng
        )
        self._allow_auto_topic_creation = allow_auto_topic_creation
        self._snapshot = ClusterMetadata()
        self._topics: set[str] = set()
        self._all_topics = False
        self._pending_topics: set[str] = set()  # need a refresh soon (new or retriable error)
        self._new_topics = False  # topics never seen are pending: no backoff after success
        self._topic_errors: dict[str, BrokerResponseError] = {}
        self._last_seen_epochs: dict[TopicPartition, int] = {}
        self._update_requested = False
        self._update_seq = 0
        self._in_flight: _InFlight | None = None
        self._next_version = 1
        self._last_success_ms: float | None = None
        self._next_allowed_ms = -math.inf
        self._attempts = 0
        self._equivalent = 0  # responses in a row that showed no newer leader epoch
        self._equivalent_until_ms = -math.inf  # their backoff, from the last response
        self._last_error: BaseException | None = None
        self._listeners: list[Callable[[], None]] = []

    # -- state ---------------------------------------------------------------------------

    @property
    def cluster(self) -> ClusterMetadata:
        """The latest snapshot (empty, version 0, until the first response)."""
        return self._snapshot

    @property
    def version(self) -> int:
        """The latest snapshot's version."""
        return self._snapshot.version

    @property
    def topics(self) -> frozenset[str]:
        """The named topics of interest."""
        return frozenset(self._topics)

    @property
    def all_topics(self) -> bool:
        """True while requests ask for every topic (pattern subscriptions)."""
        return self._all_topics

    @property
    def in_flight(self) -> bool:
        """True between sending a request and receiving its response or failure."""
        return self._in_flight is not None

    @property
    def last_error(self) -> BaseException | None:
        """Why the last request failed; None once a response arrives."""
        return self._last_error

    def topic_errors(self) -> dict[str, BrokerResponseError]:
        """Fatal errors of topics of interest from their latest response (e.g. not authorized).

        They are not retried early; a topic's entry goes away when a later response has no
        error for it or when it stops being of interest. Retriable errors are not listed:
        they are retried, and `cluster.topics[name].error` shows the latest code.
        """
        return dict(self._topic_errors)

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` whenever a new snapshot replaces `cluster` (e.g. to drop what
        was derived from the old one)."""
        self._listeners.append(listener)

    # -- what to fetch -------------------------------------------------------------------

    def set_topics(self, topics: Iterable[str]) -> bool:
        """Make `topics` the named topics of interest; returns True if the set changed."""
        new = set(topics)
        if new == self._topics:
            return False
        self._forget(self._topics - new)
        self._watch(new - self._topics)
        self._topics = new
        return True

    def add_topics(self, topics: Iterable[str]) -> bool:
        """Add topics of interest; returns True if any was new. New unknown topics are
        fetched soon, in a request for just them."""
        added = set(topics) - self._topics
        self._watch(added)
        self._topics |= added
        return bool(added)

    def remove_topics(self, topics: Iterable[str]) -> bool:
        """Remove topics of interest; returns True if any was removed."""
        removed = self._topics.intersection(topics)
        self._forget(removed)
        self._topics -= removed
        return bool(removed)

    def request_all_topics(self, enabled: bool = True) -> None:
        """Ask for every topic in the cluster (pattern subscriptions), or stop doing so.

        Switching on schedules a refresh; named topics stay tracked for errors and retries.
        """
        if enabled and not self._all_topics:
            self._update_requested = True
            self._update_seq += 1
        self._all_topics = enabled

    def request_update(self, *, reset_backoff: bool = True) -> int:
        """Ask for a full refresh as soon as the backoff allows (e.g. on NOT_LEADER).

        ``reset_backoff=False`` (to retry an operation: a leader moved) keeps the backoff of
        equivalent responses (see the class docstring), so a broker that keeps answering
        NOT_LEADER_OR_FOLLOWER while the metadata does not change is not met with a refresh
        every `retry_backoff_ms`; True (new metadata is wanted) starts it over.

        Returns a version v: any snapshot with `version > v` was built from a request sent
        after this call (a request already in flight does not count).
        """
        if reset_backoff:
            self._reset_equivalent()
        self._update_requested = True
        self._update_seq += 1
        if self._in_flight is not None:
            return self._in_flight.version
        return self._next_version - 1

    def observe_leader_epoch(self, tp: TopicPartition, epoch: int) -> bool:
        """Record a leader epoch seen elsewhere (a fetch response, a committed offset).

        If it is newer than the snapshot's, responses with older epochs are ignored for
        that partition from now on and a refresh of its topic is scheduled; returns True.
        """
        current = self._snapshot.leader_epoch(tp)
        if (current is not None and epoch <= current) or epoch <= self._last_seen_epochs.get(
            tp, -1
        ):
            return False
        self._last_seen_epochs[tp] = epoch
        self._pending_topics.add(tp.topic)
        return True

    def update_leaders(
        self,
        now: float,
        leaders: Mapping[TopicPartition, tuple[int, int]],
        nodes: Iterable[BrokerNode] = (),
    ) -> set[TopicPartition]:
        """KIP-951: take the new leaders a Produce or Fetch answer names at once,
        ``leaders[tp] = (leader id, leader epoch)``, with the brokers it lists (`nodes`).

        Only a leader whose epoch is newer than the cached one is taken (see
        `ClusterMetadata.with_leaders`); then a new snapshot is published and the
        partitions that moved are returned, so a retry goes to the new leader without
        waiting for a Metadata round trip. The caller still asks for a refresh.
        """
        snapshot, moved = self._snapshot.with_leaders(leaders, nodes, now, self._next_version)
        if not moved:
            return set()
        self._next_version += 1
        self._snapshot = snapshot
        for tp in moved:
            epoch = snapshot.leader_epoch(tp)
            if epoch is not None and epoch >= self._last_seen_epochs.get(tp, -1):
                self._last_seen_epochs.pop(tp, None)  # caught up with what was seen
        for listener in self._listeners:
            listener()
        return set(moved)

    # -- scheduling ----------------------------------------------------------------------

    def time_to_next_update(self, now: float) -> float:
        """Milliseconds until a request may be sent (0: now; math.inf: one is in flight)."""
        if self._in_flight is not None:
            return math.inf
        if self._update_requested or self._pending_topics or self._last_success_ms is None:
            due = 0.0
        else:
            due = self._last_success_ms + self._max_age_ms - now
        if self._new_topics and self._attempts == 0:
            return 0.0  # the last request went well: new topics need not wait
        allowed = self._next_allowed_ms
        if self._equivalent_until_ms > allowed:
            # equivalent responses: but an expiring snapshot is refreshed on time
            expires = math.inf if self._last_success_ms is None else (
                self._last_success_ms + self._max_age_ms
            )
            allowed = max(allowed, min(self._equivalent_until_ms, expires))
        return max(due, allowed - now, 0.0)

    def _expired(self, now: float) -> bool:
        last = self._last_success_ms
        return last is None or now >= last + self._max_age_ms

    def _reset_equivalent(self) -> None:
        self._equivalent = 0
        self._equivalent_until_ms = -math.inf

    def poll(self, now: float) -> PollResult:
        """Return the MetadataRequest to send now, if any, and when to poll next."""
        wait = self.time_to_next_update(now)
        if wait > 0:
            return PollResult([], wait)
        expired = self._expired(now)
        if expired:
            self._reset_equivalent()  # as Java: a periodic refresh starts the count over
        full = self._update_requested or expired or self._all_topics or not self._pending_topics
        topics: frozenset[str] | None
        if not full:
            topics = frozenset(self._pending_topics)
        elif self._all_topics:
            topics = None
        else:
            topics = frozenset(self._topics)
        self._in_flight = _InFlight(topics, full, self._next_version, self._update_seq)
        self._next_version += 1
        self._new_topics = False  # this request asks for them
        request = MetadataRequest(
            topics=None
            if topics is None
            else [MetadataRequest.MetadataRequestTopic(name=name) for name in sorted(topics)],
            allow_auto_topic_creation=self._allow_auto_topic_creation,
        )
        return PollResult([UnsentRequest(None, request, self._on_complete)], math.inf)

    # -- outcomes ------------------------------------------------------------------------

    def on_response(self, now: float, response: MetadataResponse) -> None:
        """Publish a new snapshot from the response to the request in flight."""
        in_flight, self._in_flight = self._in_flight, None
        if not response.brokers:
            self._failed(
                now,
                KafkaError(
                    "metadata response lists no brokers; ignoring it and retrying after backoff"
                ),
            )
            return
        if in_flight is None:  # unsolicited: apply it, keeping every cached topic
            in_flight = _InFlight(frozenset(), False, self._next_version, -1)
            self._next_version += 1
        elif in_flight.version <= self._snapshot.version:
            # a leader update (update_leaders) published a snapshot meanwhile: stay ahead
            in_flight = _InFlight(
                in_flight.topics, in_flight.full, self._next_version, in_flight.update_seq
            )
            self._next_version += 1
        previous = self._snapshot
        snapshot = previous.with_response(
            response,
            now,
            full=in_flight.full,
            version=in_flight.version,
            min_leader_epochs=self._last_seen_epochs,
        )
        self._snapshot = snapshot
        for listener in self._listeners:
            listener()
        if in_flight.full:  # a partial response leaves the other topics as old as they were
            self._last_success_ms = now
        self._last_error = None
        retry = self._check_topics(response, snapshot) | self._check_epochs(previous, snapshot)
        if in_flight.topics is None:
            self._pending_topics.clear()
        else:
            self._pending_topics -= in_flight.topics
        self._pending_topics |= retry
        if in_flight.full and in_flight.update_seq == self._update_seq:
            self._update_requested = False
        self._attempts = self._attempts + 1 if retry else 0
        self._next_allowed_ms = now + self._retry_delay_ms()
        if _newer_epochs(previous, snapshot, response):
            self._reset_equivalent()
        else:
            self._equivalent += 1
            self._equivalent_until_ms = now + self._backoff.delay_ms(self._equivalent - 1)

    def _on_complete(self, now: float, response: object, error: BaseException | None) -> None:
        if error is not None:
            self.on_failure(now, error)
        else:
            assert isinstance(response, MetadataResponse)
            self.on_response(now, response)

    def on_failure(self, now: float, error: BaseException) -> None:
        """The request in flight failed (connection lost, timeout...): retry after backoff."""
        self._in_flight = None
        self._failed(now, error)

    # -- internals -----------------------------------------------------------------------

    def _failed(self, now: float, error: BaseException) -> None:
        self._last_error = error
        self._reset_equivalent()  # as Java: failures back off by their own count
        self._attempts += 1
        self._next_allowed_ms = now + self._retry_delay_ms()

    def _retry_delay_ms(self) -> float:
        # retry_backoff_ms after a clean response and after the first failure, then doubling.
        return self._backoff.delay_ms(max(self._attempts - 1, 0))

    def _watch(self, added: set[str]) -> None:
        topics = self._snapshot.topics
        for name in added:
            info = topics.get(name)
            if info is None or info.error:
                self._pending_topics.add(name)
            if info is None:
                self._new_topics = True
                self._reset_equivalent()

    def _forget(self, removed: set[str]) -> None:
        if not removed:
            return
        self._pending_topics -= removed
        for name in removed:
            self._topic_errors.pop(name, None)
        for tp in [tp for tp in self._last_seen_epochs if tp.topic in removed]:
            del self._last_seen_epochs[tp]

    def _check_topics(self, response: MetadataResponse, snapshot: ClusterMetadata) -> set[str]:
        """Record fatal topic errors; return topics of interest that need a retry."""
        retry: set[str] = set()
        for t in response.topics:
            name = t.name if t.name is not None else snapshot.topic_name(t.topic_id)
            if name is None or name not in self._topics:
                continue
            if t.error_code:
                cls = error_for_code(t.error_code)
                if cls.retriable or cls.invalid_metadata:
                    self._topic_errors.pop(name, None)
                    retry.add(name)
                else:
                    self._topic_errors[name] = cls(None, topic=name)
                continue
            self._topic_errors.pop(name, None)
            info = snapshot.topics.get(name)
            if info is not None and any(snapshot.leader_for(p.tp) is None for p in info.partitions):
                retry.add(name)
        return retry

    def _check_epochs(self, previous: ClusterMetadata, snapshot: ClusterMetadata) -> set[str]:
        """Forget epochs the snapshot has caught up with; return topics still behind."""
        behind: set[str] = set()
        for tp, epoch in list(self._last_seen_epochs.items()):
            current = snapshot.leader_epoch(tp)
            old_id, new_id = previous.topic_id(tp.topic), snapshot.topic_id(tp.topic)
            recreated = old_id is not None and new_id is not None and old_id != new_id
            if current is None or current >= epoch or recreated:
                del self._last_seen_epochs[tp]
            elif self._all_topics or tp.topic in self._topics:
                behind.add(tp.topic)
        return behind


def _newer_epochs(
    previous: ClusterMetadata, snapshot: ClusterMetadata, response: MetadataResponse
) -> bool:
    """Whether `response` made progress, as the Java client judges it: a partition of a
    topic in it is new, has a newer leader epoch or none (an old broker, a partition in
    error), or its topic was recreated (a new topic id)."""
    old_topics, new_topics = previous.topics, snapshot.topics
    for t in response.topics:
        name = t.name if t.name is not None else snapshot.topic_name(t.topic_id)
        if name is None:
            continue
        info = new_topics.get(name)
        old = old_topics.get(name)
        if info is None or info is old:  # unchanged (shared) or dropped
            continue
        if old is None or old.topic_id != info.topic_id:
            if info.partitions:
                return True
            continue
        for p in info.partitions:
            before = previous.leader_epoch(p.tp)
            if p.leader_epoch is None or before is None or p.leader_epoch > before:
                return True
    return False
