"""Reading one offset range in a Spark task: a kafkaio Consumer (assign + seek, no group).

The consumer runs on the process's event loop thread (kafkaio.spark.pool), so
``read_range`` can hand Spark one Arrow batch at a time with bounded memory; it is borrowed
from the pool and handed back at its position, so the next range of that partition (the
next micro-batch) goes on with what it fetched ahead.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import anyio
import pyarrow as pa

from kafkaio.consumer import Consumer, ConsumerRecord
from kafkaio.errors import OffsetOutOfRangeError
from kafkaio.spark import pool
from kafkaio.spark.errors import DataLossError
from kafkaio.spark.offsets import EARLIEST, OffsetRange
from kafkaio.spark.rows import to_record_batch
from kafkaio.spark.settings import ClientSettings

log = logging.getLogger("kafkaio.spark")

# Records per Arrow batch (Spark's default spark.sql.execution.arrow.maxRecordsPerBatch).
BATCH_RECORDS = 10_000
# One getmany() wait; the range's pollTimeoutMs bounds the total wait for missing data.
_POLL_MS = 500


def read_range(
    settings: ClientSettings,
    rng: OffsetRange,
    schema: pa.Schema,
    *,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the records with offsets in [rng.start, rng.end) of one partition."""
    portal = pool.runtime().portal
    with portal.wrap_async_context_manager(pool.consumer(settings, rng.tp)) as consumer:
        reader = _RangeReader(consumer, rng, fail_on_data_loss, poll_timeout_ms)
        if not portal.call(reader.seek_start):
            return
        while True:
            records, done = portal.call(reader.next_chunk)
            if records:
                yield to_record_batch(records, schema)
            if done:
                return


class _RangeReader:
    """The async steps of reading one range (called through the portal)."""

    def __init__(
        self, consumer: Consumer, rng: OffsetRange, fail_on_data_loss: bool,
        poll_timeout_ms: int,
    ) -> None:
        self._consumer = consumer
        self._rng = rng
        self._tp = rng.tp
        self._fail = fail_on_data_loss
        self._poll_timeout_s = poll_timeout_ms / 1000
        self._next = rng.start  # the next offset to read

    def _lost(self, message: str) -> None:
        if self._fail:
            raise DataLossError(
                f"{message}. Some data may have been lost (retention, or the topic was "
                "deleted/recreated); set failOnDataLoss=false to skip it with a warning"
            )
        log.warning("%s; skipped (failOnDataLoss=false)", message)

    async def _position(self) -> int:
        """The consumer's position now, or -1 when it has none."""
        try:
            return await self._consumer.position(self._tp, timeout_ms=0)
        except Exception:
            return -1

    async def seek_start(self) -> bool:
        """Position the consumer at the range's start; False when nothing is left to read.

        A consumer already at the start (it read the previous range of this partition) keeps
        the records it fetched ahead. A start before the log start is found by the fetch
        (OFFSET_OUT_OF_RANGE), without a lookup per task."""
        c, tp, rng = self._consumer, self._tp, self._rng
        if c.assignment() != {tp}:
            c.assign([tp])
        elif rng.start != EARLIEST and await self._position() == rng.start:
            return rng.start < rng.end
        if rng.start == EARLIEST:
            self._next = max((await c.beginning_offsets([tp]))[tp], 0)
        if self._next >= rng.end:
            return False
        c.seek(tp, self._next)
        return True

    async def next_chunk(self) -> tuple[list[ConsumerRecord[Any, Any]], bool]:
        """The next records below the range's end, and whether the range is done. Never asks
        for records past the end, so the consumer stops at it (for the next range)."""
        c, tp, end = self._consumer, self._tp, self._rng.end
        with anyio.move_on_after(self._poll_timeout_s):
            while True:
                if self._next >= end:
                    return [], True
                try:
                    batch = await c.getmany(
                        tp, timeout_ms=_POLL_MS, max_records=min(BATCH_RECORDS, end - self._next)
                    )
                except OffsetOutOfRangeError:
                    await self._out_of_range()
                    continue
                records = batch.get(tp, [])
                if records:
                    if records[-1].offset >= end:
                        records = [r for r in records if r.offset < end]
                    self._next = max(self._next, await self._position())
                    return records, self._next >= end
                # no records: the position may still move (transaction markers, compaction)
                self._next = max(self._next, await self._position())
        self._lost(
            f"{tp}: no records arrived between offset {self._next} and {end} within "
            f"kafkaConsumer.pollTimeoutMs ({self._poll_timeout_s * 1000:g} ms)"
        )
        return [], True

    async def _out_of_range(self) -> None:
        """The fetch offset is outside the log: before its start (retention, DeleteRecords)
        reading goes on from the log start; past its end (the topic was recreated) the range
        ends. Either is data loss, as in Spark's Kafka source."""
        c, tp, end = self._consumer, self._tp, self._rng.end
        beginning = (await c.beginning_offsets([tp]))[tp]
        latest = (await c.end_offsets([tp]))[tp]
        if self._next < beginning:
            self._lost(
                f"{tp}: offsets {self._next}..{min(beginning, end) - 1} are no longer in the "
                f"log (its first offset is now {beginning})"
            )
            self._next = min(beginning, end)
        else:
            self._lost(
                f"{tp}: offset {self._next} is past the log's end ({latest}); the topic may "
                "have been deleted and recreated"
            )
            self._next = end
        c.seek(tp, self._next)
