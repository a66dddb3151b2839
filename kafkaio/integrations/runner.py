"""ConsumerRunner: a consumer's poll loop as a background task of a web app (or any service),
with handler-error logging, retry with backoff, graceful stop and a health snapshot.

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
from kafkaio.errors import KafkaError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.runtime.task import ClientTask

log = logging.getLogger("kafkaio.integrations")

RecordHandler = Callable[[ConsumerRecord[Any, Any]], "Awaitable[object] | object"]


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

    @property
    def healthy(self) -> bool:
        """Running and the last poll succeeded."""
        return self.state == RunnerState.RUNNING.value and self.consecutive_poll_errors == 0

    @property
    def total_lag(self) -> int | None:
        lags = [p.lag for p in self.partitions]
        return None if any(lag is None for lag in lags) else sum(lag or 0 for lag in lags)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["healthy"] = self.healthy
        out["total_lag"] = self.total_lag
        return out


class ConsumerRunner:
    """Runs ``handler(record)`` (sync or async) for every record of `consumer`, in a
    background task: ``async with ConsumerRunner(consumer, handler) as runner: ...``.

    The runner owns the consumer: it starts it on enter and, on exit, stops polling (the
    records of a batch already fetched are all handled first), commits the offsets of the
    records handled (when the consumer has a group_id and auto-commit is off: at least once)
    and closes the consumer (which commits its positions with auto-commit on, and leaves the
    group). A handler error is logged with the record's position and
    counted; the loop goes on, or stops when `stop_on_error`. Retriable client errors are
    retried with exponential backoff; other client errors stop the loop (state "failed").
    ``status()`` is the health snapshot.
    """

    def __init__(
        self,
        consumer: Consumer,
        handler: RecordHandler,
        *,
        max_records: int = 500,
        poll_timeout_ms: float = 1000,
        stop_on_error: bool = False,
        commit_on_stop: bool = True,
        backoff: ExponentialBackoff | None = None,
    ) -> None:
        self._consumer = consumer
        self._handler = handler
        self._max_records = max_records
        self._poll_timeout_ms = poll_timeout_ms
        self._stop_on_error = stop_on_error
        self._commit_on_stop = commit_on_stop
        self._backoff = backoff or ExponentialBackoff(100, 10_000)
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
        """Run the handler; False when the loop must stop (stop_on_error)."""
        try:
            result = self._handler(record)
            if inspect.isawaitable(result):
                await result
            self._handled += 1
        except Exception as exc:
            self._handler_errors += 1
            self._last_error = repr(exc)
            log.exception(
                "handler failed for %s[%d] offset %d", record.topic, record.partition, record.offset
            )
            if self._stop_on_error:
                return False
        self._done[TopicPartition(record.topic, record.partition)] = record.offset + 1
        return True
