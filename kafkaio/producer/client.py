"""kafkaio.Producer: the application side of producing (serialize, partition, append, await).

The network side is the Sender, a request manager run by the NetworkDriver in one task.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.lowlevel

from kafkaio.backoff import ExponentialBackoff
from kafkaio.config import split_connection_options
from kafkaio.errors import KafkaConfigError, KafkaError, KafkaTimeoutError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.metadata.manager import MetadataManager
from kafkaio.metrics import (
    HealthSnapshot,
    MetricsRegistry,
    MetricsSnapshot,
    make_registry,
)
from kafkaio.metrics.connection import ConnectionMetrics
from kafkaio.metrics.producer import ProducerMetrics, ProducerRecorder
from kafkaio.metrics.timing import TimedManager
from kafkaio.net.manager import parse_bootstrap_servers
from kafkaio.producer.accumulator import RecordAccumulator
from kafkaio.producer.appender import MAX_TIMESTAMP, RecordAppender, TopicRoute
from kafkaio.producer.batch import ProducerBatch
from kafkaio.producer.config import PRODUCER_OPTIONS, ProducerConfig
from kafkaio.producer.errors import ProducerClosedError, RecordTooLargeError, WouldBlockError
from kafkaio.producer.events import (
    AbortTransactionEvent,
    CommitTransactionEvent,
    InitTransactionsEvent,
    SendOffsetsEvent,
)
from kafkaio.producer.future import DeliveryFuture, RecordMetadata
from kafkaio.producer.idempotence import IdempotenceManager, IdState
from kafkaio.producer.memory import MemoryBudget
from kafkaio.producer.partitioner import DefaultPartitioner
from kafkaio.producer.sender import Sender
from kafkaio.producer.transaction_state import TxnResult, TxnState
from kafkaio.producer.transactions import TransactionManager, group_metadata_of, to_offsets
from kafkaio.records import BatchBuilder
from kafkaio.runtime.driver import NetworkDriver, now_ms
from kafkaio.runtime.events import ApplicationEvent, ApplicationEventQueue
from kafkaio.runtime.processor import ApplicationEventProcessor
from kafkaio.runtime.requests import RequestManager
from kafkaio.runtime.shell import AsyncClient, ClientShell, Lifecycle, timeout_ms_arg
from kafkaio.serde.base import FieldCodec, SerializationContext, located, serialize_now, to_bytes
from kafkaio.serde.base import serialize as serde_serialize
from kafkaio.structs import ConsumerGroupMetadata, OffsetAndMetadata
from kafkaio.validate import check_bool, check_partition, check_topic

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from kafkaio.options import ProducerOptions

log = logging.getLogger("kafkaio.producer")

HeadersArg = Sequence[tuple[str, "bytes | None"]] | Mapping[str, "bytes | None"] | None
_BYTES = (bytes, bytearray, memoryview)
_MAX_TIMESTAMP = MAX_TIMESTAMP  # a record's timestamp is an int64
_time_ns = time.time_ns


@dataclass(slots=True)
class ProducerRecord:
    """A record as interceptors see it in ``on_send`` (they may return a changed copy)."""

    topic: str
    value: Any
    key: Any = None
    partition: int | None = None
    headers: HeadersArg = None
    timestamp_ms: int | None = None


# Enum member lookups are slow on the per-record path: look them up once.
_RUNNING = Lifecycle.RUNNING
_ID_FATAL = IdState.FATAL


class Producer(AsyncClient):
    """An asynchronous Kafka producer: ``async with Producer(bootstrap_servers=...) as p``.

    ``await p.send(topic, value, key=...)`` returns the RecordMetadata once the broker acked;
    ``await p.enqueue(...)`` returns a DeliveryFuture as soon as the record is buffered
    (waiting only while ``buffer_memory`` is full). Options: the Java client's producer
    settings in snake_case (acks, linger_ms, batch_size, buffer_memory, compression_type,
    max_request_size, delivery_timeout_ms, retry_backoff_ms, retry_backoff_max_ms,
    enable_idempotence, partitioner, metadata_max_age_ms, max_block_ms, key_serializer,
    value_serializer, interceptors) plus every connection option (client_id,
    request_timeout_ms, max_in_flight_requests_per_connection, security_protocol, ...).
    ``metrics_enabled=False`` turns metrics off (``metrics()`` then reads ``{}``).

    Call ``start``/``close`` from the same task (``async with`` does). Every record handed
    to the producer ends with metadata or an error: ``close`` flushes, and records it could
    not deliver fail with ProducerClosedError.

    Transactions: ``Producer(..., transactional_id="app-1")``; ``start`` also runs
    ``init_transactions`` (fencing older producers with the same id), then ``async with
    p.transaction(): ...`` (or ``begin_transaction``/``commit_transaction``/
    ``abort_transaction``) and ``send_offsets_to_transaction`` for consume-transform-produce.
    See docs/transactions.md.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        metrics_enabled: bool = True,
        **options: Unpack[ProducerOptions],
    ) -> None:
        options.setdefault("client_id", "kafkaio-producer")
        check_bool("metrics_enabled", metrics_enabled)
        parse_bootstrap_servers(bootstrap_servers)  # a wrong value fails here, not in start()
        conn_config, own = split_connection_options(options, PRODUCER_OPTIONS, "Producer")
        config = self.config = ProducerConfig.from_options(own, conn_config)
        self._bootstrap = bootstrap_servers
        self._conn_config = conn_config
        # metrics (metrics_enabled=False: a null registry, recording does nothing)
        self._registry = make_registry(conn_config.client_id or "", "producer", metrics_enabled)
        self._m = ProducerMetrics(self._registry)
        self._conn_metrics = ConnectionMetrics(self._registry)
        backoff = ExponentialBackoff(config.retry_backoff_ms, config.retry_backoff_max_ms)
        self._metadata = MetadataManager(
            metadata_max_age_ms=config.metadata_max_age_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
            allow_auto_topic_creation=True,
        )
        self._memory = memory = MemoryBudget(config.buffer_memory)
        self._m.bind_gauges(
            buffer_total=lambda now: float(memory.limit),
            buffer_available=lambda now: float(memory.available),
            waiting=lambda now: float(memory.waiters),
        )
        self._accumulator = RecordAccumulator(
            batch_size=config.batch_size,
            compression=config.compression_type,
            linger_ms=config.linger_ms,
            delivery_timeout_ms=config.delivery_timeout_ms,
            memory=self._memory,
            clock=now_ms,
            transactional=config.transactional_id is not None,
            keep_futures=any(hasattr(i, "on_acknowledgement") for i in config.interceptors),
            max_request_size=config.max_request_size,
        )
        self._idempotence = IdempotenceManager(
            enabled=config.idempotence_wanted,
            required=config.idempotence_required,
            backoff=backoff,
            transactional=config.transactional_id is not None,
        )
        self._txn: TransactionManager | None = None
        if config.transactional_id is not None:
            self._txn = TransactionManager(
                config.transactional_id,
                config.transaction_timeout_ms,
                self._idempotence,
                backoff=backoff,
                request_timeout_ms=config.request_timeout_ms,
            )
        self._acks_interceptors = [
            i for i in config.interceptors if hasattr(i, "on_acknowledgement")
        ]
        self._send_interceptors = [i for i in config.interceptors if hasattr(i, "on_send")]
        self._sender = Sender(
            config,
            self._accumulator,
            self._metadata,
            self._idempotence,
            backoff=backoff,
            on_batch_done=self._acknowledge if self._acks_interceptors else None,
            transactions=self._txn,
            recorder=ProducerRecorder(self._m) if self._registry.enabled else None,
        )
        self._custom_partitioner = config.partitioner
        # Plain records (bytes, no serializers, interceptors, custom partitioner or
        # transaction) may take the appender's fast path.
        self._fast_ok = (
            not self._send_interceptors
            and config.key_serializer is None
            and config.value_serializer is None
            and config.partitioner is None
            and self._txn is None
        )
        # serializers other than plain `f(value)` callables (async, or taking a context)
        self._key_codec = _codec(config.key_serializer, "key")
        self._value_codec = _codec(config.value_serializer, "value")
        self._plain_serializers = self._key_codec is None and self._value_codec is None
        # routes records to batches, plain ones without the general path (compiled with
        # mypyc, see appender.py)
        self._appender = RecordAppender(
            self._accumulator,
            DefaultPartitioner(config.batch_size),
            min(config.max_request_size, config.buffer_memory),
            self._fast_ok,
            self._on_added,
            self._produce,
        )
        if type(self).produce is Producer.produce:
            # the compiled appender's bound method: the same call as the method below
            # without an interpreted frame in between (that frame cost as much as the rest
            # of a plain record's way into its batch)
            self.produce = self._appender.produce  # type: ignore[method-assign]
        # what the appender knows is as of one metadata snapshot and a healthy producer
        self._metadata.add_listener(self._appender.clear)
        self._idempotence.on_fatal = self._appender.clear
        self._yield_next = False  # a batch filled up: give the network task a turn
        enabled = self._registry.enabled
        sender: RequestManager = self._sender
        if enabled:
            sender = TimedManager(self._sender, self._m.request_latency)
        # the transactional calls (init, send offsets, commit, abort) are application events
        # the network task applies (kafkaio.producer.events)
        self._events = ApplicationEventQueue()
        self._processor = ApplicationEventProcessor(self._events)
        if self._txn is not None:
            self._register_transaction_events(self._txn)
        self._shell = ClientShell(
            "producer",
            bootstrap_servers,
            self._conn_config,
            metadata=self._metadata,
            managers=[self._processor, sender],
            extra_nodes=None if self._txn is None else self._txn.addresses,
            conn_metrics=self._conn_metrics if enabled else None,
            on_task_end=self._on_task_end,
        )
        self._driver: NetworkDriver | None = None  # the shell's, once started

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Start the network task and load cluster metadata: raises BootstrapError when no
        broker answers within max_block_ms (a fatal error, such as a refused login, as it
        is). A producer starts once."""
        await self._shell.start(self.config.max_block_ms)
        self._driver = self._shell.driver
        if self._txn is not None:
            try:
                await self.init_transactions()
            except BaseException:
                await self.close(timeout_ms=0)
                raise
        config = self.config
        if config.enable_idempotence is None and not config.idempotence_wanted:
            log.info(
                "idempotence is off: acks=%s and max_in_flight=%d (it needs acks='all' and "
                "at most 5 in flight)",
                config.acks,
                config.max_in_flight,
            )
        log.info(
            "producer started (client_id=%s, acks=%s, compression=%s)",
            self._conn_config.client_id,
            config.acks,
            config.compression_type.name.lower(),
        )

    def _on_task_end(self, fatal: BaseException | None) -> None:
        """The network task ended: records take the slow path (which raises) from now; if
        it failed, every buffered record fails with it."""
        self._appender.clear()
        if fatal is not None:
            self._sender.abort(
                ProducerClosedError(f"the producer's network task failed: {fatal!r}")
            )

    async def close(self, timeout_ms: float | None = None, *, timeout: float | None = None) -> None:
        """Flush for up to ``timeout_ms`` (None: until every record completes), then stop.
        Records still undelivered then fail with ProducerClosedError. A transaction left open
        (begun, not committed) is aborted first, as Java's producer does on close: its unsent
        records fail with TransactionAbortedError. Closing twice is harmless; ``close()``
        may run in another task than ``start()`` and under a cancel scope. (``timeout`` in
        seconds is deprecated.)"""
        limit = timeout_ms_arg(timeout_ms, timeout, None, "Producer.close")
        self._appender.clear()

        async def flush() -> None:
            started = anyio.current_time()
            await self._abort_open_transaction(limit)
            left = None
            if limit is not None:
                left = max(0.0, limit - (anyio.current_time() - started) * 1000.0)
            self._accumulator.closing = True
            self._wake()
            try:
                await self._wait_for(
                    self._accumulator.incomplete(), None if left is None else left / 1000.0
                )
            except KafkaTimeoutError:
                pass

        def fail_undelivered() -> None:
            left = self._sender.abort(
                ProducerClosedError(
                    "the producer was closed before this record was delivered (close() "
                    "timed out or the record could not be sent); call flush() before "
                    "close(), or give close() a longer timeout"
                )
            )
            if left:
                log.warning("producer closed with %d undelivered records (failed)", left)
            for interceptor in self.config.interceptors:  # as Java's ProducerInterceptor.close
                if callable(getattr(interceptor, "close", None)):
                    try:
                        interceptor.close()
                    except Exception:
                        log.exception("interceptor %r failed in close", interceptor)

        await self._shell.close(None, flush, fail_undelivered)
        log.info("producer closed")

    async def _abort_open_transaction(self, timeout_ms: float | None) -> None:
        """close(): abort a transaction the application left open, so that read_committed
        consumers need not wait for transaction_timeout_ms (waits at most `timeout_ms`, or
        max_block_ms)."""
        txn = self._txn
        if txn is None or txn.state not in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR):
            return
        log.warning(
            "closing the producer with a transaction open (%s): aborting it", txn.state.value
        )
        event = AbortTransactionEvent(math.inf)
        self._events.put(event)
        limit = self.config.max_block_ms if timeout_ms is None else timeout_ms
        seconds = limit / 1000.0
        with anyio.move_on_after(seconds):
            with contextlib.suppress(KafkaError):
                await event.wait()
        if not event.done:
            log.warning("the abort did not complete within %g s", seconds)
        elif event.error is not None:
            log.warning("aborting the open transaction failed: %s", event.error)

    # -- producing -----------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        headers: HeadersArg = None,
        timestamp_ms: int | None = None,
    ) -> RecordMetadata:
        """Send one record and wait until the broker acknowledged it."""
        future = await self.enqueue(topic, value, key, partition, headers, timestamp_ms)
        return await future

    async def enqueue(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        headers: HeadersArg = None,
        timestamp_ms: int | None = None,
    ) -> DeliveryFuture:
        """Buffer one record and return its DeliveryFuture.

        Waits only while the topic's metadata is unknown or ``buffer_memory`` is full (both
        at most ``max_block_ms``: then KafkaTimeoutError). Raises RecordTooLargeError for a
        record larger than max_request_size or buffer_memory. ``produce`` does the same
        without awaiting (it raises WouldBlockError where this waits).
        """
        if self._yield_next:
            # The last record filled a batch: let the network task send it now, so sending
            # overlaps with producing (a record is appended only after this point, so a
            # cancellation here loses nothing).
            self._yield_next = False
            await anyio.lowlevel.checkpoint()
        future = self._appender.append(topic, value, key, partition, headers, timestamp_ms)
        if future is not None:
            return future
        return await self._enqueue(topic, value, key, partition, headers, timestamp_ms)

    def produce(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        headers: HeadersArg = None,
        timestamp_ms: int | None = None,
    ) -> DeliveryFuture:
        """Buffer one record without awaiting and return its DeliveryFuture: ``enqueue``
        for code that cannot or need not wait (and the fastest way to hand records over).

        Raises WouldBlockError (a BufferError, as confluent-kafka's ``produce``) when the
        record cannot be buffered now: ``buffer_memory`` is full, or the topic's partitions
        are not known yet (the producer starts fetching them). ``await enqueue(...)`` the
        record then: it waits for room or metadata. Async serializers need ``enqueue`` too
        (KafkaConfigError here). The network task runs only while the application awaits
        something: a loop that only calls ``produce`` should await now and then (e.g.
        ``enqueue`` when WouldBlockError says so).
        """
        future = self._appender.append(topic, value, key, partition, headers, timestamp_ms)
        if future is not None:
            return future
        return self._produce(topic, value, key, partition, headers, timestamp_ms)

    def _on_added(self, tp: TopicPartition, new_batch: bool, full: bool) -> None:
        """An append opened a batch of `tp` or filled one: wake the network task if it must
        act now."""
        if new_batch and not self._sender.has_in_flight(tp):
            # the network task must learn when its linger ends (not while a batch of the
            # partition is in flight: this one cannot go before that one's response, whose
            # handling polls the sender)
            assert self._driver is not None
            self._driver.wakeup()
        if full:
            self._batch_full(tp)

    def _batch_full(self, tp: TopicPartition) -> None:
        """A batch of `tp` filled up: wake the network task, and give it a turn at the next
        record. Not while `tp` has as many batches in flight as it may: this one could not
        be sent before a response, whose handling polls the sender anyway."""
        if not self._sender.may_send_full(tp):
            return
        assert self._driver is not None
        self._driver.wakeup()
        self._yield_next = True

    async def _enqueue(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        headers: HeadersArg,
        timestamp_ms: int | None,
    ) -> DeliveryFuture:
        """The general path of `enqueue` (serializers, interceptors, headers, waits)."""
        record = self._intercept(topic, value, key, partition, headers, timestamp_ms)
        topic, partition, timestamp_ms = record.topic, record.partition, record.timestamp_ms
        header_list = _headers(record.headers)
        if self._plain_serializers:
            key_bytes, value_bytes = self._serialize_plain(record)
        else:
            key_bytes, value_bytes = await self._serialize(
                topic, partition, record.key, record.value, header_list
            )
            self._check_open()
        size = self._record_size(topic, key_bytes, value_bytes, header_list)
        if timestamp_ms is None:
            timestamp_ms = _time_ns() // 1_000_000
        route = await self._partitions(topic)
        tp = self._route(topic, key_bytes, partition, route)
        memory = self._memory
        if not memory.try_reserve(size):
            assert self._driver is not None
            if not self._sender.requests_in_flight:
                # while we wait, every batch counts as ready (with requests in flight, the
                # handling of their responses polls the sender anyway, as Java's producer)
                self._driver.wakeup()
            await memory.reserve(size, self.config.max_block_ms)
            try:
                self._check_open()
            except KafkaError:
                memory.release(size)
                raise
        return self._append(tp, timestamp_ms, key_bytes, value_bytes, header_list, size, route)

    def _produce(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        headers: HeadersArg,
        timestamp_ms: int | None,
    ) -> DeliveryFuture:
        """The general path of `produce`: `_enqueue`, raising where that would wait."""
        record = self._intercept(topic, value, key, partition, headers, timestamp_ms)
        topic, partition, timestamp_ms = record.topic, record.partition, record.timestamp_ms
        header_list = _headers(record.headers)
        if self._plain_serializers:
            key_bytes, value_bytes = self._serialize_plain(record)
        else:
            key_bytes, value_bytes = self._serialize_now(
                topic, partition, record.key, record.value, header_list
            )
        size = self._record_size(topic, key_bytes, value_bytes, header_list)
        if timestamp_ms is None:
            timestamp_ms = _time_ns() // 1_000_000
        route = self._partitions_now(topic)
        if route is None:
            raise WouldBlockError(
                f"the partitions of topic {topic!r} are not known yet (the producer is "
                "fetching them): await producer.enqueue(...) for this record, which waits "
                "for them, or await producer.partitions_for(topic) first"
            )
        tp = self._route(topic, key_bytes, partition, route)
        memory = self._memory
        if not memory.try_reserve(size):
            assert self._driver is not None
            if not self._sender.requests_in_flight:
                self._driver.wakeup()  # every batch counts as ready while the buffer is full
            raise WouldBlockError(
                f"buffer_memory is full ({memory.used} of {memory.limit} bytes in use, "
                f"{'others wait for room' if memory.waiters else f'{size} more needed'}): "
                "await producer.enqueue(...) for this record, which waits for room (the "
                "network task sends while the application awaits)"
            )
        return self._append(tp, timestamp_ms, key_bytes, value_bytes, header_list, size, route)

    def _intercept(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        headers: HeadersArg,
        timestamp_ms: int | None,
    ) -> ProducerRecord:
        """The record after the checks every record passes and the on_send interceptors."""
        self._check_open()
        txn = self._txn
        if txn is not None:
            txn.check_can_send()  # raises outside a transaction
        record = ProducerRecord(topic, value, key, partition, headers, timestamp_ms)
        for interceptor in self._send_interceptors:
            try:
                changed = interceptor.on_send(record)
            except Exception:
                log.exception("interceptor %r failed in on_send", interceptor)
                continue
            if isinstance(changed, ProducerRecord):
                record = changed
        _check_record(record.topic, record.partition, record.timestamp_ms)
        return record

    def _serialize_plain(self, record: ProducerRecord) -> tuple[bytes | None, bytes | None]:
        config = self.config
        topic, partition = record.topic, record.partition
        return (
            _serialize(config.key_serializer, record.key, "key", topic, partition),
            _serialize(config.value_serializer, record.value, "value", topic, partition),
        )

    def _record_size(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None,
    ) -> int:
        """The record's size estimate; RecordTooLargeError if it can never be sent."""
        size = BatchBuilder.estimate_size_in_bytes(key, value, headers)
        config = self.config
        if size > config.max_request_size or size > config.buffer_memory:
            raise RecordTooLargeError(
                f"a record for {topic!r} is about {size} bytes serialized, more than "
                f"max_request_size ({config.max_request_size}) or buffer_memory "
                f"({config.buffer_memory}); send a smaller record or raise those limits"
            )
        return size

    def _route(
        self,
        topic: str,
        key: bytes | None,
        partition: int | None,
        route: TopicRoute,
    ) -> TopicPartition:
        """The partition a record goes to (given, the custom partitioner's or the default
        one's); a transactional producer adds it to the transaction."""
        partitions, available = route.partitions, route.available
        if partition is None:
            if self._custom_partitioner is not None:
                partition = self._custom_partitioner(key, partitions, available)
                if (
                    not isinstance(partition, int)
                    or isinstance(partition, bool)
                    or not 0 <= partition < len(partitions)
                ):
                    raise KafkaConfigError(
                        f"the partitioner {self._custom_partitioner!r} chose partition "
                        f"{partition!r} for topic {topic!r}, which has {len(partitions)} "
                        f"partitions (0..{len(partitions) - 1}): it must return one of them"
                    )
            else:
                partition = self._appender.partitioner.partition(
                    topic, key, partitions, available
                )
        elif not 0 <= partition < len(partitions):
            raise KafkaConfigError(
                f"partition {partition} of topic {topic!r} does not exist: the topic has "
                f"{len(partitions)} partitions (0..{len(partitions) - 1})"
            )
        tp = TopicPartition(topic, partition)
        txn = self._txn
        if txn is not None and txn.maybe_add_partition(tp):
            assert self._driver is not None
            self._driver.wakeup()  # AddPartitionsToTxn
        return tp

    def _append(
        self,
        tp: TopicPartition,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None,
        size: int,
        route: TopicRoute,
    ) -> DeliveryFuture:
        """Append a record of the general path whose memory is reserved (the appender keeps
        the sticky partitioner's count and the open batches as for a plain record)."""
        sticky = key is None and self._custom_partitioner is None
        return self._appender.add(
            tp,
            timestamp_ms,
            key,
            value,
            headers,
            size,
            route if sticky else None,
            self._fast_ok,
        )

    async def _serialize(
        self,
        topic: str,
        partition: int | None,
        key: Any,
        value: Any,
        headers: list[tuple[str, bytes | None]] | None,
    ) -> tuple[bytes | None, bytes | None]:
        """Key and value through serializers of any shape (awaited here, in the caller's
        task): the general path of `_enqueue` when one is async or takes a context."""
        config = self.config
        out: list[bytes | None] = []
        for codec, serializer, data, field in (
            (self._key_codec, config.key_serializer, key, "key"),
            (self._value_codec, config.value_serializer, value, "value"),
        ):
            if codec is None:
                out.append(_serialize(serializer, data, field, topic, partition))
            else:
                ctx = SerializationContext(topic, field, partition, None, headers)
                out.append(await serde_serialize(codec, data, ctx))
        return out[0], out[1]

    def _serialize_now(
        self,
        topic: str,
        partition: int | None,
        key: Any,
        value: Any,
        headers: list[tuple[str, bytes | None]] | None,
    ) -> tuple[bytes | None, bytes | None]:
        """`_serialize` for `produce`: serializers that take a context, not async ones."""
        config = self.config
        out: list[bytes | None] = []
        for codec, serializer, data, field in (
            (self._key_codec, config.key_serializer, key, "key"),
            (self._value_codec, config.value_serializer, value, "value"),
        ):
            if codec is None:
                out.append(_serialize(serializer, data, field, topic, partition))
            elif codec.is_async:
                raise KafkaConfigError(
                    f"the {field}_serializer is async: produce() cannot await it; use "
                    "await producer.enqueue(...) (or send) with it"
                )
            else:
                ctx = SerializationContext(topic, field, partition, None, headers)
                out.append(serialize_now(codec, data, ctx))
        return out[0], out[1]

    async def flush(
        self, *, timeout_ms: float | None = None, timeout: float | None = None
    ) -> None:
        """Send everything buffered now and wait until it is acknowledged or failed.

        Raises KafkaTimeoutError after ``timeout_ms`` (None: no limit); the records stay in
        the producer. Record errors are not raised here: they are in each record's future.
        (``timeout`` in seconds is deprecated. The limit is keyword-only: confluent-kafka's
        ``flush(10)`` means seconds, every kafkaio timeout milliseconds.)
        """
        limit = timeout_ms_arg(timeout_ms, timeout, None, "Producer.flush")
        self._check_open()
        assert self._driver is not None
        self._accumulator.begin_flush()
        self._driver.wakeup()
        try:
            await self._wait_for(
                self._accumulator.incomplete(), None if limit is None else limit / 1000.0
            )
        finally:
            self._accumulator.end_flush()

    @property
    def buffered_bytes(self) -> int:
        """Bytes of records held by the producer now (at most ``buffer_memory``)."""
        return self._memory.used

    async def partitions_for(self, topic: str) -> list[int]:
        """The partition indexes of ``topic`` (waits for its metadata up to max_block_ms)."""
        self._check_open()
        return list((await self._partitions(topic)).partitions)

    # -- metrics and health --------------------------------------------------------------

    @property
    def metrics_registry(self) -> MetricsRegistry:
        """The registry behind ``metrics()`` (for exporters, e.g. kafkaio.metrics.otel)."""
        return self._registry

    def metrics(self) -> MetricsSnapshot:
        """The producer's metrics now, under the Java client's names, as a plain dict:
        ``{"record-send-total": ..., "request-latency-avg": ..., "buffer-available-bytes":
        ..., "connection-count": ..., "topics": {...}}`` ({} with metrics_enabled=False).
        Rates and averages cover the last 30-60 s; ``*-total`` count since the start."""
        return self._registry.snapshot()

    def health(self) -> HealthSnapshot:
        """Connections and the producer's state now (for health endpoints)."""
        connections = self._shell.connection_states()
        driver = self._driver
        fatal = None if driver is None else driver.fatal_error
        if fatal is None and self._idempotence.state is _ID_FATAL:
            fatal = self._idempotence.fatal_error
        if fatal is None and self._txn is not None:
            fatal = self._txn.fatal_error
        return HealthSnapshot(
            self._conn_config.client_id or "",
            "producer",
            self._shell.running,
            connections,
            error=None if fatal is None else repr(fatal),
        )

    # -- transactions --------------------------------------------------------------------

    @property
    def transaction_state(self) -> TxnState | None:
        """The transactional state (None for a producer without ``transactional_id``)."""
        return None if self._txn is None else self._txn.state

    async def init_transactions(self) -> None:
        """Get the producer id and epoch for ``transactional_id`` (InitProducerId).

        ``start`` calls it, so calling it again returns at once. It fences older producers
        with the same transactional id and makes the coordinator finish (abort) a
        transaction they left open. Raises ProducerFencedError or another fatal error if
        the producer cannot be used; KafkaTimeoutError after max_block_ms (call it again
        to keep waiting).
        """
        self._require_txn("init_transactions()")
        self._check_open(allow_txn_error=True)
        await self._await_txn(InitTransactionsEvent(math.inf), "init_transactions()")

    def begin_transaction(self) -> None:
        """Open a transaction: records sent from now on are committed or aborted together."""
        txn = self._require_txn("begin_transaction()")
        self._check_open()
        txn.begin()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        group_metadata: ConsumerGroupMetadata | str | Any,
    ) -> None:
        """Commit consumer offsets as part of the transaction (consume-transform-produce).

        ``offsets`` are the next offsets to read per input partition; ``group_metadata`` is
        ``consumer.group_metadata()`` (its generation and member id let the group coordinator
        fence zombie members, KIP-447), or a ConsumerGroupMetadata / group id for a consumer
        using manual ``assign`` (generation -1, empty member id). The offsets become visible
        only when the transaction commits.
        """
        self._require_txn("send_offsets_to_transaction()")
        self._check_open()
        event = SendOffsetsEvent(math.inf, group=group_metadata_of(group_metadata))
        event.offsets = to_offsets(offsets)  # bad input is refused here, at the call
        await self._await_txn(event, "send_offsets_to_transaction()")

    async def commit_transaction(self) -> None:
        """Flush the transaction's records, then commit it (EndTxn).

        If a record or offset of the transaction failed, this raises that error and the
        transaction must be aborted (``abort_transaction``). KafkaTimeoutError after
        max_block_ms: call it again to keep waiting for the same commit.
        """
        self._require_txn("commit_transaction()")
        self._check_open(allow_txn_error=True)
        self._accumulator.begin_flush()
        try:
            await self._await_txn(CommitTransactionEvent(math.inf), "commit_transaction()")
        finally:
            self._accumulator.end_flush()

    async def abort_transaction(self) -> None:
        """Abort the transaction: unsent records fail with TransactionAbortedError, records
        already written are discarded by read_committed consumers, and offsets sent with
        ``send_offsets_to_transaction`` are not committed."""
        self._require_txn("abort_transaction()")
        self._check_open(allow_txn_error=True)
        await self._await_txn(AbortTransactionEvent(math.inf), "abort_transaction()")

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Producer]:
        """``async with producer.transaction():`` begins a transaction, commits it when the
        block ends, and aborts it if the block (or the commit) raises."""
        self.begin_transaction()
        try:
            yield self
        except BaseException:
            await self._abort_quietly()
            raise
        try:
            await self.commit_transaction()
        except BaseException:
            await self._abort_quietly()
            raise

    async def _abort_quietly(self) -> None:
        """Abort after an error in a transaction block, without hiding that error."""
        txn = self._txn
        assert txn is not None
        if txn.state not in (
            TxnState.IN_TRANSACTION,
            TxnState.ABORTABLE_ERROR,
            TxnState.ABORTING_TRANSACTION,
        ):
            return
        with anyio.CancelScope(shield=True):
            try:
                await self.abort_transaction()
            except Exception as exc:
                log.warning("aborting the transaction after an error failed too: %s", exc)

    def _require_txn(self, what: str) -> TransactionManager:
        if self._txn is None:
            raise KafkaConfigError(
                f"{what} needs a transactional producer: pass transactional_id=... to Producer"
            )
        return self._txn

    def _wake(self) -> None:
        if self._driver is not None:
            self._driver.wakeup()

    def _register_transaction_events(self, txn: TransactionManager) -> None:
        """The network task's side of the transactional calls: each event starts (or joins)
        the TransactionManager's call and completes with its result; a call the state
        machine refuses fails its event with that error."""

        def follow(event: ApplicationEvent[None], result: TxnResult) -> None:
            def done(finished: TxnResult) -> None:
                if finished.error is not None:
                    event.fail(finished.error)
                else:
                    event.complete(None)

            result.add_done_callback(done)

        def on_init(event: InitTransactionsEvent, now: float) -> None:
            follow(event, txn.initialize())

        def on_send_offsets(event: SendOffsetsEvent, now: float) -> None:
            follow(event, txn.add_offsets(event.offsets, event.group))

        def on_commit(event: CommitTransactionEvent, now: float) -> None:
            follow(event, txn.begin_commit())

        def on_abort(event: AbortTransactionEvent, now: float) -> None:
            follow(event, txn.begin_abort())

        self._processor.register(InitTransactionsEvent, on_init)
        self._processor.register(SendOffsetsEvent, on_send_offsets)
        self._processor.register(CommitTransactionEvent, on_commit)
        self._processor.register(AbortTransactionEvent, on_abort)

    async def _await_txn(self, event: ApplicationEvent[None], what: str) -> None:
        """Submit a transactional call's event and wait for it, at most max_block_ms."""
        self._events.put(event)
        self._wake()
        seconds = self.config.max_block_ms / 1000.0
        with anyio.move_on_after(seconds) as scope:
            await event.wait()
        if scope.cancelled_caught and not event.done:
            assert self._txn is not None
            raise KafkaTimeoutError(
                f"{what} did not complete within max_block_ms ({self.config.max_block_ms:g} "
                f"ms; transaction state {self._txn.state.value}); it goes on in the "
                "background: call it again to keep waiting, or check the brokers"
            )

    # -- internals -----------------------------------------------------------------------

    def _check_open(self, *, allow_txn_error: bool = False) -> None:
        if self._shell.state is not _RUNNING:
            if self._shell.state is Lifecycle.NEW:
                raise ProducerClosedError(
                    "the producer is not started: use `async with Producer(...)` or start()"
                )
            raise ProducerClosedError(
                "the producer is closed; a closed producer cannot be reused: make a new one"
            )
        self._shell.check()
        txn = self._txn
        if txn is not None and txn.fatal_error is not None and not allow_txn_error:
            raise txn.fatal_error
        if self._idempotence.state is IdState.FATAL:
            raise ProducerClosedError(
                f"the producer cannot produce: {self._idempotence.fatal_error}"
            ) from self._idempotence.fatal_error

    def _partitions_now(self, topic: str) -> TopicRoute | None:
        """``topic``'s partitions as the current metadata knows them; None if it does not
        (then the producer asks for them)."""
        metadata = self._metadata
        routes = self._appender.routes  # dropped when the metadata changes
        route = routes.get(topic)
        if route is not None:
            return route
        cluster = metadata.cluster
        partitions = cluster.partitions_for(topic)
        if partitions:
            route = routes[topic] = TopicRoute(
                topic, cluster.version, partitions, cluster.available_partitions_for(topic)
            )
            return route
        if topic not in metadata.topics:
            metadata.add_topics([topic])
            assert self._driver is not None
            self._driver.wakeup()
        return None

    async def _partitions(self, topic: str) -> TopicRoute:
        entry = self._partitions_now(topic)
        if entry is not None:
            return entry
        metadata = self._metadata
        cluster = metadata.cluster
        deadline = anyio.current_time() + self.config.max_block_ms / 1000.0
        while True:
            entry = self._partitions_now(topic)
            if entry is not None:
                return entry
            error = metadata.topic_errors().get(topic)
            if error is not None:
                raise error
            assert self._driver is not None
            with anyio.move_on_after(max(deadline - anyio.current_time(), 0.0)):
                await self._driver.wait_for_metadata(cluster.version)
            self._check_open()
            if metadata.version == cluster.version:
                info = cluster.topics.get(topic)
                why = f" (error code {info.error})" if info is not None and info.error else ""
                raise KafkaTimeoutError(
                    f"topic {topic!r} is not in the cluster metadata after max_block_ms "
                    f"({self.config.max_block_ms:g} ms){why}; create the topic, or check "
                    "its name and that the brokers are reachable"
                )
            cluster = metadata.cluster

    async def _wait_for(self, batches: list[ProducerBatch], timeout: float | None) -> None:
        seconds = math.inf if timeout is None else timeout
        with anyio.move_on_after(seconds) as scope:
            for batch in batches:
                await batch.wait()
        if scope.cancelled_caught:
            left = sum(b.record_count for b in batches if not b.done)
            raise KafkaTimeoutError(
                f"{left} records were not acknowledged within {timeout:g} s; they stay in "
                "the producer (check the brokers, or wait longer)"
            )

    def _acknowledge(self, batch: ProducerBatch) -> None:
        for future in batch.futures:
            error = future.exception()  # each record's own: a split batch's parts differ
            metadata = None if error is not None else future.result()
            for interceptor in self._acks_interceptors:
                try:
                    interceptor.on_acknowledgement(metadata, error)
                except Exception:
                    log.exception("interceptor %r failed in on_acknowledgement", interceptor)


def _check_record(topic: Any, partition: Any, timestamp_ms: Any) -> None:
    """What the broker cannot take, refused at the call (before, it failed the network
    task): an illegal topic name (InvalidTopicError, as Java's Topic.validate), a partition
    that is no int >= 0, a timestamp that is no int in 0..2**63-1."""
    check_topic(topic)
    if partition is not None:
        check_partition(partition)
    if timestamp_ms is not None and (
        not isinstance(timestamp_ms, int)
        or isinstance(timestamp_ms, bool)
        or not 0 <= timestamp_ms <= _MAX_TIMESTAMP
    ):
        raise KafkaConfigError(
            f"timestamp_ms must be None or an int of milliseconds since the epoch from 0 to "
            f"{_MAX_TIMESTAMP}, not {timestamp_ms!r}"
        )


def _codec(serializer: Any, field: str) -> FieldCodec | None:
    """None for no serializer or a plain one (called inline by `_serialize`)."""
    if serializer is None:
        return None
    codec = FieldCodec(serializer, field, deserializer=False)
    return None if codec.plain else codec


def _serialize(
    serializer: Any, data: Any, field: str, topic: str, partition: int | None
) -> bytes | None:
    """A key or value through a plain serializer (or none)."""
    if data is None:
        return None
    if serializer is None:
        if type(data) is bytes:
            return data
        return to_bytes(data, field, topic, False)
    try:
        data = serializer(data)
    except Exception as exc:
        ctx = SerializationContext(topic, field, partition)
        raise located(exc, ctx, "serializer") from exc
    if type(data) is bytes or data is None:
        return data
    return to_bytes(data, field, topic, True)


def _headers(headers: HeadersArg) -> list[tuple[str, bytes | None]] | None:
    if not headers:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    out: list[tuple[str, bytes | None]] = []
    for name, value in items:
        if not isinstance(name, str) or not (value is None or isinstance(value, _BYTES)):
            raise KafkaConfigError(f"header {name!r}: names must be str and values bytes or None")
        out.append((name, None if value is None else bytes(value)))
    return out
