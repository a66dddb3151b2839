"""Reading one offset range in a Spark task: a kafkaio Consumer (assign + seek, no group).

The consumer runs on an anyio event loop in a helper thread (a blocking portal), so
``read_range`` can hand Spark one Arrow batch at a time with bounded memory.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import anyio
import pyarrow as pa
from anyio.from_thread import start_blocking_portal

from kafkaio.consumer import Consumer, ConsumerRecord
from kafkaio.errors import OffsetOutOfRangeError
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
    options: dict[str, Any] = {"client_id": "kafkaio-spark", **settings.consumer_options()}
    options["auto_offset_reset"] = "none"
    with start_blocking_portal() as portal:
        consumer = portal.call(_make_consumer, settings.bootstrap_servers, options)
        with portal.wrap_async_context_manager(consumer):
            reader = _RangeReader(consumer, rng, fail_on_data_loss, poll_timeout_ms)
            if not portal.call(reader.seek_start):
                return
            while True:
                records, done = portal.call(reader.next_chunk)
                if records:
                    yield to_record_batch(records, schema)
                if done:
                    return


def _make_consumer(bootstrap: str, options: dict[str, Any]) -> Consumer:
    return Consumer(bootstrap_servers=bootstrap, **options)


class _RangeReader:
    """The async steps of reading one range (called through the portal)."""

    def __init__(
        self, consumer: Consumer, rng: OffsetRange, fail_on_data_loss: bool, poll_timeout_ms: int
    ) -> None:
        self._consumer = consumer
        self._rng = rng
        self._tp = rng.tp
        self._fail = fail_on_data_loss
        self._poll_timeout_s = poll_timeout_ms / 1000

    def _lost(self, message: str) -> None:
        if self._fail:
            raise DataLossError(
                f"{message}. Some data may have been lost (retention, or the topic was "
                "deleted/recreated); set failOnDataLoss=false to skip it with a warning"
            )
        log.warning("%s; skipped (failOnDataLoss=false)", message)

    async def seek_start(self) -> bool:
        """Position the consumer at the range's start; False when nothing is left to read."""
        c, tp, rng = self._consumer, self._tp, self._rng
        c.assign([tp])
        beginning = (await c.beginning_offsets([tp]))[tp]
        start = rng.start
        if start == EARLIEST:
            start = max(beginning, 0)
        elif start < beginning:
            self._lost(f"{tp}: offsets {start}..{beginning - 1} are no longer in the log")
            start = beginning
        if start >= rng.end:
            return False
        c.seek(tp, start)
        return True

    async def next_chunk(self) -> tuple[list[ConsumerRecord[Any, Any]], bool]:
        """The next records below the range's end, and whether the range is done."""
        c, tp, end = self._consumer, self._tp, self._rng.end
        with anyio.move_on_after(self._poll_timeout_s):
            while True:
                try:
                    batch = await c.getmany(tp, timeout_ms=_POLL_MS, max_records=BATCH_RECORDS)
                except OffsetOutOfRangeError as exc:
                    position = await c.position(tp)
                    self._lost(f"{tp}: offset {position} is out of range ({exc})")
                    await c.seek_to_beginning(tp)
                    continue
                records = batch.get(tp, [])
                done = await c.position(tp) >= end
                if records:
                    if records[-1].offset >= end:
                        records = [r for r in records if r.offset < end]
                    return records, done
                if done:
                    return [], True
        position = await c.position(tp)
        self._lost(
            f"{tp}: no records arrived between offset {position} and {end} within "
            f"kafkaConsumer.pollTimeoutMs ({self._poll_timeout_s * 1000:g} ms)"
        )
        return [], True
