"""``kafkaio bench``: a quick produce-then-consume throughput run against a cluster,
on a temporary topic (deleted afterwards) unless --topic names one."""

from __future__ import annotations

import argparse
import time
import uuid
from typing import Any

import anyio

from kafkaio.admin import NewTopic, OffsetSpec
from kafkaio.cli.app import Context, UsageError
from kafkaio.cli.output import emit_json
from kafkaio.cli.wire import OutRecord, Wire, build_batches
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.progress import Progress
from kafkaio.records import Compression


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("bench", parents=[common], help="quick produce/consume throughput")
    p.add_argument("-n", "--records", type=int, default=100_000, help="records (default 100000)")
    p.add_argument("-s", "--size", type=int, default=100, help="value bytes (default 100)")
    p.add_argument("-P", "--partitions", type=int, default=3, help="partitions of the temp topic")
    p.add_argument(
        "-z",
        "--compression",
        default="none",
        choices=[c.name.lower() for c in Compression],
    )
    p.add_argument("--topic", help="use this existing topic instead of a temporary one")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(run=run)


async def run(ctx: Context) -> int:
    args = ctx.args
    if args.records <= 0 or args.size < 0:
        raise UsageError("--records must be positive and --size 0 or more")
    compression = Compression.parse(args.compression)
    topic = args.topic or f"kafkaio-bench-{uuid.uuid4().hex[:8]}"
    show = ctx.out.isatty() and not ctx.json
    async with ctx.admin() as admin:
        if not args.topic:
            created = (await admin.create_topics([NewTopic(topic, args.partitions, 1)]))[topic]
            if created.error is not None:
                raise created.error
        wire = Wire(admin, ctx.bootstrap, ctx.connection_config())
        try:
            info = await wire.topic(topic, refresh=True)
            partitions = [p.partition for p in info.partitions]
            tps = [TopicPartition(topic, p) for p in partitions]
            starts = await admin.list_offsets(dict.fromkeys(tps, OffsetSpec.LATEST))
            share = {
                p: args.records // len(partitions)
                + (1 if i < args.records % len(partitions) else 0)
                for i, p in enumerate(partitions)
            }
            value = (b"kafkaio bench " * (args.size // 14 + 1))[: args.size]
            produced = await _produce(ctx, wire, topic, share, value, compression, show)
            consumed = await _consume(
                ctx, wire, topic, {tp.partition: starts[tp].offset or 0 for tp in tps}, share, show
            )
        finally:
            await wire.close()
            if not args.topic:
                await admin.delete_topics([topic])
    total_bytes = args.records * args.size
    result = {
        "topic": topic,
        "records": args.records,
        "value_bytes": args.size,
        "compression": compression.name.lower(),
        "produce_seconds": round(produced, 3),
        "produce_records_per_s": round(args.records / produced),
        "produce_mb_per_s": round(total_bytes / produced / 1e6, 2),
        "consume_seconds": round(consumed, 3),
        "consume_records_per_s": round(args.records / consumed),
        "consume_mb_per_s": round(total_bytes / consumed / 1e6, 2),
    }
    if ctx.json:
        emit_json(ctx.out, result)
    else:
        ctx.out.write(
            f"produce: {result['produce_records_per_s']:,} records/s "
            f"({result['produce_mb_per_s']} MB/s)\n"
            f"consume: {result['consume_records_per_s']:,} records/s "
            f"({result['consume_mb_per_s']} MB/s)\n"
        )
    return 0


async def _produce(
    ctx: Context,
    wire: Wire,
    topic: str,
    share: dict[int, int],
    value: bytes,
    compression: Compression,
    show: bool,
) -> float:
    progress = Progress("produce", sum(share.values()), stream=ctx.out) if show else None
    start = time.perf_counter()

    async def one(p: int, count: int) -> None:
        chunk = 5_000
        for first in range(0, count, chunk):
            n = min(chunk, count - first)
            batches = build_batches([OutRecord(None, value)] * n, compression)
            await wire.produce(topic, p, batches, timeout=ctx.timeout_ms / 1000)
            if progress is not None:
                progress.update(n, n * len(value))

    async with anyio.create_task_group() as tg:
        for p, count in share.items():
            tg.start_soon(one, p, count)
    elapsed = time.perf_counter() - start
    if progress is not None:
        progress.finish()
    return max(elapsed, 1e-9)


async def _consume(
    ctx: Context,
    wire: Wire,
    topic: str,
    starts: dict[int, int],
    share: dict[int, int],
    show: bool,
) -> float:
    progress = Progress("consume", sum(share.values()), stream=ctx.out) if show else None
    start = time.perf_counter()

    async def one(p: int) -> None:
        offset, remaining = starts[p], share[p]
        while remaining > 0:  # counts records: end offsets can be inexact (Tansu)
            records, _hw = await wire.fetch(topic, p, offset, timeout=ctx.timeout_ms / 1000)
            if records:
                records = records[:remaining]
                offset = records[-1].offset + 1
                remaining -= len(records)
                if progress is not None:
                    progress.update(len(records), sum(len(r.value or b"") for r in records))

    async with anyio.create_task_group() as tg:
        for p in share:
            tg.start_soon(one, p)
    elapsed = time.perf_counter() - start
    if progress is not None:
        progress.finish()
    return max(elapsed, 1e-9)
