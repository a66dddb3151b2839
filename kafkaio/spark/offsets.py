"""Offsets as Spark's Kafka source writes them: per-topic-partition JSON, bounds, ranges.

Sans-I/O: parsing, encoding, range planning and the maxOffsetsPerTrigger rate limit.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafkaio.errors import KafkaConfigError
from kafkaio.metadata.cluster import TopicPartition

EARLIEST = -2
LATEST = -1

PartitionOffsets = dict[TopicPartition, int]
# The JSON form: {"topic": {"0": 23, "1": -2}}
OffsetsJson = dict[str, dict[str, int]]


@dataclass(frozen=True, slots=True)
class OffsetBound:
    """Where reading starts or ends, before it is looked up on the brokers.

    ``kind`` is "earliest", "latest", "offsets" (per partition; -2 earliest, -1 latest),
    "timestamp" (one timestamp in ms for every partition) or "timestamps" (per partition).
    """

    kind: str
    per_partition: tuple[tuple[TopicPartition, int], ...] = ()
    timestamp: int = -1

    @property
    def partition_map(self) -> PartitionOffsets:
        return dict(self.per_partition)


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """One Spark input partition: offsets [start, end) of one topic-partition.

    ``start`` may be EARLIEST for a partition that appeared after the query started (the
    reader looks up its log start offset).
    """

    topic: str
    partition: int
    start: int
    end: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def parse_bound(option: str, value: str, *, timestamps: bool = False) -> OffsetBound:
    """Parse startingOffsets/endingOffsets ("earliest", "latest" or JSON) or, with
    `timestamps`, startingOffsetsByTimestamp/endingOffsetsByTimestamp (JSON of ms)."""
    text = value.strip()
    if not timestamps and text.lower() in ("earliest", "latest"):
        return OffsetBound(text.lower())
    offsets = parse_json(option, text)
    for tp, offset in offsets.items():
        if timestamps and offset < 0:
            raise KafkaConfigError(f"option {option}: timestamp for {tp} must be >= 0 ms")
        if not timestamps and offset < EARLIEST:
            raise KafkaConfigError(
                f"option {option}: offset {offset} for {tp} is invalid; use an offset >= 0, "
                "-2 (earliest) or -1 (latest)"
            )
    return OffsetBound("timestamps" if timestamps else "offsets", tuple(sorted(offsets.items())))


def parse_timestamp(option: str, value: str) -> OffsetBound:
    try:
        ts = int(value.strip())
    except ValueError:
        ts = -1
    if ts < 0:
        raise KafkaConfigError(
            f"option {option} is {value!r}; use a timestamp in milliseconds since the epoch"
        )
    return OffsetBound("timestamp", timestamp=ts)


def parse_json(option: str, text: str) -> PartitionOffsets:
    """{"topic": {"0": 23}} -> {TopicPartition("topic", 0): 23}."""
    example = '{"topicA": {"0": 23, "1": -2}}'
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise KafkaConfigError(
            f"option {option} is {text!r}: use 'earliest', 'latest' or JSON like {example}"
        )
    out: PartitionOffsets = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise KafkaConfigError(
                f"option {option}: topic {topic!r} needs a JSON object {example}"
            )
        for partition, offset in parts.items():
            try:
                index = int(partition)
            except ValueError:
                index = -1
            if index < 0 or isinstance(offset, bool) or not isinstance(offset, int):
                raise KafkaConfigError(
                    f"option {option}: {topic!r} partition {partition!r} -> {offset!r} is "
                    f"invalid; use partition numbers mapped to integers, e.g. {example}"
                )
            out[TopicPartition(topic, index)] = offset
    return out


def parse_assign(text: str) -> tuple[TopicPartition, ...]:
    """The assign option: {"topicA": [0, 1], "topicB": [2]}."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    ok = isinstance(data, dict) and all(
        isinstance(ps, list) and all(isinstance(p, int) and p >= 0 for p in ps)
        for ps in data.values()
    )
    if not ok or not data:
        raise KafkaConfigError(
            f'option assign is {text!r}: use JSON like {{"topicA": [0, 1], "topicB": [2]}}'
        )
    assert isinstance(data, dict)
    return tuple(sorted({TopicPartition(t, p) for t, ps in data.items() for p in ps}))


def to_json(offsets: Mapping[TopicPartition, int]) -> OffsetsJson:
    out: OffsetsJson = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_json(data: Mapping[str, Any]) -> PartitionOffsets:
    """The inverse of to_json (for offsets Spark hands back from its checkpoint)."""
    return {
        TopicPartition(topic, int(p)): int(offset)
        for topic, parts in data.items()
        for p, offset in parts.items()
    }


def plan_ranges(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]
) -> list[OffsetRange]:
    """One range per partition of `end` with data to read. Partitions missing from `start`
    start at EARLIEST (new partitions). Raises if an end is before its start."""
    ranges = []
    for tp in sorted(end):
        first = start.get(tp, EARLIEST)
        last = end[tp]
        if first != EARLIEST and last < first:
            raise KafkaConfigError(
                f"{tp}: ending offset {last} is before starting offset {first}; check "
                "startingOffsets/endingOffsets"
            )
        if last > max(first, 0):
            ranges.append(OffsetRange(tp.topic, tp.partition, first, last))
    return ranges


def rate_limit(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], max_records: int
) -> PartitionOffsets:
    """Cap `latest` so at most about `max_records` offsets are read in total, spread over
    partitions in proportion to how far behind each is (no partition starves)."""
    lags = {tp: max(latest[tp] - start.get(tp, latest[tp]), 0) for tp in latest}
    total = sum(lags.values())
    if total <= max_records:
        return dict(latest)
    out: PartitionOffsets = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        share = max_records * lags[tp] / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(end, begin + step)
    return out


def split_ranges(
    ranges: list[OffsetRange], *, min_partitions: int | None, max_records: int | None
) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator: split ranges (with known starts) into more Spark
    partitions. ``max_records`` (maxRecordsPerPartition) caps each piece; ``min_partitions``
    (minPartitions) then splits the large ranges in proportion to their size until there
    are about that many pieces (small ranges stay whole). Empty ranges are dropped."""
    ranges = [r for r in ranges if r.end - r.start > 0]
    if (min_partitions is None or len(ranges) >= min_partitions) and max_records is None:
        return ranges
    if max_records is not None:
        ranges = [
            piece
            for r in ranges
            for piece in _divide(r, math.ceil((r.end - r.start) / max_records))
            if piece.end > piece.start
        ]
    if min_partitions is None or min_partitions <= len(ranges):
        return ranges
    total = sum(r.end - r.start for r in ranges)
    unsplit = [r for r in ranges if _part_count(r.end - r.start, total, min_partitions) == 1]
    unsplit_tps = {r.tp for r in unsplit}
    split_total = total - sum(r.end - r.start for r in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = 1 if r.tp in unsplit_tps else _part_count(r.end - r.start, split_total, split_min)
        out.extend(p for p in _divide(r, parts) if p.end > p.start)
    return out


def _part_count(size: int, total: int, min_parts: int) -> int:
    return max(math.floor(size / total * min_parts + 0.5), 1)  # Scala's math.round


def _divide(rng: OffsetRange, parts: int) -> list[OffsetRange]:
    """`rng` in `parts` consecutive pieces; the later ones take the remainder."""
    remaining = rng.end - rng.start
    start = rng.start
    out = []
    for part in range(parts):
        size = remaining // (parts - part)
        remaining -= size
        end = min(start + size, rng.end)
        out.append(OffsetRange(rng.topic, rng.partition, start, end))
        start = end
    return out


def pack_ranges(ranges: list[OffsetRange], small: int) -> list[list[OffsetRange]]:
    """Ranges grouped into Spark tasks: each range of `small` offsets or more alone, smaller
    ones together (in order) until a group holds `small` offsets. A Python task costs tens of
    milliseconds of Spark's own work, so a micro-batch of a few records per partition is read
    in one task or a few, not in one per partition."""
    groups: list[list[OffsetRange]] = []
    pending: list[OffsetRange] = []
    size = 0
    for rng in ranges:
        width = rng.end - rng.start
        if width >= small:
            groups.append([rng])
            continue
        pending.append(rng)
        size += width
        if size >= small:
            groups.append(pending)
            pending, size = [], 0
    if pending:
        groups.append(pending)
    return groups
