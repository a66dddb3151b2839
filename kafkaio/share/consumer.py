"""ShareConsumer: the application face of a KIP-932 share group ("queues for Kafka").

Wires the share membership, share-fetch and acknowledgement managers to one NetworkDriver;
the application side polls acquired records and acknowledges them.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from kafkaio.config import split_connection_options
from kafkaio.consumer.group.coordinator import CoordinatorManager
from kafkaio.errors import ClientClosedError, KafkaConfigError, KafkaError
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
from kafkaio.metrics.consumer import ShareConsumerMetrics
from kafkaio.metrics.timing import TimedManager
from kafkaio.net.manager import parse_bootstrap_servers
from kafkaio.runtime.driver import NetworkDriver, now_ms
from kafkaio.runtime.events import ApplicationEvent, ApplicationEventQueue
from kafkaio.runtime.processor import ApplicationEventProcessor
from kafkaio.runtime.requests import RequestManager
from kafkaio.runtime.shell import (
    DEFAULT_CLOSE_TIMEOUT_MS,
    AsyncClient,
    ClientShell,
    Lifecycle,
    timeout_ms_arg,
)
from kafkaio.serde.base import FieldCodec, SerializationContext, deserialize, located
from kafkaio.share.acknowledgements import Acknowledgements, AcknowledgeType, AckOutcome
from kafkaio.share.config import SHARE_CONSUMER_OPTIONS, ShareConsumerConfig
from kafkaio.share.errors import AcknowledgementError, AcquisitionLockTimeoutError
from kafkaio.share.fetch import ShareFetchConfig, ShareFetchManager
from kafkaio.share.membership import MemberState, ShareMembershipManager
from kafkaio.share.record import ShareRecord
from kafkaio.validate import check_bool, check_max_records, check_topic

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from kafkaio.options import ShareConsumerOptions

log = logging.getLogger("kafkaio.share")

_WAIT_SLICE_S = 0.5  # the application re-checks for errors at least this often while waiting


@dataclass(slots=True, eq=False)
class CommitAcknowledgementsEvent(ApplicationEvent[dict[TopicPartition, KafkaError | None]]):
    """Send every pending acknowledgement now; completes with {partition: error or None}."""


@dataclass(slots=True, eq=False)
class AcknowledgeOnCloseEvent(ApplicationEvent[None]):
    """close(): stop fetching, send the last acknowledgements and close every share session;
    completes when the sessions are closed (Java's ShareAcknowledgeOnCloseEvent)."""


@dataclass(slots=True, eq=False)
class LeaveOnCloseEvent(ApplicationEvent[None]):
    """close(): leave the share group; completes once out (Java's ShareLeaveOnCloseEvent)."""


class ShareConsumer(AsyncClient):
    """A member of a share group: records are shared among members, one delivery at a time.

    ``async with ShareConsumer("orders", bootstrap_servers=..., group_id="workers") as c:``
    then ``await c.poll()`` (a batch) or ``async for record in c``. Each record is
    acquired for this consumer for the broker's acquisition-lock time; acknowledge it with
    ``await record.ack()`` / ``release()`` / ``reject()`` or ``await c.acknowledge(records,
    AcknowledgeType.X)``. Decisions are sent with the next poll, or at once by
    ``await c.commit()``. ``acknowledgement_mode="implicit"`` (default) accepts what a poll
    returned and was not acknowledged otherwise when the next poll starts; ``"explicit"``
    requires every record to be acknowledged before the next poll. ``close`` sends the
    remaining acknowledgements, closes the share sessions and leaves the group.
    """

    def __init__(
        self,
        *topics: str,
        bootstrap_servers: str | Sequence[str],
        group_id: str,
        metrics_enabled: bool = True,
        **options: Unpack[ShareConsumerOptions],
    ) -> None:
        if not topics:
            raise KafkaConfigError("ShareConsumer needs at least one topic to subscribe to")
        if not group_id:
            raise KafkaConfigError("ShareConsumer needs a group_id (the share group's name)")
        options.setdefault("client_id", "kafkaio-share-consumer")
        check_bool("metrics_enabled", metrics_enabled)
        parse_bootstrap_servers(bootstrap_servers)  # a wrong value fails here, not in start()
        conn_config, own = split_connection_options(
            options, SHARE_CONSUMER_OPTIONS, "ShareConsumer"
        )
        config = self.config = ShareConsumerConfig.from_options(own)
        self.group_id = group_id
        self.topics = tuple(sorted({check_topic(t) for t in topics}))
        self._bootstrap = bootstrap_servers
        self._conn_config = conn_config
        self._explicit = config.acknowledgement_mode == "explicit"
        self._metadata = MetadataManager(
            metadata_max_age_ms=config.metadata_max_age_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
        )
        self._metadata.set_topics(self.topics)
        self._events = ApplicationEventQueue()
        self._processor = ApplicationEventProcessor(self._events)
        self._coordinator = CoordinatorManager(
            group_id, config.retry_backoff_ms, config.retry_backoff_max_ms
        )
        self._member = ShareMembershipManager(
            group_id,
            self.topics,
            self._coordinator,
            rack_id=config.client_rack,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
        )
        self._acks = Acknowledgements()
        self._fetcher = ShareFetchManager(
            group_id,
            self._member,
            self._metadata,
            self._acks,
            ShareFetchConfig(
                max_wait_ms=config.fetch_max_wait_ms,
                min_bytes=config.fetch_min_bytes,
                max_bytes=config.fetch_max_bytes,
                max_records=config.max_poll_records,
                batch_size=config.max_poll_records,
                retry_backoff_ms=config.retry_backoff_ms,
                retry_backoff_max_ms=config.retry_backoff_max_ms,
            ),
            on_records=self._records_arrived,
        )
        self._processor.register(CommitAcknowledgementsEvent, self._on_commit_event)
        self._processor.register(AcknowledgeOnCloseEvent, self._on_acknowledge_on_close)
        self._processor.register(LeaveOnCloseEvent, self._on_leave_on_close)
        # metrics (metrics_enabled=False: a null registry)
        self._registry = make_registry(
            conn_config.client_id or "", "share-consumer", metrics_enabled
        )
        self._m = ShareConsumerMetrics(self._registry)
        self._conn_metrics = ConnectionMetrics(self._registry)
        self._last_poll_ms: float | None = None
        self._m.bind_gauges(
            assigned_partitions=lambda now: float(len(self.assignment())),
            last_poll_seconds_ago=lambda now: (
                -1.0 if self._last_poll_ms is None else (now - self._last_poll_ms) / 1000.0
            ),
        )
        self._delivered: list[ShareRecord[Any, Any]] = []  # returned by the last poll
        self._codecs: dict[str, FieldCodec] = {}  # key/value deserializers, as called
        self._iter: list[ShareRecord[Any, Any]] = []
        self._arrived = anyio.Event()
        fetcher: RequestManager = self._fetcher
        if self._registry.enabled:
            fetcher = TimedManager(self._fetcher, self._m.fetch_latency)
        self._shell = ClientShell(
            "share consumer",
            bootstrap_servers,
            conn_config,
            metadata=self._metadata,
            managers=[self._processor, self._coordinator, self._member, fetcher],
            extra_nodes=self._coordinator.addresses,
            conn_metrics=self._conn_metrics if self._registry.enabled else None,
        )
        self._driver: NetworkDriver | None = None  # the shell's, once started
        self._closed = False  # no more application calls (set once close() sent the acks)

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the network task, load metadata and begin joining the share group: raises
        BootstrapError when no broker answers within default_api_timeout_ms. A share
        consumer starts once."""
        await self._shell.start(self.config.default_api_timeout_ms)
        self._driver = self._shell.driver
        assert self._driver is not None
        self._events.set_wakeup(self._driver.wakeup)
        self._member.join()
        self._driver.wakeup()

    async def close(self, timeout_ms: float | None = None, *, timeout: float | None = None) -> None:
        """Send pending acknowledgements, close the share sessions and leave the group
        within ``timeout_ms`` (default 30 s, as Java's), then stop. Safe to call twice, from
        another task than start() and under a cancel scope. (``timeout`` in seconds is
        deprecated.)"""
        limit = timeout_ms_arg(
            timeout_ms, timeout, DEFAULT_CLOSE_TIMEOUT_MS, "ShareConsumer.close"
        )

        async def leave() -> None:
            self._finish_previous_poll(strict=False)
            self._iter.clear()
            # acknowledgements first (the sessions close with them), then the group
            for event in (AcknowledgeOnCloseEvent(math.inf), LeaveOnCloseEvent(math.inf)):
                self._events.put(event)
                await event.wait()

        def stop_calls() -> None:
            self._closed = True
            if self._driver is not None:
                self._report(self._fetcher.drain_outcomes())

        if self._shell.state is Lifecycle.NEW:
            self._closed = True
        await self._shell.close(limit, leave, stop_calls)

    # -- metrics and health ---------------------------------------------------------------------

    @property
    def metrics_registry(self) -> MetricsRegistry:
        """The registry behind ``metrics()`` (for exporters, e.g. kafkaio.metrics.otel)."""
        return self._registry

    def metrics(self) -> MetricsSnapshot:
        """The share consumer's metrics now (Java names) as a plain dict ({} when disabled)."""
        return self._registry.snapshot()

    def health(self) -> HealthSnapshot:
        """Connections and share-group membership now (for health endpoints)."""
        now = now_ms()
        connections = self._shell.connection_states()
        group = GroupHealth(
            self.group_id,
            self._member.state.value,
            self._member.member_epoch,
            self._member.member_id,
            len(self.assignment()),
        )
        driver = self._driver
        fatal = None if driver is None else driver.fatal_error
        return HealthSnapshot(
            self._conn_config.client_id or "",
            "share-consumer",
            self._shell.running and not self._closed,
            connections,
            group,
            {},
            None if self._last_poll_ms is None else (now - self._last_poll_ms) / 1000.0,
            None if fatal is None else repr(fatal),
        )

    # -- state ----------------------------------------------------------------------------------

    @property
    def member_id(self) -> str:
        """This member's id in the share group."""
        return self._member.member_id

    @property
    def member_epoch(self) -> int:
        """The member epoch of the last heartbeat answer (0 before joining)."""
        return self._member.member_epoch

    def assignment(self) -> set[TopicPartition]:
        """The partitions the share group currently assigns to this member."""
        cluster = self._metadata.cluster
        out: set[TopicPartition] = set()
        for topic_id, partitions in self._member.assignment.items():
            name = cluster.topic_name(topic_id)
            if name is not None:
                out.update(TopicPartition(name, p) for p in partitions)
        return out

    @property
    def acquisition_lock_timeout_ms(self) -> float:
        """The broker's acquisition-lock time, as its last ShareFetch response said."""
        return self._fetcher.lock_timeout_ms

    # -- consuming ------------------------------------------------------------------------------

    async def poll(
        self, timeout_ms: float = 1000, max_records: int | None = None
    ) -> list[ShareRecord[Any, Any]]:
        """Up to ``max_records`` acquired records (``max_poll_records`` by default).

        First settles the previous poll's records (implicit mode: accepts the ones not
        acknowledged; explicit mode: raises AcknowledgementError if any is not). Waits up to
        ``timeout_ms`` for records; returns an empty list if none arrived. After leaving an
        ``async for`` early, the records it fetched and did not hand out come first.
        """
        driver = self._check()
        self._last_poll_ms = now = now_ms()
        self._m.poll.record(1.0, now)
        self._finish_previous_poll(strict=True)
        check_max_records(max_records, "ShareConsumer.poll()")
        limit = self.config.max_poll_records if max_records is None else max_records
        if self._iter:
            # `async for` stopped before handing these out (they are acquired, and still
            # in `_delivered`): they come first
            taken = self._iter[-limit:][::-1]
            del self._iter[-limit:]
            return taken
        deadline = anyio.current_time() + max(timeout_ms, 0) / 1000.0
        driver.wakeup()  # piggyback the decisions on the next fetch now
        while True:
            self._raise_background()
            records = self._fetcher.drain(limit, now_ms())
            if records:
                self._delivered = [await self._bind(r) for r in records]
                self._m.records_consumed.record(len(records), now)
                return list(self._delivered)
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                return []
            self._arrived = anyio.Event()
            driver.wakeup()
            with anyio.move_on_after(min(remaining, _WAIT_SLICE_S)):
                await self._arrived.wait()
            driver.check()

    def __aiter__(self) -> ShareConsumer:
        return self

    async def __anext__(self) -> ShareRecord[Any, Any]:
        while not self._iter:
            if self._closed:
                raise StopAsyncIteration
            self._iter = await self.poll(timeout_ms=_WAIT_SLICE_S * 1000)
            self._iter.reverse()
        return self._iter.pop()

    # -- acknowledging --------------------------------------------------------------------------

    async def acknowledge(
        self,
        records: ShareRecord[Any, Any] | Iterable[ShareRecord[Any, Any]],
        ack_type: AcknowledgeType = AcknowledgeType.ACCEPT,
    ) -> None:
        """Record how records were handled; sent with the next poll or `commit`.

        Raises AcquisitionLockTimeoutError for a record whose lock expired (the broker
        already released it), AcknowledgementError for one acknowledged twice or not held.
        With several records, every one that can be acknowledged is, then the first error
        is raised.
        """
        self._check()
        items = [records] if isinstance(records, ShareRecord) else list(records)
        now = now_ms()
        first: KafkaError | None = None
        for record in items:
            try:
                self._acks.acknowledge(
                    TopicPartition(record.topic, record.partition),
                    record.offset,
                    ack_type,
                    now,
                    record.delivery_count,
                )
            except AcknowledgementError as exc:
                first = first or exc
        if first is not None:
            raise first

    async def commit(
        self, timeout_ms: float | None = None
    ) -> dict[TopicPartition, KafkaError | None]:
        """Send every pending acknowledgement now and wait for the broker's answers.

        Returns {partition: None (applied) or the error}, e.g. InvalidRecordStateError when
        a lock had expired on the broker, ShareSessionResetError when the session was lost.
        In implicit mode, the records of the last poll are accepted first.
        """
        driver = self._check()
        self._finish_previous_poll(strict=False)
        timeout = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        event = CommitAcknowledgementsEvent(now_ms() + timeout)
        self._events.put(event)
        driver.wakeup()
        result = await event.wait(timeout / 1000.0 + 1.0)
        self._report(self._fetcher.drain_outcomes())
        return result

    def _on_commit_event(self, event: CommitAcknowledgementsEvent, now: float) -> None:
        def done(outcomes: dict[TopicPartition, KafkaError | None]) -> None:
            event.complete(outcomes)

        self._fetcher.commit(done)

    def _on_acknowledge_on_close(self, event: AcknowledgeOnCloseEvent, now: float) -> None:
        fetcher = self._fetcher
        fetcher.close()
        self._processor.complete_when(event, lambda: fetcher.closed)

    def _on_leave_on_close(self, event: LeaveOnCloseEvent, now: float) -> None:
        member = self._member
        member.leave()
        self._processor.complete_when(event, lambda: member.state is not MemberState.LEAVING)

    # -- helpers --------------------------------------------------------------------------------

    def _check(self) -> NetworkDriver:
        if self._closed:
            raise ClientClosedError("the share consumer is closed; create a new ShareConsumer")
        return self._shell.check(closing_ok=True)

    async def _bind(self, record: ShareRecord[Any, Any]) -> ShareRecord[Any, Any]:
        """Deserialize (deserializers of any shape, awaited here) and attach the acker."""
        config = self.config
        for field, deserializer in (
            ("key", config.key_deserializer),
            ("value", config.value_deserializer),
        ):
            if deserializer is None:
                continue
            codec = self._codecs.get(field)
            if codec is None:
                codec = self._codecs[field] = FieldCodec(deserializer, field, deserializer=True)
            data = getattr(record, field)
            ctx = SerializationContext(
                record.topic, field, record.partition, record.offset, record.headers
            )
            try:
                value = codec.fn(data) if codec.plain else await deserialize(codec, data, ctx)
            except Exception as exc:
                raise located(exc, ctx, "deserializer") from exc
            setattr(record, field, value)
        record._acknowledger = self.acknowledge
        return record

    def _finish_previous_poll(self, *, strict: bool) -> None:
        """Implicit mode: accept what the last poll returned and nobody acknowledged.
        Explicit mode (strict): every record must have been acknowledged."""
        if not self._delivered:
            return
        now = now_ms()
        unseen = {id(r) for r in self._iter}  # still in `async for`'s hands: never seen
        open_records = [
            r
            for r in self._delivered
            if id(r) not in unseen
            and self._acks.unacknowledged(
                TopicPartition(r.topic, r.partition), r.offset, r.delivery_count
            )
        ]
        if self._explicit:
            if not strict:
                return  # commit/close: the records stay the application's to acknowledge
            if open_records:
                first = open_records[0]
                raise AcknowledgementError(
                    f"{len(open_records)} record(s) of the previous poll are not acknowledged "
                    f"(first: {first.topic}[{first.partition}] offset {first.offset}); in "
                    "explicit acknowledgement mode acknowledge every record before polling again"
                )
        else:
            for r in open_records:
                tp = TopicPartition(r.topic, r.partition)
                try:
                    self._acks.acknowledge(
                        tp, r.offset, AcknowledgeType.ACCEPT, now, r.delivery_count
                    )
                except AcquisitionLockTimeoutError as exc:
                    self._report([AckOutcome(tp, (r.offset,), exc)])
        self._delivered = [r for r in self._delivered if id(r) in unseen]
        self._acks.forget_expired(now)

    def _raise_background(self) -> None:
        self._report(self._fetcher.drain_outcomes())
        errors = self._coordinator.drain_errors() + self._fetcher.drain_errors()
        if self._member.fatal_error is not None:
            errors.insert(0, self._member.fatal_error)
        if errors:
            raise errors[0]

    def _report(self, outcomes: list[AckOutcome]) -> None:
        callback = self.config.on_acknowledgement
        for outcome in outcomes:
            if outcome.error is not None:
                log.warning(
                    "acknowledgement of %s offsets %s failed: %s",
                    outcome.partition,
                    _span(outcome.offsets),
                    outcome.error,
                )
            if callback is not None:
                callback(outcome)

    def _records_arrived(self) -> None:
        self._arrived.set()


def _span(offsets: tuple[int, ...]) -> str:
    if not offsets:
        return "-"
    return str(offsets[0]) if len(offsets) == 1 else f"{offsets[0]}..{offsets[-1]}"


__all__ = ["CommitAcknowledgementsEvent", "ShareConsumer"]
