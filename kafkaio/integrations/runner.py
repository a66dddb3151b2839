"""ConsumerRunner: a consumer's poll loop as a background task of a web app (or any service),
with a handler-error policy (retry with backoff, dead-letter topic, stop, skip), graceful stop
and a health snapshot.

Enter and exit it from one task (e.g. a FastAPI lifespan or an aiohttp cleanup context).
"""

from __future__ import annotations

import enum
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from types import TracebackType
from typing import Any

import anyio
import anyio.abc

from kafkaio.backoff import ExponentialBackoff
from kafkaio.consumer import Consumer, ConsumerRecord
from kafkaio.errors import KafkaConfigError, KafkaError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.producer import Producer
from kafkaio.runtime.task import ClientTask

log = logging.getLogger("kafkaio.integrations")

RecordHandler = Callable[[ConsumerRecord[Any, Any]], "Awaitable[object] | object"]


class OnError(enum.Enum):
    """What the runner does when the handler raises for a record (after ``retries``)."""

    STOP = "stop"  # stop the loop at the record: not committed, the next member reads it
    DEAD_LETTER = "dead_letter"  # send it to the dead-letter topic, then go on
    SKIP = "skip"  # log it, count it and go on: the record is committed as done (lost)


# Headers a dead-lettered record carries (the original record's headers come first).
DLT_TOPIC = "kafkaio.dlt.original.topic"
DLT_PARTITION = "kafkaio.dlt.original.partition"
DLT_OFFSET = "kafkaio.dlt.original.offset"
DLT_TIMESTAMP = "kafkaio.dlt.original.timestamp"
DLT_EXCEPTION = "kafkaio.dlt.exception"
DLT_MESSAGE = "kafkaio.dlt.exception.message"


class RunnerState(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"


@dataclass(slots=True)
class PartitionStatus:
    """One assigned partition: the consumer's position, the last high watermark seen and
    the lag between them (None until the first fetch of the partition answered)."""

    topic: str
    partition: int
    position: int | None
    highwater: int | None
    lag: int | None


@dataclass(slots=True)
class RunnerStatus:
    """What a health endpoint shows: the loop's state, counters, the last error (handler
    or client) and every assigned partition's lag."""

    state: str
    handled: int
    handler_errors: int
    consecutive_poll_errors: int
    last_error: str | None
    partitions: list[PartitionStatus] = field(default_factory=list)
    retries: int = 0  # handler calls repeated after an error
    dead_lettered: int = 0
    skipped: int = 0

    @property
    def healthy(self) -> bool:
        """Liveness: running and the last poll succeeded (also while the group is joining)."""
        return self.state == RunnerState.RUNNING.value and self.consecutive_poll_errors == 0

    @property
    def ready(self) -> bool:
        """Readiness: healthy and partitions assigned (a group member that joined)."""
        return self.healthy and bool(self.partitions)

    @property
    def total_lag(self) -> int | None:
        lags = [p.lag for p in self.partitions]
        return None if any(lag is None for lag in lags) else sum(lag or 0 for lag in lags)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["healthy"] = self.healthy
        out["ready"] = self.ready
        out["total_lag"] = self.total_lag
        return out


class ConsumerRunner:
    """Runs ``handler(record)`` (sync or async) for every record of `consumer`, in a
    background task: ``async with ConsumerRunner(consumer, handler) as runner: ...``.

    The runner owns the consumer: it starts it on enter and, on exit, stops polling (the
    records of a batch already fetched are all handled first), commits the offsets of the
    records handled (when the consumer has a group_id and auto-commit is off: at least once)
    and closes the consumer (which commits its positions with auto-commit on, and leaves the
    group).

    When the handler raises, the record is retried ``retries`` times (None: until it passes
    or the runner stops) with ``retry_backoff`` between attempts; then ``on_error`` decides:
    "stop" (the default: the loop stops at the record, which is not committed, so nothing is
    lost), "dead_letter" (``dead_letter_producer`` sends it to ``dead_letter_topic`` with
    headers naming its origin and the error, then the loop goes on) or "skip" (logged,
    counted and committed as done: the record is lost to this group). ``stop_on_error=True``
    is on_error="stop" with no retries. Retriable client errors are retried with exponential
    backoff; other client errors stop the loop (state "failed"). ``status()`` is the health
    snapshot.
    """

    def __init__(
        self,
        consumer: Consumer,
        handler: RecordHandler,
        *,
        max_records: int = 500,
        poll_timeout_ms: float = 1000,
        on_error: OnError | str = OnError.STOP,
        retries: int | None = 3,
        retry_backoff: ExponentialBackoff | None = None,
        dead_letter_topic: str | None = None,
        dead_letter_producer: Producer | None = None,
        stop_on_error: bool = False,
        commit_on_stop: bool = True,
        backoff: ExponentialBackoff | None = None,
    ) -> None:
        try:
            policy = OnError(on_error)
        except ValueError:
            choices = ", ".join(repr(p.value) for p in OnError)
            raise KafkaConfigError(f"on_error is {on_error!r}; use one of {choices}") from None
        if stop_on_error:
            policy, retries = OnError.STOP, 0
        if retries is not None and (not isinstance(retries, int) or retries < 0):
            raise KafkaConfigError(f"retries must be None or an int >= 0, got {retries!r}")
        if policy is OnError.DEAD_LETTER and (not dead_letter_topic or dead_letter_producer is None):
            raise KafkaConfigError(
                "on_error='dead_letter' needs dead_letter_topic and dead_letter_producer "
                "(a started Producer whose serializers take the records' keys and values)"
            )
        self._consumer = consumer
        self._handler = handler
        self._max_records = max_records
        self._poll_timeout_ms = poll_timeout_ms
        self._on_error = policy
        self._retries = retries
        self._retry_backoff = retry_backoff or ExponentialBackoff(100, 10_000)
        self._dead_letter_topic = dead_letter_topic
        self._dead_letter_producer = dead_letter_producer
        self._commit_on_stop = commit_on_stop
        self._backoff = backoff or ExponentialBackoff(100, 10_000)
        self._retried = 0
        self._dead_lettered = 0
        self._skipped = 0
        self._task: ClientTask | None = None
        self._poll_scope: anyio.CancelScope | None = None
        self._state = RunnerState.NEW
        self._handled = 0
        self._handler_errors = 0
        self._poll_errors = 0
        self._last_error: str | None = None
        # the next offset after the last record handled (or skipped after a logged error)
        self._done: dict[TopicPartition, int] = {}

    @property
    def consumer(self) -> Consumer:
        """The consumer this runner drives."""
        return self._consumer

    @property
    def state(self) -> RunnerState:
        """Where the consume loop is: new, running, stopping, stopped or failed."""
        return self._state

    async def __aenter__(self) -> ConsumerRunner:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start the consumer and the poll loop."""
        if self._state is not RunnerState.NEW:
            raise KafkaError("a ConsumerRunner starts once; make a new one")
        await self._consumer.start()
        self._task = ClientTask()  # a task of its own: stop() may run in another task
        await self._task.start(self._run)

    async def stop(self) -> None:
        """Stop polling, wait for the running handler, commit, close the consumer."""
        if self._state in (RunnerState.NEW, RunnerState.STOPPED):
            return
        failed = self._state is RunnerState.FAILED
        self._state = RunnerState.STOPPING
        if self._poll_scope is not None:
            self._poll_scope.cancel()
        task, self._task = self._task, None
        try:
            if task is not None:
                await task.wait()
            with anyio.CancelScope(shield=True):
                await self._commit()
        finally:
            await self._consumer.close()
            self._state = RunnerState.FAILED if failed else RunnerState.STOPPED

    async def _commit(self) -> None:
        config = self._consumer.config
        if not self._commit_on_stop or config.group_id is None or config.enable_auto_commit:
            return  # nothing to commit, or close() commits (auto-commit)
        assigned = self._consumer.assignment()
        offsets = {tp: offset for tp, offset in self._done.items() if tp in assigned}
        if not offsets:
            return
        try:
            await self._consumer.commit(offsets)
        except KafkaError as exc:
            log.warning("committing handled records on stop failed: %s", exc)

    def status(self) -> RunnerStatus:
        """Counters, the last error and per-partition position, high watermark and lag."""
        consumer = self._consumer
        partitions = []
        for tp in sorted(consumer.assignment()):
            highwater, lag = consumer.highwater(tp), consumer.lag(tp)
            position = None if highwater is None or lag is None else highwater - lag
            partitions.append(PartitionStatus(tp.topic, tp.partition, position, highwater, lag))
        return RunnerStatus(
            self._state.value,
            self._handled,
            self._handler_errors,
            self._poll_errors,
            self._last_error,
            partitions,
            self._retried,
            self._dead_lettered,
            self._skipped,
        )

    async def _run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        self._state = RunnerState.RUNNING
        task_status.started()
        try:
            while self._state is RunnerState.RUNNING:
                batch = await self._poll()
                if batch is None:
                    continue
                for records in batch.values():
                    for record in records:
                        if not await self._handle(record):
                            self._state = RunnerState.FAILED
                            return
        except Exception as exc:  # a bug in the loop: report it in the health status
            log.exception("the consumer loop stopped")
            self._last_error = repr(exc)
            self._state = RunnerState.FAILED

    async def _poll(self) -> dict[Any, list[ConsumerRecord[Any, Any]]] | None:
        """One getmany; None when it was interrupted (stop) or failed (retried later)."""
        with anyio.CancelScope() as scope:
            self._poll_scope = scope
            if self._state is not RunnerState.RUNNING:
                return None
            try:
                batch = await self._consumer.getmany(
                    timeout_ms=self._poll_timeout_ms, max_records=self._max_records
                )
                self._poll_errors = 0
                return batch
            except KafkaError as exc:
                self._poll_errors += 1
                self._last_error = repr(exc)
                if not exc.retriable:
                    log.error("the consumer failed, stopping its loop: %s", exc)
                    self._state = RunnerState.FAILED
                    return None
                delay = self._backoff.delay_ms(self._poll_errors) / 1000
                log.warning("consumer poll failed (retrying in %.2f s): %s", delay, exc)
                await anyio.sleep(delay)
            finally:
                self._poll_scope = None
        return None

    async def _handle(self, record: ConsumerRecord[Any, Any]) -> bool:
        """Run the handler, with the error policy; False when the loop must stop."""
        attempt = 0
        while True:
            try:
                result = self._handler(record)
                if inspect.isawaitable(result):
                    await result
                self._handled += 1
                break
            except Exception as exc:
                error: Exception = exc
            self._handler_errors += 1
            self._last_error = repr(error)
            where = f"{record.topic}[{record.partition}] offset {record.offset}"
            if self._retries is None or attempt < self._retries:
                delay = self._retry_backoff.delay_ms(attempt) / 1000
                log.warning(
                    "handler failed for %s (attempt %d; retrying in %.2f s): %r",
                    where,
                    attempt + 1,
                    delay,
                    error,
                )
                attempt += 1
                self._retried += 1
                if not await self._sleep_unless_stopping(delay):
                    return False  # stopping: the record stays unhandled (not committed)
                continue
            log.error("handler failed for %s", where, exc_info=error)
            if self._on_error is OnError.STOP:
                return False
            if self._on_error is OnError.DEAD_LETTER and not await self._dead_letter(
                record, error
            ):
                return False
            if self._on_error is OnError.SKIP:
                self._skipped += 1
            break
        self._done[TopicPartition(record.topic, record.partition)] = record.offset + 1
        return True

    async def _sleep_unless_stopping(self, seconds: float) -> bool:
        """Sleep between attempts; False when the runner stops meanwhile."""
        with anyio.CancelScope() as scope:
            self._poll_scope = scope
            try:
                if self._state is RunnerState.RUNNING:
                    await anyio.sleep(seconds)
            finally:
                self._poll_scope = None
        return self._state is RunnerState.RUNNING

    async def _dead_letter(self, record: ConsumerRecord[Any, Any], error: Exception) -> bool:
        """Send the failed record to the dead-letter topic; False if that failed too."""
        producer, topic = self._dead_letter_producer, self._dead_letter_topic
        assert producer is not None and topic is not None
        headers = [
            *record.headers,
            (DLT_TOPIC, record.topic.encode()),
            (DLT_PARTITION, str(record.partition).encode()),
            (DLT_OFFSET, str(record.offset).encode()),
            (DLT_TIMESTAMP, str(record.timestamp).encode()),
            (DLT_EXCEPTION, type(error).__name__.encode()),
            (DLT_MESSAGE, str(error).encode("utf-8", "replace")),
        ]
        try:
            await producer.send(topic, record.value, key=record.key, headers=headers)
        except KafkaError as exc:
            self._last_error = repr(exc)
            log.error(
                "could not send %s[%d] offset %d to the dead-letter topic %r: %s; stopping",
                record.topic,
                record.partition,
                record.offset,
                topic,
                exc,
            )
            return False
        self._dead_lettered += 1
        return True
