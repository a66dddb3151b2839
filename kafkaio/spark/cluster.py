"""Planning-side lookups with kafkaio's Admin: which partitions to read, and their offsets.

Async functions; the Spark-facing classes call them through ``pool.blocking`` with an Admin
borrowed from the pool (``pool.admin``), so a stream's planner keeps its connections.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from kafkaio.admin import Admin, OffsetSpec
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.spark.errors import OffsetLookupError
from kafkaio.spark.offsets import EARLIEST, LATEST, OffsetBound, PartitionOffsets
from kafkaio.spark.options import TopicSelection

log = logging.getLogger("kafkaio.spark")


async def partitions_of(client: Admin, selection: TopicSelection) -> list[TopicPartition]:
    """The partitions `selection` names now (topics that do not exist have none)."""
    if selection.partitions:
        return list(selection.partitions)
    if selection.pattern is not None:
        regex = re.compile(selection.pattern)
        names = [n for n in await client.list_topics() if regex.fullmatch(n)]
    else:
        names = list(selection.topics)
    if not names:
        return []
    topics = await client.describe_topics(names)
    out: list[TopicPartition] = []
    for name in names:
        info = topics.get(name)
        if info is None or info.error or not info.partitions:
            log.warning("topic %r does not exist (yet); it has no partitions to read", name)
            continue
        out.extend(TopicPartition(name, p.partition) for p in info.partitions)
    return sorted(out)


async def list_offsets(
    client: Admin, specs: dict[TopicPartition, int], *, isolation_level: str
) -> PartitionOffsets:
    """ListOffsets for each partition (-2 earliest, -1 latest, >= 0 a timestamp). A
    timestamp after the partition's last record answers -1 (no such offset)."""
    if not specs:
        return {}
    answers = await client.list_offsets(specs, isolation_level=isolation_level)
    out: PartitionOffsets = {}
    for tp, spec in specs.items():
        answer = answers.get(tp)
        if answer is None or answer.error is not None:
            error = None if answer is None else answer.error
            raise OffsetLookupError(
                f"looking up the {_spec_name(spec)} offset of {tp} failed: {error!r}; check "
                "that the topic and partition exist and the brokers are reachable"
            )
        out[tp] = -1 if answer.offset is None else answer.offset
    return out


async def resolve_bound(
    client: Admin,
    bound: OffsetBound,
    partitions: Iterable[TopicPartition],
    *,
    isolation_level: str,
    missing_timestamp: str,
) -> PartitionOffsets:
    """Concrete offsets of `bound` for `partitions`.

    Explicit JSON offsets must name exactly those partitions (as in Spark). A timestamp with
    no record at or after it gives the latest offset when `missing_timestamp` is "latest",
    else raises.
    """
    tps = sorted(partitions)
    if bound.kind in ("earliest", "latest"):
        spec = EARLIEST if bound.kind == "earliest" else LATEST
        return await list_offsets(client, dict.fromkeys(tps, spec), isolation_level=isolation_level)
    if bound.kind == "timestamp":
        specs = dict.fromkeys(tps, bound.timestamp)
    else:
        specs = bound.partition_map
        if set(specs) != set(tps):
            missing = sorted(set(tps) - set(specs))
            extra = sorted(set(specs) - set(tps))
            raise OffsetLookupError(
                "explicit offsets must name every partition read and no other: "
                + (f"missing {', '.join(map(str, missing))}" if missing else "")
                + ("; " if missing and extra else "")
                + (f"not read: {', '.join(map(str, extra))}" if extra else "")
            )
    by_time = bound.kind in ("timestamp", "timestamps")
    if not by_time:
        fixed = {tp: o for tp, o in specs.items() if o >= 0}
        lookups = {tp: o for tp, o in specs.items() if o < 0}
        return fixed | await list_offsets(client, lookups, isolation_level=isolation_level)
    found = await list_offsets(client, specs, isolation_level=isolation_level)
    missing_tps = [tp for tp, o in found.items() if o < 0]
    if missing_tps:
        if missing_timestamp != "latest":
            raise OffsetLookupError(
                f"no record at or after the given timestamp in {', '.join(map(str, missing_tps))}; "
                "set startingOffsetsByTimestampStrategy=latest to start at the end instead"
            )
        found |= await list_offsets(
            client, dict.fromkeys(missing_tps, LATEST), isolation_level=isolation_level
        )
    return found


def _spec_name(spec: int) -> str:
    if spec == OffsetSpec.EARLIEST:
        return "earliest"
    if spec == OffsetSpec.LATEST:
        return "latest"
    return f"timestamp {spec}"
