"""kafkaio.Consumer: the public consumer, an application-side facade over the reactor.

The network task (NetworkDriver) runs the request managers; this class turns calls into
application events, drains background events and collects records from the fetch buffer.
"""

from __future__ import annotations

import inspect
import logging
import math
import re
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Generator,
    Iterable,
    Mapping,
    Sequence,
)
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from kafkaio.config import split_connection_options
from kafkaio.consumer.config import CONSUMER_OPTIONS, ConsumerConfig
from kafkaio.consumer.errors import NoOffsetForPartitionError
from kafkaio.consumer.events import (
    AssignmentChangeEvent,
    AwaitPositionsEvent,
    CommitEvent,
    FetchCommittedEvent,
    LeaveGroupOnCloseEvent,
    ListOffsetsEvent,
    PauseEvent,
    PollEvent,
    RebalanceStepDoneEvent,
    ResetOffsetsEvent,
    ResumeEvent,
    SeekEvent,
    SubscriptionChangeEvent,
    UnsubscribeEvent,
)
from kafkaio.consumer.fetch_buffer import FetchBuffer, FetchCollector
from kafkaio.consumer.fetcher import FetchManager
from kafkaio.consumer.group.commit import CommitManager
from kafkaio.consumer.group.consumer_membership import ConsumerMembershipManager
from kafkaio.consumer.group.coordinator import CoordinatorManager
from kafkaio.consumer.group.member import GroupMembership
from kafkaio.consumer.group.membership import ClassicMembershipManager
from kafkaio.consumer.handlers import ConsumerEventHandlers
from kafkaio.consumer.interceptors import ConsumerInterceptors
from kafkaio.consumer.iteration import IterationGate, RecordIterator
from kafkaio.consumer.listener import RebalanceListener
from kafkaio.consumer.offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, OffsetsManager
from kafkaio.consumer.rebalance import GroupEventBridge, Partitions
from kafkaio.consumer.record import ConsumerRecord, identity
from kafkaio.consumer.record_queue import RecordQueue
from kafkaio.consumer.subscription import (
    FetchState,
    OffsetResetStrategy,
    PartitionState,
    SubscriptionState,
    SubscriptionType,
)
from kafkaio.consumer.topics import SubscribedTopicsManager
from kafkaio.consumer.validation import PositionValidationManager
from kafkaio.errors import (
    ClientClosedError,
    KafkaConfigError,
    KafkaError,
    RecordDeserializationError,
)
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.metadata.manager import MetadataManager
from kafkaio.metrics import (
    GroupHealth,
    HealthSnapshot,
    MetricsRegistry,
    MetricsSnapshot,
    make_registry,
)
from kafkaio.metrics.connection import ConnectionMetrics
from kafkaio.metrics.consumer import ConsumerMetrics, RebalanceTimer
from kafkaio.metrics.timing import TimedManager
from kafkaio.net.manager import ConnectionManager, parse_bootstrap_servers
from kafkaio.runtime.driver import NetworkDriver, now_ms
from kafkaio.runtime.events import ApplicationEvent, ApplicationEventQueue, BackgroundEventQueue
from kafkaio.runtime.processor import ApplicationEventProcessor
from kafkaio.runtime.requests import RequestManager
from kafkaio.runtime.shell import (
    AsyncClient,
    ClientShell,
    Lifecycle,
    timeout_ms_arg,
)
from kafkaio.runtime.wakeup import Wakeup
from kafkaio.serde.base import FieldCodec, SerializationContext, deserialize
from kafkaio.structs import ConsumerGroupMetadata, OffsetAndMetadata, OffsetAndTimestamp
from kafkaio.validate import (
    check_bool,
    check_max_records,
    check_partition,
    check_topic,
    check_wait_ms,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from kafkaio.options import ConsumerOptions

log = logging.getLogger("kafkaio.consumer")


Records = dict[TopicPartition, list[ConsumerRecord[Any, Any]]]
CommitCallback = Callable[[dict[TopicPartition, OffsetAndMetadata], "BaseException | None"], Any]

# The driver polls at least this often, so a wait also notices a stopped driver.
_CHECK_INTERVAL_S = 1.0
# getone()/__anext__ collect this many records at once (capped by max_poll_records).
_ITERATION_BATCH = 500


class Consumer(AsyncClient):
    """An asyncio/trio Kafka consumer (anyio). Use ``async with Consumer(...) as consumer``.

    Group subscription: ``Consumer("t1", "t2", group_id="g")`` or ``subscribe(topics=...,
    pattern=..., listener=...)``; the group assigns partitions (``group_protocol="classic"``:
    JoinGroup/SyncGroup, eager or, with ``partition_assignment_strategy="cooperative-sticky"``,
    cooperative rebalancing; ``group_protocol="consumer"``: KIP-848, assigned by the broker), offsets are committed automatically (``enable_auto_commit``) or with
    ``commit()``/``commit_async()``. Manual assignment: ``assign([TopicPartition("t", 0)])``
    (with a ``group_id``, positions start from the group's committed offsets). Then
    ``getmany()``, ``getone()`` or ``async for record in consumer``. Options use the
    Java/aiokafka names (see ConsumerConfig and ConnectionConfig); an unknown or invalid
    option raises KafkaConfigError here.

    ``start()``/``close()`` work too, called from the same task (``start`` enters the task
    group that runs the network task; ``close`` leaves it). Rebalance listeners and commit
    callbacks run in the application's task, inside the consumer's calls.
    """

    def __init__(
        self,
        *topics: str,
        bootstrap_servers: str | Sequence[str] = "localhost:9092",
        group_id: str | None = None,
        metrics_enabled: bool = True,
        **options: Unpack[ConsumerOptions],
    ) -> None:
        options.setdefault("client_id", "kafkaio-consumer")
        check_bool("metrics_enabled", metrics_enabled)
        parse_bootstrap_servers(bootstrap_servers)  # a wrong value fails here, not in start()
        conn_config, own = split_connection_options(
            options, CONSUMER_OPTIONS - {"group_id"}, "Consumer"
        )
        self._config = config = ConsumerConfig(group_id=group_id, **own)
        if config.fetch_max_wait_ms >= conn_config.request_timeout_ms:
            raise KafkaConfigError(
                f"fetch_max_wait_ms ({config.fetch_max_wait_ms}) must be lower than "
                f"request_timeout_ms ({conn_config.request_timeout_ms}), or fetches time out"
            )
        self._bootstrap_servers = bootstrap_servers
        self._conn_config = conn_config
        # metrics (metrics_enabled=False: a null registry, recording does nothing)
        self._registry = make_registry(conn_config.client_id or "", "consumer", metrics_enabled)
        self._m = ConsumerMetrics(self._registry)
        self._conn_metrics = ConnectionMetrics(self._registry)
        self._last_poll_ms: float | None = None
        self._subscriptions = subs = SubscriptionState(config.reset_strategy)
        self._metadata = MetadataManager(
            metadata_max_age_ms=config.metadata_max_age_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
            allow_auto_topic_creation=config.allow_auto_create_topics,
        )
        self._buffer = FetchBuffer()
        self._background = BackgroundEventQueue()
        self._background_events = self._background.events  # the iterator's fast path tests it
        self._events = ApplicationEventQueue()
        self._processor = ApplicationEventProcessor(self._events)
        self._fetcher = FetchManager(
            self._subscriptions, self._metadata, self._buffer, config, self._background.put_error
        )
        self._offsets = OffsetsManager(
            self._subscriptions,
            self._metadata,
            isolation_level=config.isolation,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
            initialize_without_group=group_id is None,
        )
        self._pending = RecordQueue()
        self._listener: RebalanceListener | None = None
        self._coordinator: CoordinatorManager | None = None
        self._membership: GroupMembership | None = None
        self._commits: CommitManager | None = None
        self._bridge: GroupEventBridge | None = None
        managers: list[RequestManager] = [self._processor]
        if group_id is not None:
            managers += self._group_managers(group_id, subs, config, conn_config.request_timeout_ms)
        self._validation = PositionValidationManager(
            subs,
            self._metadata,
            self._background.put_error,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
        )
        fetcher: RequestManager = self._fetcher
        if self._registry.enabled:
            fetcher = TimedManager(self._fetcher, self._m.fetch_latency)
        managers += [self._offsets, self._validation, fetcher]
        self._managers = managers
        self._m.bind_gauges(
            lags=self._lags,
            assigned_partitions=lambda now: float(len(subs.assigned_partitions())),
            last_poll_seconds_ago=self._seconds_since_poll,
        )
        self._processor.register(ListOffsetsEvent, self._offsets.list_offsets)
        self._processor.register(AwaitPositionsEvent, self._offsets.await_positions)
        key_codec = FieldCodec(config.key_deserializer, "key", deserializer=True)
        value_codec = FieldCodec(config.value_deserializer, "value", deserializer=True)
        # Plain deserializers run inline in the collector; async ones (or ones taking a
        # context) run in `_deserialize`, awaited in the application's task.
        self._codecs: tuple[FieldCodec, FieldCodec] | None = None
        if not (key_codec.plain and value_codec.plain):
            self._codecs = (key_codec, value_codec)
        self._collector = FetchCollector(
            self._subscriptions,
            self._buffer,
            read_committed=config.isolation == 1,
            check_crcs=config.check_crcs,
            key_deserializer=identity if self._codecs else config.key_deserializer,
            value_deserializer=identity if self._codecs else config.value_deserializer,
        )
        self._data_ready = Wakeup()  # set when records or background events arrive
        self._buffer.on_data = self._notify
        self._background.on_put = self._notify
        self._shell = ClientShell(
            "consumer",
            bootstrap_servers,
            conn_config,
            metadata=self._metadata,
            managers=self._managers,
            extra_nodes=None if self._coordinator is None else self._coordinator.addresses,
            conn_metrics=self._conn_metrics if self._registry.enabled else None,
        )
        self._driver: NetworkDriver | None = None  # the shell's, once started
        self._connections: ConnectionManager | None = None
        # no more application calls: set by close() once its steps ran (the listener's
        # callbacks may still commit while the consumer leaves the group)
        self._closed = False
        # closed with the consumer, and while an unsubscribe is under way: `async for` then
        # steps through __anext__ (see iteration.py)
        self._iteration_gate = IterationGate()
        self._unsubscribing: _Unsubscribe | None = None  # an unsubscribe() not finished yet
        self._deserializing: list[_Deserializing] = []  # polls awaiting async deserializers
        self._poll_event: PollEvent | None = None  # the last poll told to the network task
        # the network task applies the application's events (kafkaio.consumer.handlers); the
        # queue tells the application side when it has taken them (getmany waits for that)
        self._interceptors = ConsumerInterceptors(config.interceptors)
        if self._commits is not None and self._interceptors.watches_commits:
            interceptors, background = self._interceptors, self._background

            def committed(offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
                # the network task saw the commit succeed; on_commit runs in the app's task
                background.put_callback(lambda: interceptors.on_commit(offsets))

            self._commits.on_committed = committed
        self._handlers = ConsumerEventHandlers(
            self._processor,
            subs,
            self._metadata,
            self._buffer,
            self._membership,
            self._bridge,
            self._commits,
        )
        self._events.on_drained = self._notify
        if topics:
            self.subscribe(topics)

    def _group_managers(
        self,
        group_id: str,
        subs: SubscriptionState,
        config: ConsumerConfig,
        request_timeout_ms: int,
    ) -> list[RequestManager]:
        """Coordinator, subscribed topics, membership, commits and the event bridge, in the
        order the network task polls them (before offsets and fetches)."""
        backoff = (config.retry_backoff_ms, config.retry_backoff_max_ms)
        self._coordinator = coordinator = CoordinatorManager(group_id, *backoff)
        membership: GroupMembership
        if config.group_protocol == "consumer":  # KIP-848: the coordinator assigns
            membership = ConsumerMembershipManager(
                group_id,
                subs,
                coordinator,
                lambda: self._metadata.cluster,
                request_metadata=self._metadata.request_update,
                group_instance_id=config.group_instance_id,
                remote_assignor=config.group_remote_assignor,
                rebalance_timeout_ms=config.rebalance_timeout_ms,
                max_poll_interval_ms=config.max_poll_interval_ms,
                retry_backoff_ms=backoff[0],
                retry_backoff_max_ms=backoff[1],
                rack_id=config.client_rack,
            )
        else:
            membership = ClassicMembershipManager(
                group_id,
                subs,
                coordinator,
                lambda: self._metadata.cluster,
                assignors=config.assignors(),
                group_instance_id=config.group_instance_id,
                session_timeout_ms=config.session_timeout_ms,
                rebalance_timeout_ms=config.rebalance_timeout_ms,
                heartbeat_interval_ms=config.heartbeat_interval_ms,
                max_poll_interval_ms=config.max_poll_interval_ms,
                request_timeout_ms=request_timeout_ms,
                retry_backoff_ms=backoff[0],
                retry_backoff_max_ms=backoff[1],
                rack_id=config.client_rack,
            )
        self._membership = membership
        if self._registry.enabled:
            membership.on_transition = RebalanceTimer(self._m)
        # the one lookup of committed offsets for new partitions (subscribe and assign)
        self._commits = commits = CommitManager(
            group_id,
            subs,
            coordinator,
            membership,
            auto_commit=config.enable_auto_commit,
            auto_commit_interval_ms=config.auto_commit_interval_ms,
            retry_backoff_ms=backoff[0],
            retry_backoff_max_ms=backoff[1],
            require_stable=config.isolation == 1,
            initialize_positions=True,
            validate_positions=True,
            consumed_offsets=self._consumed_offsets,
        )
        topics = SubscribedTopicsManager(
            subs,
            self._metadata,
            lambda: membership.group_subscription,
            exclude_internal_topics=config.exclude_internal_topics,
        )
        self._bridge = bridge = GroupEventBridge(
            membership, [coordinator, commits], self._background, _RebalanceSteps(self)
        )
        self._processor.register(FetchCommittedEvent, self._on_fetch_committed)
        self._processor.register(CommitEvent, self._on_commit)
        return [topics, coordinator, membership, commits, bridge]

    @property
    def config(self) -> ConsumerConfig:
        """The validated consumer settings."""
        return self._config

    @property
    def _request_managers(self) -> list[RequestManager]:
        """The managers the network task polls, in order (the group managers go here)."""
        return list(self._managers)

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the network task and load cluster metadata: raises BootstrapError when no
        broker answers within default_api_timeout_ms (a fatal error, such as a refused
        login, as it is). A consumer starts once."""
        if self._closed:
            raise KafkaError("the consumer is closed; create a new Consumer")
        await self._shell.start(self._config.default_api_timeout_ms)
        self._driver, self._connections = self._shell.driver, self._shell.connections
        assert self._driver is not None
        self._events.set_wakeup(self._driver.wakeup)

    async def close(self, timeout_ms: float | None = None) -> None:
        """Commit consumed offsets (auto-commit) and leave the group, then stop the network
        task and close connections, within ``timeout_ms`` (default 30 s, as Java's).
        Safe to call twice, from another task than start() and under a cancel scope. An
        error raised while leaving (the rebalance listener's, say) is raised once the
        consumer is closed, as Java's close() does (``async with`` only logs it when its
        body is already raising)."""
        limit = timeout_ms_arg(
            timeout_ms, None, self._config.default_api_timeout_ms, "Consumer.close"
        )
        errors: list[Exception] = []

        async def leave() -> None:
            try:
                await self._complete_unsubscribe()
            except Exception as exc:  # closing goes on; raised once closed, as a leave error
                errors.append(exc)
            try:
                if self._shell.task_alive and self._commits is not None:
                    error = await self._close_group()
                    if error is not None:
                        errors.insert(0, error)
            except Exception as exc:  # closing goes on: the network task must stop
                log.warning("closing the consumer's group membership failed: %r", exc)
            # then the network task's close phase closes the fetch sessions (FetchManager's
            # poll_on_close) and fails group operations still pending (CommitManager's)

        def stop_calls() -> None:
            self._closed = True
            self._iteration_gate.open = False
            self._notify()
            self._interceptors.close()

        if self._shell.state is Lifecycle.NEW:
            stop_calls()
        await self._shell.close(limit, leave, stop_calls)
        if errors:
            raise errors[0]

    async def _close_group(self) -> Exception | None:
        """Leave the group (or commit, with auto-commit and assign()); the first error
        raised while leaving, for close() to raise once closed."""
        if self._view()[0] in (SubscriptionType.AUTO_TOPICS, SubscriptionType.AUTO_PATTERN):
            event = LeaveGroupOnCloseEvent(math.inf)
            return await self._leave(event, self._config.default_api_timeout_ms / 1000)
        if self._config.enable_auto_commit and self._subscriptions.assigned_partitions():
            try:
                await self.commit(timeout_ms=self._config.default_api_timeout_ms)
            except KafkaError as exc:
                log.warning("committing consumed offsets on close failed: %s", exc)
        return None

    async def _leave(
        self,
        event: LeaveGroupOnCloseEvent | UnsubscribeEvent,
        timeout_s: float,
        *,
        submit: bool = True,
    ) -> Exception | None:
        """Submit a leaving event (the network task revokes and sends LeaveGroup) and run
        what comes back (the revocation: commit, listener) in this task until the member is
        out. Leaving goes on past errors (the listener's, the group's): the first is
        returned, for the caller to raise once it is done."""
        if submit:
            self._events.put(event)
        # the member being out wakes this task (not only records or background events)
        event.add_done_callback(lambda _: self._notify())
        first_error: Exception | None = None
        with anyio.move_on_after(timeout_s) as scope:
            while True:
                try:
                    await self._run_background()
                except Exception as exc:  # group errors and listener errors: leave anyway
                    log.warning("while leaving the group: %r", exc)
                    first_error = first_error or exc
                if event.done and not len(self._background):
                    break
                if not self._shell.task_alive:
                    break
                await self._wait_for_data(_CHECK_INTERVAL_S)
        if scope.cancelled_caught:
            membership = self._membership
            log.warning(
                "group %r: leaving did not finish within %g s (state %s); the coordinator "
                "removes the member after session_timeout_ms",
                None if membership is None else membership.group_id,
                timeout_s,
                None if membership is None else membership.state.value,
            )
        return first_error

    def _check_not_closed(self, what: str) -> None:
        """Calls that configure what to consume work before start(), not after close()."""
        if self._closed:
            raise KafkaError(f"{what}: the consumer is closed; create a new Consumer")

    def _check(self) -> NetworkDriver:
        if self._closed:
            raise ClientClosedError("the consumer is closed; create a new Consumer")
        return self._shell.check(closing_ok=True)

    def _notify(self) -> None:
        self._data_ready.set()

    # -- metrics and health ---------------------------------------------------------------

    @property
    def metrics_registry(self) -> MetricsRegistry:
        """The registry behind ``metrics()`` (for exporters, e.g. kafkaio.metrics.otel)."""
        return self._registry

    def metrics(self) -> MetricsSnapshot:
        """The consumer's metrics now, under the Java client's names, as a plain dict:
        ``{"records-consumed-total": ..., "fetch-latency-avg": ..., "connection-count": ...,
        "partitions": {"topic-0": {"records-lag": ...}}}`` ({} with metrics_enabled=False).
        Rates and averages cover the last 30-60 s; ``*-total`` count since the start."""
        return self._registry.snapshot()

    def health(self) -> HealthSnapshot:
        """Connections, group membership and lag now (for health endpoints)."""
        now = now_ms()
        connections = self._shell.connection_states()
        group = None
        membership = self._membership
        if membership is not None:
            generation = membership.generation
            group = GroupHealth(
                membership.group_id,
                membership.state.value,
                generation.generation_id,
                generation.member_id,
                len(self.assignment()),
            )
        lags: dict[str, int | None] = {}
        known = self._lags(now)
        for tp in sorted(self.assignment()):
            lag = known.get((tp.topic, str(tp.partition)))
            lags[f"{tp.topic}-{tp.partition}"] = None if lag is None else int(lag)
        driver = self._driver
        fatal = None if driver is None else driver.fatal_error
        if fatal is None and membership is not None:
            fatal = membership.fatal_error
        since = self._seconds_since_poll(now)
        return HealthSnapshot(
            self._conn_config.client_id or "",
            "consumer",
            self._shell.running and not self._closed,
            connections,
            group,
            lags,
            None if since < 0 else since,
            None if fatal is None else repr(fatal),
        )

    def _record_poll(self, records: Records, consumed_bytes: int) -> None:
        """Poll metrics: records and bytes handed out, lag of the partitions that had some
        (per poll and partition, never per record)."""
        m = self._m
        now = self._last_poll_ms or 0.0
        m.poll.record(1.0, now)
        count = 0
        subs = self._subscriptions
        for tp, batch in records.items():
            count += len(batch)
            lag = subs.lag(tp)
            if lag is not None:
                m.partition_lag.get(tp.topic, str(tp.partition)).record(lag, now)
        m.records_consumed.record(count, now)
        if consumed_bytes > 0:
            m.bytes_consumed.record(consumed_bytes, now)

    def _lags(self, now: float) -> dict[tuple[str, ...], float]:
        """records-lag per assigned partition: high watermark minus the next offset to hand
        out (records collected but not handed out yet still count as lag)."""
        subs = self._subscriptions
        pending = self._pending.first_pending()
        out: dict[tuple[str, ...], float] = {}
        for tp in subs.assigned_partitions():
            st = subs.state(tp)
            if st.high_watermark is None or st.position is None:
                continue
            first = pending.get(tp)
            position = st.position.offset if first is None else first.offset
            out[(tp.topic, str(tp.partition))] = float(max(st.high_watermark - position, 0))
        return out

    def _seconds_since_poll(self, now: float) -> float:
        """last-poll-seconds-ago (-1 before the first poll)."""
        if self._last_poll_ms is None:
            return -1.0
        return (now - self._last_poll_ms) / 1000.0

    # -- subscription and assignment ------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | str = (),
        *,
        pattern: str | re.Pattern[str] | None = None,
        listener: RebalanceListener | None = None,
    ) -> None:
        """Let the group assign partitions of `topics`, or of every topic matching `pattern`
        (a regex matched in full, re-evaluated on each metadata refresh). Needs a group_id.

        The member joins the group at the next ``getmany()``/``getone()``/iteration.
        `listener` (a RebalanceListener) hears about revoked, assigned and lost partitions.
        Calling it again replaces the subscription (the group rebalances).
        """
        self._check_not_closed("subscribe()")
        self._check_no_unsubscribe("subscribe()")
        if self._membership is None:
            raise KafkaConfigError(
                "subscribe() needs a group_id (the group assigns partitions); pass "
                "group_id=... to Consumer, or use assign() with explicit partitions"
            )
        if listener is not None and not callable(getattr(listener, "on_partitions_revoked", None)):
            raise KafkaConfigError(
                f"listener must be a RebalanceListener (got {listener!r}); subclass "
                "kafkaio.consumer.RebalanceListener and override its methods"
            )
        names = [check_topic(t) for t in ([topics] if isinstance(topics, str) else topics)]
        event = SubscriptionChangeEvent(math.inf)
        if pattern is not None:
            if names:
                raise KafkaConfigError("subscribe() takes topics or a pattern, not both")
            try:
                event.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
            except re.error as exc:
                raise KafkaConfigError(
                    f"subscribe() pattern {pattern!r} is invalid: {exc}"
                ) from None
            self._check_kind(SubscriptionType.AUTO_PATTERN)
        else:
            if not names:
                raise KafkaConfigError(
                    "subscribe() needs topics or a pattern; call unsubscribe() to stop consuming"
                )
            self._check_kind(SubscriptionType.AUTO_TOPICS)
            event.topics = tuple(names)
        self._listener = listener
        self._events.put(event)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions (no group management); replaces the assignment."""
        self._check_not_closed("assign()")
        self._check_no_unsubscribe("assign()")
        parts = []
        for tp in partitions:
            if not isinstance(tp, tuple) or len(tp) != 2:
                raise KafkaConfigError(
                    f"assign() takes TopicPartition(topic, partition), got {tp!r}"
                )
            parts.append(TopicPartition(check_topic(tp[0]), check_partition(tp[1])))
        self._check_kind(SubscriptionType.USER_ASSIGNED if parts else SubscriptionType.NONE)
        self._auto_commit_before_reassign()
        self._events.put(AssignmentChangeEvent(math.inf, tuple(parts)))
        kept = set(parts)
        self._discard_pending(self._undelivered_partitions() - kept)

    def _auto_commit_before_reassign(self) -> None:
        """assign() with a group and auto-commit: commit what was consumed so far, before the
        partitions it drops are gone (as Java's assign(), asynchronously)."""
        driver = self._driver
        if (
            self._membership is None
            or not self._config.enable_auto_commit
            or self._subscriptions.has_auto_assignment()
            or driver is None
            or not driver.running
        ):
            return
        offsets = self._consumed_offsets()
        if offsets:
            self._events.put(CommitEvent(self._deadline(None), offsets=offsets, retry=False))

    def unsubscribe(self) -> Awaitable[None]:
        """Stop consuming: leave the group (revoking partitions: auto-commit, then the
        listener) when subscribed, and drop the subscription or assignment. An error raised
        while leaving (the rebalance listener's, say) is raised once that is done.

        ``await consumer.unsubscribe()`` waits for all that. Called without ``await`` (as
        aiokafka's unsubscribe() is called) it works too: no record of the subscription is
        handed out from this call on, and the leave runs in your task at the next
        getmany()/getone()/``async for``/close(); subscribe() or assign() before then raise.
        """
        if self._unsubscribing is None or self._unsubscribing.done:
            self._iteration_gate.open = False  # until it is done: see _unsubscribed()
            self._unsubscribing = _Unsubscribe(self)
        return self._unsubscribing

    def _unsubscribed(self) -> None:
        """An unsubscribe is done (or gave up): nothing collected under the subscription it
        dropped is left to hand out, and `async for` takes the records at hand again (the
        next subscription's) unless the consumer is closed."""
        self._pending.clear()
        self._iteration_gate.open = not self._closed

    async def _finish_unsubscribe(self, event: UnsubscribeEvent) -> None:
        """What unsubscribe() does, run once by its awaitable or by the next poll/close: the
        network task leaves the group (when subscribed) and drops the subscription; the
        revocation it hands back runs here."""
        error = None
        if self._shell.task_alive and not self._closed:
            timeout_s = self._config.default_api_timeout_ms / 1000
            error = await self._leave(event, timeout_s, submit=False)
        self._listener = None
        self._wakeup()
        if error is not None:
            raise error

    async def _complete_unsubscribe(self) -> None:
        """Run an unsubscribe() that was called without await (before polling or closing)."""
        pending = self._unsubscribing
        if pending is not None and not pending.done:
            await pending

    def _check_no_unsubscribe(self, what: str) -> None:
        if self._unsubscribing is not None and not self._unsubscribing.done:
            raise KafkaError(
                f"{what} after unsubscribe() that was not awaited yet: `await "
                f"consumer.unsubscribe()` first (or poll once), so that leaving the group "
                "does not undo this call"
            )

    def assignment(self) -> set[TopicPartition]:
        """The partitions assigned to this consumer now (by assign() or by the group)."""
        return set(self._view()[1])

    def subscription(self) -> frozenset[str]:
        """The subscribed topics (for a pattern: the topics it matches now)."""
        return self._view()[3]

    def _view(
        self,
    ) -> tuple[
        SubscriptionType, frozenset[TopicPartition], frozenset[TopicPartition], frozenset[str]
    ]:
        """(subscription type, assignment, paused partitions, subscribed topics) as the
        application asked for them: the managers' state, with the application's calls the
        network task has not applied yet (the events still queued) applied on top."""
        subs = self._subscriptions
        kind = subs.type
        assigned = frozenset(subs.assigned_partitions())
        paused = frozenset(subs.paused_partitions())
        topics = subs.subscription()
        unsubscribing = self._unsubscribing
        if unsubscribing is not None and not unsubscribing.done:
            kind, assigned, paused, topics = (
                SubscriptionType.NONE,
                frozenset(),
                frozenset(),
                frozenset(),
            )
        for event in self._events.pending():
            if isinstance(event, AssignmentChangeEvent):
                assigned = frozenset(event.partitions)
                kind = SubscriptionType.USER_ASSIGNED if assigned else SubscriptionType.NONE
                topics = frozenset(tp.topic for tp in assigned)
                paused &= assigned
            elif isinstance(event, SubscriptionChangeEvent):
                if event.pattern is not None:
                    kind = SubscriptionType.AUTO_PATTERN
                    if subs.type is not SubscriptionType.AUTO_PATTERN:
                        topics = frozenset()
                else:
                    kind, topics = SubscriptionType.AUTO_TOPICS, frozenset(event.topics)
            elif isinstance(event, UnsubscribeEvent):
                kind, assigned, paused, topics = (
                    SubscriptionType.NONE,
                    frozenset(),
                    frozenset(),
                    frozenset(),
                )
            elif isinstance(event, PauseEvent):
                paused |= frozenset(event.partitions) & assigned
            elif isinstance(event, ResumeEvent):
                paused -= frozenset(event.partitions)
        return kind, assigned, paused, topics

    def _check_kind(self, wanted: SubscriptionType) -> None:
        """subscribe() and assign() cannot be mixed (as SubscriptionState says, at the call)."""
        kind = self._view()[0]
        if wanted is SubscriptionType.NONE or kind is SubscriptionType.NONE or kind is wanted:
            return
        raise KafkaError(
            "subscribe() and assign() cannot be mixed: call unsubscribe() before switching "
            f"(the consumer is using {kind.value!r})"
        )

    def _check_assigned(self, partitions: Iterable[TopicPartition], what: str) -> None:
        assigned = self._view()[1]
        for tp in partitions:
            if tp not in assigned:
                raise KafkaError(
                    f"{what}: partition {tp} is not assigned to this consumer; assign() it or "
                    "wait for the group to assign it"
                )

    def _wakeup(self) -> None:
        if self._driver is not None:
            self._driver.wakeup()

    # -- positions ------------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Fetch `partition` from `offset` next (buffered records past it are dropped)."""
        self._check_not_closed("seek()")
        if not isinstance(offset, int) or offset < 0:
            raise KafkaConfigError(f"seek() offset must be an int >= 0, got {offset!r}")
        tp = TopicPartition(*partition)
        self._check_assigned((tp,), "seek()")
        self._events.put(SeekEvent(math.inf, tp, offset))
        self._discard_pending((tp,))

    async def seek_to_beginning(
        self, *partitions: TopicPartition, timeout_ms: float | None = None
    ) -> None:
        """Move to the log start of `partitions` (default: all assigned) and wait for it."""
        await self._reset_to(OffsetResetStrategy.EARLIEST, partitions, timeout_ms)

    async def seek_to_end(
        self, *partitions: TopicPartition, timeout_ms: float | None = None
    ) -> None:
        """Move to the log end of `partitions` (default: all assigned) and wait for it."""
        await self._reset_to(OffsetResetStrategy.LATEST, partitions, timeout_ms)

    async def _reset_to(
        self,
        strategy: OffsetResetStrategy,
        partitions: tuple[TopicPartition, ...],
        timeout_ms: float | None,
    ) -> None:
        self._check()
        tps = [TopicPartition(*tp) for tp in partitions] or sorted(self.assignment())
        self._check_assigned(tps, "seek_to_beginning()/seek_to_end()")
        self._events.put(ResetOffsetsEvent(math.inf, tuple(tps), strategy))
        self._discard_pending(tps)
        paused = self._view()[2]
        active = tuple(tp for tp in tps if tp not in paused)
        if active:
            await self._submit(AwaitPositionsEvent(self._deadline(timeout_ms), active), timeout_ms)

    async def position(self, partition: TopicPartition, *, timeout_ms: float | None = None) -> int:
        """The offset of the next record to be handed out (waits for a reset if needed)."""
        self._check()
        tp = TopicPartition(*partition)
        st = self._fetched_state(tp, "position()")
        if (
            st is not None
            and not self._events.waiting(but=PollEvent)  # no seek or reset still queued
            and st.fetch_state is FetchState.FETCHING
            and st.position is not None
        ):
            first = self._pending.first_pending().get(tp)
            return st.position.offset if first is None else first.offset
        positions = await self._submit(
            AwaitPositionsEvent(self._deadline(timeout_ms), (tp,)), timeout_ms
        )
        return int(positions[tp])

    async def committed(
        self, partition: TopicPartition, *, timeout_ms: float | None = None
    ) -> OffsetAndMetadata | None:
        """The group's committed offset for `partition`, or None if nothing is committed."""
        self._check()
        self._require_group("committed()")
        tp = TopicPartition(*partition)
        result = await self._submit(
            FetchCommittedEvent(self._deadline(timeout_ms), (tp,)), timeout_ms
        )
        value = result.get(tp)
        assert value is None or isinstance(value, OffsetAndMetadata)
        return value

    async def commit(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
        *,
        timeout_ms: float | None = None,
    ) -> None:
        """Commit `offsets` ({tp: next offset to read}) or, by default, the positions of
        every assigned partition (the records handed out so far); retries retriable errors
        until `timeout_ms` (default_api_timeout_ms).

        Raises CommitFailedError when the member lost its partitions (rejoin by polling)
        and RebalanceInProgressError during a rebalance.
        """
        self._check()
        self._require_group("commit()")
        event = CommitEvent(self._deadline(timeout_ms), offsets=self._to_commit(offsets))
        await self._submit(event, timeout_ms)

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
        callback: CommitCallback | None = None,
    ) -> Awaitable[dict[TopicPartition, OffsetAndMetadata]]:
        """Start committing (one attempt, once the coordinator is known); returns an
        awaitable of the committed offsets that need not be awaited.

        ``callback(offsets, error_or_None)`` (sync or async) runs in the application's task
        during a later consumer call (getmany, getone, iteration, close), as in Java.
        """
        self._check()
        self._require_group("commit_async()")
        wanted = self._to_commit(offsets)
        event = CommitEvent(self._deadline(None), offsets=wanted, retry=False)
        if callback is not None:
            event.on_done = lambda error: self._background.put_callback(
                lambda: callback(wanted, error)
            )
        self._events.put(event)
        return _CommitFuture(event, self._config.default_api_timeout_ms / 1000 + _CHECK_INTERVAL_S)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member's group id, generation, member id and group instance id (for a
        transactional producer's ``send_offsets_to_transaction``)."""
        membership = self._require_group("group_metadata()")
        generation = membership.generation
        return ConsumerGroupMetadata(
            membership.group_id,
            generation.generation_id,
            generation.member_id,
            membership.group_instance_id,
        )

    def _require_group(self, what: str) -> GroupMembership:
        if self._membership is None:
            raise KafkaConfigError(f"{what} needs a group_id: offsets are committed per group")
        return self._membership

    def _to_commit(
        self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        if offsets is None:
            return self._consumed_offsets()
        out: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, value in offsets.items():
            if not isinstance(tp, tuple) or len(tp) != 2:
                raise KafkaConfigError(f"commit offsets are keyed by TopicPartition, got {tp!r}")
            om = value if isinstance(value, OffsetAndMetadata) else None
            if om is None and isinstance(value, int) and not isinstance(value, bool):
                om = OffsetAndMetadata(value)
            if om is None or om.offset < 0:
                raise KafkaConfigError(
                    f"commit offset for {tp} must be an int >= 0 or an OffsetAndMetadata, "
                    f"got {value!r}"
                )
            out[TopicPartition(str(tp[0]), int(tp[1]))] = om
        return out

    def _consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """Positions of assigned partitions, counting only records handed to the app."""
        offsets = self._subscriptions.all_consumed()
        for tp, record in self._pending.first_pending().items():
            if tp in offsets:
                offsets[tp] = OffsetAndMetadata(record.offset, "", record.leader_epoch)
        for flight in self._deserializing:  # collected, still being deserialized
            for tp, record in flight.first.items():
                if tp in offsets and tp not in flight.dropped:
                    if record.offset < offsets[tp].offset:
                        offsets[tp] = OffsetAndMetadata(record.offset, "", record.leader_epoch)
        return offsets

    def _on_commit(self, event: CommitEvent, now: float) -> None:
        assert self._commits is not None
        if event.retry:
            handle = self._commits.commit_sync(event.offsets, event.deadline_ms)
        else:
            handle = self._commits.commit_async(event.offsets, event.deadline_ms)
        event.errors_from(lambda: handle.last_error)

        def done(h: Any) -> None:
            if h.error is not None:
                event.fail(h.error)
            else:
                event.complete(h.value)
                end = now_ms()
                self._m.commit_latency.record(end - now, end)
            if event.on_done is not None:
                event.on_done(h.error)
            elif h.error is not None and not event.retry:
                log.info("commit_async failed: %s", h.error)

        handle.add_done_callback(done)

    def _on_fetch_committed(self, event: FetchCommittedEvent, now: float) -> None:
        assert self._commits is not None
        handle = self._commits.fetch_committed(event.partitions, event.deadline_ms)
        event.errors_from(lambda: handle.last_error)

        def done(h: Any) -> None:
            if h.error is not None:
                event.fail(h.error)
            else:
                event.complete(h.value)

        handle.add_done_callback(done)

    # -- pause ----------------------------------------------------------------------------

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop handing out and fetching records of `partitions`; positions stay put."""
        self._check_not_closed("pause()")
        tps = [TopicPartition(*tp) for tp in partitions]
        self._check_assigned(tps, "pause()")
        self._events.put(PauseEvent(math.inf, tuple(tps)))
        self._drop_pending(frozenset(tps))

    def resume(self, *partitions: TopicPartition) -> None:
        """Hand out records of paused partitions again (their buffered data is kept while paused)."""
        self._check_not_closed("resume()")
        tps = tuple(TopicPartition(*tp) for tp in partitions)
        self._check_assigned(tps, "resume()")
        self._events.put(ResumeEvent(math.inf, tps))

    def paused(self) -> set[TopicPartition]:
        """The partitions paused with pause()."""
        return set(self._view()[2])

    # -- offsets lookups ------------------------------------------------------------------

    async def offsets_for_times(
        self, timestamps: dict[TopicPartition, int], *, timeout_ms: float | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The first offset whose timestamp is >= the given one (ms), per partition; None
        where no such record exists."""
        for tp, ts in timestamps.items():
            if not isinstance(ts, int) or ts < 0:
                raise KafkaConfigError(f"timestamp for {tp} must be an int >= 0, got {ts!r}")
        answers = await self._list_offsets(timestamps, timeout_ms)
        return {
            tp: None if a is None else OffsetAndTimestamp(a[0], a[1], a[2])
            for tp, a in answers.items()
        }

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition], *, timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        """The earliest offset of each partition (ListOffsets to the leaders)."""
        answers = await self._list_offsets(
            dict.fromkeys(partitions, EARLIEST_TIMESTAMP), timeout_ms
        )
        return {tp: -1 if a is None else a[0] for tp, a in answers.items()}

    async def end_offsets(
        self, partitions: Iterable[TopicPartition], *, timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        """The log end offsets (the last stable offsets with read_committed)."""
        answers = await self._list_offsets(dict.fromkeys(partitions, LATEST_TIMESTAMP), timeout_ms)
        return {tp: -1 if a is None else a[0] for tp, a in answers.items()}

    async def _list_offsets(
        self, timestamps: dict[TopicPartition, int], timeout_ms: float | None
    ) -> dict[TopicPartition, Any]:
        self._check()
        wanted = {TopicPartition(*tp): ts for tp, ts in timestamps.items()}
        answers: dict[TopicPartition, Any] = await self._submit(
            ListOffsetsEvent(self._deadline(timeout_ms), wanted), timeout_ms
        )
        return answers

    def highwater(self, partition: TopicPartition) -> int | None:
        """The high watermark from the latest fetch response, or None before one."""
        st = self._fetched_state(partition, "highwater()")
        return None if st is None else st.high_watermark

    def last_stable_offset(self, partition: TopicPartition) -> int | None:
        """The last stable offset from the latest fetch of the partition (None until fetched)."""
        st = self._fetched_state(partition, "last_stable_offset()")
        return None if st is None else st.last_stable_offset

    def lag(self, partition: TopicPartition) -> int | None:
        """High watermark minus position, when both are known."""
        tp = TopicPartition(*partition)
        self._fetched_state(tp, "lag()")
        return self._subscriptions.lag(tp)

    def _fetched_state(self, partition: TopicPartition, what: str) -> PartitionState | None:
        """The partition's fetch state; None while its assignment is not applied yet."""
        tp = TopicPartition(*partition)
        self._check_assigned((tp,), what)
        return None if not self._subscriptions.is_assigned(tp) else self._subscriptions.state(tp)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """Partition ids of `topic` from the cached metadata (None if unknown)."""
        parts = self._metadata.cluster.partitions_for(topic)
        return None if parts is None else set(parts)

    # -- events ---------------------------------------------------------------------------

    def _deadline(self, timeout_ms: float | None) -> float:
        timeout = self._config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        return now_ms() + timeout

    async def _submit(self, event: ApplicationEvent[Any], timeout_ms: float | None) -> Any:
        self._check()
        self._events.put(event)
        timeout = self._config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        # the processor fails the event at its deadline; this guard only covers a dead driver
        return await event.wait(timeout / 1000 + _CHECK_INTERVAL_S)

    # -- records --------------------------------------------------------------------------

    async def getmany(
        self,
        *partitions: TopicPartition,
        timeout_ms: float = 0,
        max_records: int | None = None,
    ) -> Records:
        """Records ready now, or the first to arrive within `timeout_ms`; {} if none did.

        Returns at most `max_records` (default: max_poll_records, 500) records,
        only from `partitions` when given. Runs pending rebalance steps (listener callbacks)
        and commit callbacks first. Raises errors the network task reported (e.g.
        OffsetOutOfRangeError with auto_offset_reset='none', CorruptRecordError, group
        errors such as GroupAuthorizationFailedError).
        """
        check_wait_ms(timeout_ms, "getmany()")
        check_max_records(max_records, "getmany()")
        limit = max_records if max_records is not None else self._config.max_poll_records
        only = frozenset(TopicPartition(*tp) for tp in partitions) if partitions else None
        return await self._poll(limit, only, timeout_ms, from_pending=True)

    async def getone(self, *partitions: TopicPartition) -> ConsumerRecord[Any, Any]:
        """The next record (waits as long as it takes).

        Records are collected in batches (up to max_poll_records, default 500) and handed
        out one by one; commits count only records handed out.
        """
        only = frozenset(TopicPartition(*tp) for tp in partitions) if partitions else None
        batch = min(self._config.max_poll_records or _ITERATION_BATCH, _ITERATION_BATCH)
        while True:
            if len(self._background):
                await self._run_background()
            record = self._pending.pop(only)
            if record is not None:
                return record
            records = await self._poll(batch, only, _CHECK_INTERVAL_S * 1000, from_pending=False)
            self._pending.extend(records)

    def __aiter__(self) -> AsyncIterator[ConsumerRecord[Any, Any]]:
        # each step, taking a record already fetched, is compiled there (make accel)
        return RecordIterator(
            self, self._iteration_gate, self._pending.records, self._background_events
        )

    async def __anext__(self) -> ConsumerRecord[Any, Any]:
        if self._closed:
            raise StopAsyncIteration
        if self._iteration_gate.open and not self._background_events:  # the common case
            pending = self._pending.records
            if pending:
                return pending.popleft()
        try:
            return await self.getone()
        except KafkaError:
            if self._closed:
                raise StopAsyncIteration from None
            raise

    async def _poll(
        self,
        limit: int | None,
        only: frozenset[TopicPartition] | None,
        timeout_ms: float,
        *,
        from_pending: bool,
    ) -> Records:
        """One application poll: group bookkeeping, background steps, then records."""
        driver = self._check()
        started = anyio.current_time()
        deadline = started + timeout_ms / 1000
        self._last_poll_ms = started * 1000.0
        while True:
            if self._unsubscribing is not None and not self._unsubscribing.done:
                await self._complete_unsubscribe()
            unsubscribing = self._unsubscribing  # another one started: see below
            self._poll_group()
            if self._events.waiting(but=PollEvent):
                await self._settle()
            await self._run_background()
            if self._membership is not None and self._membership.fatal_error is not None:
                raise self._membership.fatal_error
            if from_pending and len(self._pending):
                records = self._pending.take(limit, only)
                if records:
                    return records
            before = len(self._buffer)
            used_before = self._buffer.used_bytes
            records = self._collector.collect(limit, only)
            if len(self._buffer) != before and self._fetcher.waits_for_drain():
                driver.wakeup()  # buffer space freed: the fetcher may fetch what it held
            if records and self._codecs is not None:
                records = await self._deserialize(records, self._codecs)
            if records and self._unsubscribing is not unsubscribing:
                # unsubscribe() was called (in another task) while this poll awaited: what it
                # collected belongs to the subscription dropped, and is not handed out
                self._rewind({tp: batch[0] for tp, batch in records.items()})
                records = {}
            used = self._buffer.used_bytes - used_before
            if records:
                if self._registry.enabled:
                    self._record_poll(records, used)
                if self._interceptors.enabled:  # before the application sees them (onConsume)
                    records = self._interceptors.on_consume(records)
                return records
            if used and self._registry.enabled:  # the last records' fetch, used up now
                self._m.bytes_consumed.record(used, self._last_poll_ms or 0.0)
            self._raise_missing_offsets()
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                return {}
            await self._wait_for_data(min(remaining, _CHECK_INTERVAL_S))
            driver = self._check()

    async def _deserialize(
        self, records: Records, codecs: tuple[FieldCodec, FieldCodec]
    ) -> Records:
        """Run async (or context-taking) deserializers over collected records, in this task.

        A deserializer that raises leaves its partition's position at that record (the
        records after it are fetched again): the records before it are returned, and the
        error is raised at once when there are none, else by the next poll, as on the
        plain path. Until they are returned the records count as not handed out: a
        partition dropped meanwhile (revoked, paused, unsubscribed) has its position moved
        back to them by the drop, and its records are left out (see _drop_pending).
        """
        out: Records = {}
        failure: RecordDeserializationError | None = None
        subs = self._subscriptions
        flight = _Deserializing(records)
        self._deserializing.append(flight)
        try:
            for tp, batch in records.items():
                done: list[ConsumerRecord[Any, Any]] = []
                for record in batch:
                    field = "key"
                    try:
                        ctx = SerializationContext(
                            tp.topic, "key", tp.partition, record.offset, record.headers
                        )
                        key = await deserialize(codecs[0], record.key, ctx)
                        field = "value"
                        ctx = SerializationContext(
                            tp.topic, "value", tp.partition, record.offset, record.headers
                        )
                        value = await deserialize(codecs[1], record.value, ctx)
                    except Exception as exc:
                        if tp in flight.dropped:  # its position was moved back already
                            break
                        if failure is None:
                            failure = RecordDeserializationError(
                                tp.topic, tp.partition, record.offset, field, exc
                            )
                            failure.__cause__ = exc
                        if subs.is_assigned(tp):  # the position stays at the failed record
                            subs.seek(tp, record.offset, record.leader_epoch)
                            self._buffer.remove(tp)
                        self._wakeup()
                        break
                    record.key = key
                    record.value = value
                    done.append(record)
                if done:
                    out[tp] = done
        finally:
            self._deserializing.remove(flight)
        for tp in flight.dropped:
            out.pop(tp, None)
        if failure is not None and not out:
            raise failure
        return out

    def _poll_group(self) -> None:
        """Tell the network task the application polled (PollEvent: the max_poll_interval_ms
        clock; the first join and rejoins after a poll timeout start there). One at a time;
        the network task is woken for it only when the member is out of the group (it would
        otherwise see it at its next turn, well within max_poll_interval_ms)."""
        membership = self._membership
        if membership is None:
            return
        last = self._poll_event
        if last is not None and not last.done:
            return
        self._poll_event = event = PollEvent(math.inf)
        self._events.put(event, wake=membership.needs_application_poll)

    def _drop_pending(self, partitions: Partitions) -> None:
        """Forget collected-but-undelivered records of `partitions` (waiting in the queue or
        in a poll's deserializers) and move their positions back to the first of them (they
        are fetched again if the partition stays)."""
        # the application side's own bookkeeping of what it handed out (as collecting
        # advances positions, here and in Java's FetchCollector): applied at once, so a
        # commit right after (before revoking) counts only what was handed out
        self._rewind(self._discard_pending(partitions))

    def _drop_all_pending(self) -> None:
        self._drop_pending(self._undelivered_partitions())

    def _discard_pending(
        self, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, ConsumerRecord[Any, Any]]:
        """Forget collected-but-undelivered records of `partitions`, queued or in a poll's
        deserializers (that poll leaves them out); the first of each partition."""
        first = self._pending.discard(partitions)
        for flight in self._deserializing:
            for tp, record in flight.first.items():
                if tp in partitions and tp not in flight.dropped:
                    flight.dropped.add(tp)
                    if tp not in first or record.offset < first[tp].offset:
                        first[tp] = record
        return first

    def _undelivered_partitions(self) -> frozenset[TopicPartition]:
        """Partitions with records collected and not handed out (queued or deserializing)."""
        partitions = set(self._pending.first_pending())
        for flight in self._deserializing:
            partitions.update(flight.first)
        return frozenset(partitions)

    def _rewind(self, first: Mapping[TopicPartition, ConsumerRecord[Any, Any]]) -> None:
        """Move the positions of partitions still assigned back to these records (the first
        not handed out of each): they are fetched again, and a commit counts only what was."""
        for tp, record in first.items():
            if self._subscriptions.is_assigned(tp):
                self._subscriptions.seek(tp, record.offset, record.leader_epoch)
                self._buffer.remove(tp)

    async def _commit_before_revoke(self, partitions: Partitions) -> None:
        if self._membership is None or not self._config.enable_auto_commit:
            return
        consumed = self._subscriptions.all_consumed()
        offsets = {tp: om for tp, om in consumed.items() if tp in partitions}
        if not offsets:
            return
        timeout_ms = min(self._config.default_api_timeout_ms, self._membership.rebalance_timeout_ms)
        try:
            await self._submit(CommitEvent(self._deadline(timeout_ms), offsets=offsets), timeout_ms)
        except KafkaError as exc:
            log.warning(
                "group %r: committing offsets before revoking %d partitions failed: %s",
                self._membership.group_id,
                len(partitions),
                exc,
            )

    async def _settle(self) -> None:
        """Wait until the network task has taken the events this task queued (subscribe,
        assign, seek...), so what is collected next follows them."""
        self._wakeup()
        while self._events.waiting(but=PollEvent) and self._shell.task_alive:
            await self._wait_for_data(_CHECK_INTERVAL_S)

    async def _wait_for_data(self, seconds: float) -> None:
        ready = self._data_ready
        ready.clear()  # set by what arrived before this poll collected, already seen
        await ready.wait(seconds)

    async def _run_background(self) -> None:
        """Run background callbacks (application side) in order, then raise the first error
        (a failing callback does not stop the ones after it; later errors stay queued)."""
        if not len(self._background):
            return
        first_error: BaseException | None = None
        for item in self._background.drain():
            if isinstance(item, BaseException):
                error: BaseException = item
            else:
                try:
                    result = item()
                    if inspect.isawaitable(result):
                        await result
                    continue
                except Exception as exc:
                    error = exc
            if first_error is None:
                first_error = error
            else:
                self._background.put_error(error)  # raised by a later call
        if first_error is not None:
            raise first_error

    def _raise_missing_offsets(self) -> None:
        subs = self._subscriptions
        missing = [
            tp
            for tp in subs.assigned_partitions()
            if (st := subs.state(tp)).fetch_state is FetchState.AWAIT_RESET
            and st.reset_strategy is OffsetResetStrategy.NONE
            and not st.paused
        ]
        if missing:
            raise NoOffsetForPartitionError(missing)


class _Deserializing:
    """Records a poll collected and is running async deserializers over: the first of each
    partition, and the partitions dropped since (their records are not returned)."""

    __slots__ = ("dropped", "first")

    def __init__(self, records: Records) -> None:
        self.first = {tp: batch[0] for tp, batch in records.items() if batch}
        self.dropped: set[TopicPartition] = set()


class _RebalanceSteps:
    """The consumer's side of the rebalance steps (see GroupEventBridge)."""

    __slots__ = ("_consumer",)

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer

    def listener(self) -> RebalanceListener | None:
        return self._consumer._listener

    def drop_pending(self, partitions: Partitions) -> None:
        self._consumer._drop_pending(partitions)

    async def commit_before_revoke(self, partitions: Partitions) -> None:
        await self._consumer._commit_before_revoke(partitions)

    def step_done(self, step: str) -> None:
        self._consumer._events.put(RebalanceStepDoneEvent(math.inf, step))


class _CommitFuture:
    """What commit_async returns: awaiting it waits for the commit (the commit runs whether
    or not anyone awaits)."""

    __slots__ = ("_event", "_timeout_s")

    def __init__(self, event: CommitEvent, timeout_s: float) -> None:
        self._event = event
        self._timeout_s = timeout_s

    @property
    def done(self) -> bool:
        return self._event.done

    def __await__(self) -> Generator[Any, None, dict[TopicPartition, OffsetAndMetadata]]:
        result: dict[TopicPartition, OffsetAndMetadata] = yield from self._event.wait(
            self._timeout_s
        ).__await__()
        return result


class _Unsubscribe:
    """What ``Consumer.unsubscribe()`` returns: awaiting it runs the unsubscribe (once; the
    next poll or close() runs it when nobody awaits)."""

    __slots__ = ("_consumer", "_lock", "done", "event")

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer
        self._lock: anyio.Lock | None = None
        self.done = False
        # the network task starts leaving at once; no record is handed out from now on, and
        # the positions go back to the first record not handed out (what leaving commits)
        self.event = UnsubscribeEvent(math.inf)
        consumer._events.put(self.event)
        consumer._drop_all_pending()

    def __await__(self) -> Generator[Any, None, None]:
        return self._run().__await__()

    async def _run(self) -> None:
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            if self.done:
                return
            try:
                await self._consumer._finish_unsubscribe(self.event)
            finally:
                self.done = True
                self._consumer._unsubscribed()
