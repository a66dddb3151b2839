"""``kafkaio bench``: a quick produce-then-consume throughput run with the Producer and the
Consumer, on a temporary topic (deleted afterwards) unless --topic names one."""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable
from typing import Any

from kafkaio.admin import NewTopic
from kafkaio.cli import clients
from kafkaio.cli.app import EXIT_INTERRUPTED, Context, UsageError
from kafkaio.cli.interrupt import interruptible
from kafkaio.cli.output import emit_json
from kafkaio.consumer import Consumer
from kafkaio.errors import KafkaError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.producer import DeliveryFuture, Producer
from kafkaio.progress import Progress
from kafkaio.records import Compression

_POLL_MS = 500


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
    value = (b"kafkaio bench " * (args.size // 14 + 1))[: args.size]
    async with ctx.admin() as admin:
        if not args.topic:
            created = (await admin.create_topics([NewTopic(topic, args.partitions, 1)]))[topic]
            if created.error is not None:
                raise created.error
            await clients.until_shown(admin, topic, created=True, timeout_ms=ctx.timeout_ms)
        try:
            await clients.topic_partitions(admin, topic)
            async with interruptible() as interrupt:
                producer = clients.producer(ctx, compression_type=args.compression, linger_ms=20)
                async with producer:
                    produced, starts = await _produce(
                        producer, topic, args.records, value, show, ctx
                    )
                async with clients.consumer(ctx) as consumer:
                    consumed = await _consume(consumer, starts, args.records, show, ctx)
        finally:
            if not args.topic:
                await admin.delete_topics([topic])
    if interrupt.interrupted:
        ctx.note("interrupted")
        return EXIT_INTERRUPTED
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
            f"produce: {result['produce_records_per_s']:,} msg/s "
            f"({result['produce_mb_per_s']} MB/s)\n"
            f"consume: {result['consume_records_per_s']:,} msg/s "
            f"({result['consume_mb_per_s']} MB/s)\n"
        )
    return 0


async def _produce(
    producer: Producer, topic: str, count: int, value: bytes, show: bool, ctx: Context
) -> tuple[float, dict[TopicPartition, int]]:
    """Send `count` records (sticky partitioner) and wait for every ack: the seconds taken
    and the first offset written to each partition (where consuming starts)."""
    progress = Progress("produce", count, stream=ctx.out) if show else None
    futures: list[DeliveryFuture] = []
    start = time.perf_counter()
    for _ in range(count):
        future = await producer.enqueue(topic, value)
        if progress is not None:
            future.add_done_callback(_on_delivery(progress, len(value)))
        futures.append(future)
    await producer.flush()
    elapsed = max(time.perf_counter() - start, 1e-9)
    starts: dict[TopicPartition, int] = {}
    for future in futures:
        error = future.exception()
        if error is not None:
            failed = sum(1 for f in futures if f.exception() is not None)
            raise KafkaError(f"{failed} of {count} records were not delivered; first: {error}")
        meta = future.result()
        tp = TopicPartition(meta.topic, meta.partition)
        if meta.offset >= 0 and (tp not in starts or meta.offset < starts[tp]):
            starts[tp] = meta.offset
    if progress is not None:
        progress.finish()
    return elapsed, starts


def _on_delivery(progress: Progress, size: int) -> Callable[[DeliveryFuture], None]:
    def done(_future: DeliveryFuture) -> None:
        progress.update(1, size)

    return done


async def _consume(
    consumer: Consumer, starts: dict[TopicPartition, int], count: int, show: bool, ctx: Context
) -> float:
    """Read `count` records from the first offsets written (counting records: Tansu's end
    offsets can be a few records low); the seconds taken."""
    progress = Progress("consume", count, stream=ctx.out) if show else None
    consumer.assign(starts)
    for tp, offset in starts.items():
        consumer.seek(tp, offset)
    start = time.perf_counter()
    remaining = count
    while remaining > 0:
        batch = await consumer.getmany(timeout_ms=_POLL_MS, max_records=remaining)
        for records in batch.values():
            remaining -= len(records)
            if progress is not None:
                progress.update(len(records), sum(len(r.value or b"") for r in records))
    elapsed = max(time.perf_counter() - start, 1e-9)
    if progress is not None:
        progress.finish()
    return elapsed
