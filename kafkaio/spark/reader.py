"""Spark readers of format("kafkaio"): batch (DataSourceReader) and micro-batch streaming
(DataSourceStreamReader with admission control and Trigger.AvailableNow).

Planning calls (partitions, offsets) use an Admin on a short anyio.run; each input
partition is one topic-partition offset range read by its own Consumer (kafkaio.spark.fetch).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import anyio
import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from kafkaio.admin import Admin
from kafkaio.errors import KafkaConfigError, KafkaError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.spark.cluster import list_offsets, partitions_of, resolve_bound
from kafkaio.spark.errors import DataLossError
from kafkaio.spark.fetch import read_range
from kafkaio.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetBound,
    OffsetRange,
    OffsetsJson,
    PartitionOffsets,
    from_json,
    pack_ranges,
    plan_ranges,
    rate_limit,
    split_ranges,
    to_json,
)
from kafkaio.spark.options import SourceOptions
from kafkaio.spark.pool import admin, blocking
from kafkaio.spark.rows import arrow_schema

log = logging.getLogger("kafkaio.spark")

T = TypeVar("T")
# Ranges with fewer offsets are read together in one Spark task (see _split).
SMALL_RANGE = 10_000


class RangePartition(InputPartition):
    """One Spark input partition: offset ranges [start, end) of topic-partitions, read one
    after the other (several only when they are small). Plain tuples, so it pickles on
    every Python version."""

    def __init__(self, ranges: Sequence[tuple[str, int, int, int]]) -> None:
        super().__init__(tuple(ranges))
        self.ranges = tuple(ranges)

    @classmethod
    def of(cls, ranges: Sequence[OffsetRange]) -> RangePartition:
        return cls([(r.topic, r.partition, r.start, r.end) for r in ranges])

    def offset_ranges(self) -> list[OffsetRange]:
        return [OffsetRange(*r) for r in self.ranges]


class _SourceBase:
    """Options parsed from the raw strings; pickled as the raw strings (Spark ships readers
    to its Python workers)."""

    def __init__(self, raw: Mapping[str, str], schema: StructType) -> None:
        self._raw = dict(raw)
        self._schema = schema
        self._opts = SourceOptions.parse(self._raw)

    def __getstate__(self) -> dict[str, Any]:
        return {"raw": self._raw, "schema": self._schema.json()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        schema = json.loads(state["schema"])
        type(self).__init__(self, state["raw"], StructType.fromJson(schema))

    @property
    def _isolation(self) -> str:
        return str(self._opts.client.options.get("isolation_level", "read_uncommitted"))

    def _read_partition(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The records of a RangePartition. Anything else is the InputPartition(None) PySpark
        plans when partitions() is empty (nothing to read): no rows, as Spark's Kafka source."""
        if not isinstance(partition, RangePartition):
            return iter(())
        return self._read(partition.offset_ranges())

    def _read(self, ranges: list[OffsetRange]) -> Iterator[pa.RecordBatch]:
        schema = arrow_schema(self._schema)
        for rng in ranges:
            yield from read_range(
                self._opts.client,
                rng,
                schema,
                fail_on_data_loss=self._opts.fail_on_data_loss,
                poll_timeout_ms=self._opts.poll_timeout_ms,
            )

    def _plan(self, fn: Callable[[Admin], Awaitable[T]]) -> T:
        """Run a planning lookup with a pooled Admin, retried as Spark's fetchOffset.numRetries
        / fetchOffset.retryIntervalMs say (option errors and data loss are not retried)."""
        opts = self._opts

        async def attempt() -> T:
            for left in range(opts.fetch_offset_retries, -1, -1):
                try:
                    async with admin(opts.client) as client:
                        return await fn(client)
                except (KafkaConfigError, DataLossError):
                    raise
                except KafkaError as exc:
                    if left == 0:
                        raise
                    log.warning("offset lookup failed (%r); %d retries left", exc, left)
                    await anyio.sleep(opts.fetch_offset_retry_interval_ms / 1000)
            raise AssertionError("unreachable")

        return blocking(attempt)

    def _split(self, ranges: list[OffsetRange]) -> list[InputPartition]:
        """Input partitions: with minPartitions or maxRecordsPerPartition, Spark's split of
        the ranges (one range each); else one per range, small ranges (under SMALL_RANGE
        offsets) packed together."""
        opts = self._opts
        ranges = [r for r in ranges if r.end > r.start]
        if opts.min_partitions is None and opts.max_records_per_partition is None:
            return [RangePartition.of(g) for g in pack_ranges(ranges, SMALL_RANGE)]
        pieces = split_ranges(
            ranges,
            min_partitions=opts.min_partitions,
            max_records=opts.max_records_per_partition,
        )
        return [RangePartition.of([r]) for r in pieces]

    def _lost(self, message: str) -> None:
        """Spark's reportDataLoss: raise with failOnDataLoss (the default), else warn."""
        if self._opts.fail_on_data_loss:
            raise DataLossError(
                f"{message}. Some data may have been lost; set failOnDataLoss=false to go on "
                "without it (with a warning)"
            )
        log.warning("%s. Some data may have been lost (failOnDataLoss=false)", message)

    async def _resolve(
        self, client: Admin, bound: OffsetBound, tps: Sequence[TopicPartition], missing: str
    ) -> PartitionOffsets:
        return await resolve_bound(
            client, bound, tps, isolation_level=self._isolation, missing_timestamp=missing
        )


class KafkaioBatchReader(_SourceBase, DataSourceReader):
    """spark.read.format("kafkaio"): startingOffsets default earliest, endingOffsets latest."""

    def __init__(self, raw: Mapping[str, str], schema: StructType) -> None:
        super().__init__(raw, schema)
        self._opts.check_batch()

    def partitions(self) -> Sequence[InputPartition]:
        """One input partition per topic-partition range, split further by minPartitions and
        maxRecordsPerPartition as Spark's Kafka source splits them."""
        return self._split(self._plan(self._offset_ranges))

    async def _offset_ranges(self, client: Admin) -> list[OffsetRange]:
        opts = self._opts
        tps = await partitions_of(client, opts.selection)
        start = await self._resolve(
            client, opts.starting or OffsetBound("earliest"), tps, opts.timestamp_strategy
        )
        end = await self._resolve(client, opts.ending or OffsetBound("latest"), tps, "latest")
        return plan_ranges(start, end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self._read_partition(partition)


class KafkaioStreamReader(_SourceBase, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """spark.readStream.format("kafkaio"): offsets are {"topic": {"partition": offset}}
    (Spark's Kafka source format); startingOffsets default latest; partitions that appear
    later are read from their log start."""

    def __init__(self, raw: Mapping[str, str], schema: StructType) -> None:
        super().__init__(raw, schema)
        self._opts.check_streaming()
        self._target: PartitionOffsets | None = None
        self._last_trigger_ms = 0.0  # for minOffsetsPerTrigger / maxTriggerDelay
        self._initial_offsets: OffsetsJson | None = None

    def initialOffset(self) -> dict[str, Any]:
        """The start of a new query, looked up once: Spark asks again when it plans the
        first micro-batch, and "latest" must not move in between (that made the first
        batch's start pass its end)."""
        if self._initial_offsets is None:
            self._initial_offsets = to_json(self._plan(self._initial))
        return dict(self._initial_offsets)

    async def _initial(self, client: Admin) -> PartitionOffsets:
        opts = self._opts
        tps = await partitions_of(client, opts.selection)
        bound = opts.starting or OffsetBound("latest")
        return await self._resolve(client, bound, tps, opts.timestamp_strategy)

    def getDefaultReadLimit(self) -> ReadLimit:
        opts = self._opts
        if opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(opts.max_offsets_per_trigger)
        if opts.min_offsets_per_trigger is not None:
            return ReadMinRows(opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: read up to the end offsets of now, and no further."""
        self._target = self._plan(self._latest)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The end offsets of the next micro-batch, as Spark's Kafka source picks them:
        everything available, capped by maxOffsetsPerTrigger (spread by lag), none while
        fewer than minOffsetsPerTrigger are available and maxTriggerDelay has not passed.
        An end offset below the start (a recreated topic) is kept: planning reports it."""
        begin = from_json(start)
        latest = dict(self._target if self._target is not None else self._plan(self._latest))
        if isinstance(limit, ReadAllAvailable):
            return dict(to_json(latest))
        if self._target is None and self._delay_batch(begin, latest):
            return start
        if self._opts.max_offsets_per_trigger is not None:
            base = dict(begin)
            new = [tp for tp in latest if tp not in begin]
            if new:
                base |= self._plan(lambda client: self._earliest(client, new))
            latest = rate_limit(base, latest, self._opts.max_offsets_per_trigger)
        return dict(to_json(latest))

    async def _earliest(self, client: Admin, tps: Sequence[TopicPartition]) -> PartitionOffsets:
        return await list_offsets(
            client, dict.fromkeys(tps, EARLIEST), isolation_level=self._isolation
        )

    def _delay_batch(self, begin: PartitionOffsets, latest: PartitionOffsets) -> bool:
        """Spark's delayBatch: skip this trigger while fewer than minOffsetsPerTrigger new
        offsets are available, until maxTriggerDelay has passed since the last batch."""
        minimum = self._opts.min_offsets_per_trigger
        if minimum is None:
            return False
        now = time.monotonic() * 1000
        if now - self._last_trigger_ms >= self._opts.max_trigger_delay_ms:
            self._last_trigger_ms = now
            return False
        available = sum(o - begin.get(tp, 0) for tp, o in latest.items())
        if available < minimum:
            return True
        self._last_trigger_ms = now
        return False

    async def _latest(self, client: Admin) -> PartitionOffsets:
        """End offsets of the partitions the query reads now."""
        tps = await partitions_of(client, self._opts.selection)
        return await list_offsets(
            client, dict.fromkeys(tps, LATEST), isolation_level=self._isolation
        )

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """The micro-batch's ranges, as Spark's getOffsetRangesFromResolvedOffsets plans
        them: new partitions from their log start (data loss if that is not 0), partitions
        that disappeared or whose end is below the start (a recreated topic) are data loss
        and read nothing; then split by minPartitions / maxRecordsPerPartition."""
        begin, finish = from_json(start), from_json(end)
        new = sorted(set(finish) - set(begin))
        if new:
            starts = self._plan(lambda client: self._earliest(client, new))
            for tp, offset in sorted(starts.items()):
                if offset != 0:
                    self._lost(f"added partition {tp} starts from {offset} instead of 0")
            begin = {**begin, **starts}
        gone = sorted(set(begin) - set(finish))
        if gone:
            self._lost(f"partitions {', '.join(map(str, gone))} are gone")
        ranges = []
        for tp in sorted(finish):
            first, last = begin[tp], finish[tp]
            if last < first:
                self._lost(
                    f"partition {tp}'s offset was changed from {first} to {last}: the start "
                    "offset is beyond the available offsets, or the topic-partition was "
                    "deleted and re-created"
                )
                continue
            ranges.append(OffsetRange(tp.topic, tp.partition, first, last))
        return self._split(ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self._read_partition(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, not in a consumer group."""


def offsets_json(offsets: Mapping[TopicPartition, int]) -> OffsetsJson:
    """Offsets in the JSON form the startingOffsets/endingOffsets options take."""
    return to_json(offsets)
