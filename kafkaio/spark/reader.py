"""Spark readers of format("kafkaio"): batch (DataSourceReader) and micro-batch streaming
(DataSourceStreamReader with admission control and Trigger.AvailableNow).

Planning calls (partitions, offsets) use an Admin on a short anyio.run; each input
partition is one topic-partition offset range read by its own Consumer (kafkaio.spark.fetch).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

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
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.spark.cluster import admin, blocking, list_offsets, partitions_of, resolve_bound
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
    plan_ranges,
    rate_limit,
    to_json,
)
from kafkaio.spark.options import SourceOptions
from kafkaio.spark.rows import arrow_schema

log = logging.getLogger("kafkaio.spark")


class RangePartition(InputPartition):
    """One Spark input partition: offsets [start, end) of one topic-partition (start -2:
    the partition's log start). Plain attributes, so it pickles on every Python version."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    @classmethod
    def of(cls, rng: OffsetRange) -> RangePartition:
        return cls(rng.topic, rng.partition, rng.start, rng.end)

    def range(self) -> OffsetRange:
        return OffsetRange(self.topic, self.partition, self.start, self.end)


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
        return self._read(partition.range())

    def _read(self, rng: OffsetRange) -> Iterator[pa.RecordBatch]:
        return read_range(
            self._opts.client,
            rng,
            arrow_schema(self._schema),
            fail_on_data_loss=self._opts.fail_on_data_loss,
            poll_timeout_ms=self._opts.poll_timeout_ms,
        )

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
        return [RangePartition.of(r) for r in blocking(self._plan)]

    async def _plan(self) -> list[OffsetRange]:
        opts = self._opts
        async with admin(opts.client) as client:
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

    def initialOffset(self) -> dict[str, Any]:
        return dict(to_json(blocking(self._initial)))

    async def _initial(self) -> PartitionOffsets:
        opts = self._opts
        async with admin(opts.client) as client:
            tps = await partitions_of(client, opts.selection)
            bound = opts.starting or OffsetBound("latest")
            return await self._resolve(client, bound, tps, opts.timestamp_strategy)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self._opts.max_offsets_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: read up to the end offsets of now, and no further."""
        self._target, _ = blocking(self._latest, frozenset())

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = from_json(start)
        latest, new_starts = blocking(self._latest, frozenset(begin))
        if self._target is not None:
            latest = {
                tp: min(o, self._target[tp]) for tp, o in latest.items() if tp in self._target
            }
        base = {**new_starts, **begin}
        for tp, offset in latest.items():
            if offset < base.get(tp, offset):
                # a lower end offset (Tansu can answer a few records low): never go back
                latest[tp] = base[tp]
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(base, latest, limit.max_rows)
        elif isinstance(limit, ReadMinRows):
            if sum(latest[tp] - base.get(tp, latest[tp]) for tp in latest) < limit.min_rows:
                return start
        gone = set(begin) - set(latest)
        if gone and self._target is None:
            log.warning("partitions %s are gone (deleted topic?)", sorted(gone))
        return dict(to_json({**begin, **latest}))

    async def _latest(
        self, known: frozenset[TopicPartition]
    ) -> tuple[PartitionOffsets, PartitionOffsets]:
        """End offsets of the partitions read now, and log start offsets of those not in
        `known` (new partitions)."""
        async with admin(self._opts.client) as client:
            tps = await partitions_of(client, self._opts.selection)
            iso = self._isolation
            latest = await list_offsets(client, dict.fromkeys(tps, LATEST), isolation_level=iso)
            new = [tp for tp in tps if tp not in known]
            starts = await list_offsets(client, dict.fromkeys(new, EARLIEST), isolation_level=iso)
        return latest, starts

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, finish = from_json(start), from_json(end)
        gone = sorted(set(begin) - set(finish))
        if gone and self._opts.fail_on_data_loss:
            raise DataLossError(
                f"partitions {', '.join(map(str, gone))} disappeared; set failOnDataLoss=false "
                "to go on without them"
            )
        return [RangePartition.of(r) for r in plan_ranges(begin, finish)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self._read_partition(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, not in a consumer group."""


def offsets_json(offsets: Mapping[TopicPartition, int]) -> OffsetsJson:
    """Offsets in the JSON form the startingOffsets/endingOffsets options take."""
    return to_json(offsets)
