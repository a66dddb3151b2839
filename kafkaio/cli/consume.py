"""``kafkaio consume TOPIC``: read partitions from the beginning, an offset, a timestamp,
a group's committed offsets or the end; print records raw, as JSON or by a template."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from kafkaio.admin import Admin, OffsetSpec
from kafkaio.cli.app import Context, UsageError
from kafkaio.cli.output import text
from kafkaio.cli.wire import Wire
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.records import Record

DEFAULT_TEMPLATE = "{topic}/{partition}@{offset} {key} {value}"
Formatter = Callable[[str, int, Record], str]


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "consume",
        parents=[common],
        help="print records of a topic",
        description="Print records of a topic's partitions, from the end unless told "
        "otherwise. With --group, start from the group's committed offsets and commit the "
        "positions reached on exit (the group must have no active members).",
    )
    p.add_argument("topic")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    start.add_argument(
        "-o", "--offset", type=int, help="start at offset N (negative: N records before the end)"
    )
    start.add_argument("--timestamp", type=int, metavar="MS", help="start at this time (ms)")
    p.add_argument("-g", "--group", help="start from (and commit to) this group's offsets")
    p.add_argument(
        "-p", "--partition", type=int, action="append", help="only this partition (repeatable)"
    )
    p.add_argument("-c", "--count", type=int, help="stop after N records")
    p.add_argument("-e", "--exit", action="store_true", help="stop at the end of every partition")
    p.add_argument(
        "--format", choices=("raw", "json", "template"), default="raw", help="output format"
    )
    p.add_argument(
        "--template",
        help=f"output template (implies --format template), default {DEFAULT_TEMPLATE!r}; "
        "fields: topic partition offset timestamp key value headers",
    )
    p.add_argument("-K", "--key-separator", metavar="SEP", help="raw format: print key SEP value")
    p.set_defaults(run=run)


def formatter(fmt: str, template: str | None, key_separator: str | None) -> Formatter:
    """A function rendering one record as one output line (without newline)."""
    if template is not None or fmt == "template":
        pattern = template or DEFAULT_TEMPLATE
        try:
            pattern.format_map(_Fields("t", 0, Record(0, 0, None, None, None)))
        except (KeyError, IndexError, ValueError) as exc:
            raise UsageError(f"bad --template {pattern!r}: {exc!r}") from None
        return lambda topic, partition, r: pattern.format_map(_Fields(topic, partition, r))
    if fmt == "json":

        def as_json(topic: str, partition: int, r: Record) -> str:
            return json.dumps(
                {
                    "topic": topic,
                    "partition": partition,
                    "offset": r.offset,
                    "timestamp": r.timestamp,
                    "key": text(r.key),
                    "value": text(r.value),
                    "headers": {k: text(v) for k, v in r.headers},
                },
                ensure_ascii=False,
            )

        return as_json
    if key_separator is not None:
        return lambda _t, _p, r: f"{text(r.key) or ''}{key_separator}{text(r.value) or ''}"
    return lambda _t, _p, r: text(r.value) or ""


class _Fields(dict[str, Any]):
    def __init__(self, topic: str, partition: int, r: Record) -> None:
        super().__init__(
            topic=topic,
            partition=partition,
            offset=r.offset,
            timestamp=r.timestamp,
            key=text(r.key) or "",
            value=text(r.value) or "",
            headers=",".join(f"{k}={text(v)}" for k, v in r.headers),
        )


async def start_offsets(
    admin: Admin, args: argparse.Namespace, tps: list[TopicPartition]
) -> dict[TopicPartition, int]:
    """Where each partition starts, from the options (the group's commits first)."""
    starts: dict[TopicPartition, int] = {}
    if args.group:
        committed = await admin.list_group_offsets(args.group, tps)
        starts = {tp: c.offset for tp, c in committed.items() if c.offset is not None}
    rest = [tp for tp in tps if tp not in starts]
    if not rest:
        return starts
    spec: OffsetSpec | int = OffsetSpec.LATEST
    if args.from_beginning:
        spec = OffsetSpec.EARLIEST
    elif args.timestamp is not None:
        spec = args.timestamp
    elif args.offset is not None and args.offset >= 0:
        return {**starts, **dict.fromkeys(rest, args.offset)}
    listed = await admin.list_offsets(dict.fromkeys(rest, spec))
    relative = args.offset if args.offset is not None and args.offset < 0 else 0
    earliest: dict[TopicPartition, int] = {}
    if relative:
        early = await admin.list_offsets(dict.fromkeys(rest, OffsetSpec.EARLIEST))
        earliest = {tp: e.offset or 0 for tp, e in early.items()}
    for tp in rest:
        found = listed[tp]
        if found.error is not None:
            raise found.error
        if found.offset is None:  # a timestamp after the last record: start at the end
            end = (await admin.list_offsets({tp: OffsetSpec.LATEST}))[tp]
            starts[tp] = end.offset or 0
        else:
            starts[tp] = max(found.offset + relative, earliest.get(tp, 0))
    return starts


async def run(ctx: Context) -> int:
    args = ctx.args
    if args.count is not None and args.count < 0:
        raise UsageError("--count must be 0 or more")
    render = formatter(args.format, args.template, args.key_separator)
    async with ctx.admin() as admin:
        wire = Wire(admin, ctx.bootstrap, ctx.connection_config())
        try:
            info = await wire.topic(args.topic)
            all_partitions = [p.partition for p in info.partitions]
            wanted = args.partition or all_partitions
            missing = sorted(set(wanted) - set(all_partitions))
            if missing:
                raise UsageError(
                    f"topic {args.topic!r} has partitions 0-{len(all_partitions) - 1}; "
                    f"no partition {missing[0]}"
                )
            tps = [TopicPartition(args.topic, p) for p in sorted(set(wanted))]
            positions = await start_offsets(admin, args, tps)
            printed = await _consume(ctx, wire, positions, render)
            if args.group and positions:
                await _commit(ctx, admin, args.group, positions)
        finally:
            await wire.close()
    if not ctx.out.isatty():
        ctx.note(f"consumed {printed} records from {args.topic}")
    return 0


async def _consume(
    ctx: Context,
    wire: Wire,
    positions: dict[TopicPartition, int],
    render: Formatter,
) -> int:
    args = ctx.args
    limit: int | None = args.count
    if limit == 0:
        return 0
    send, receive = anyio.create_memory_object_stream[tuple[TopicPartition, list[Record]]](16)
    printed = 0

    async def fetch_loop(
        tp: TopicPartition, channel: MemoryObjectSendStream[tuple[TopicPartition, list[Record]]]
    ) -> None:
        offset = positions[tp]
        async with channel:
            while True:
                records, high_watermark = await wire.fetch(
                    tp.topic, tp.partition, offset, timeout=ctx.timeout_ms / 1000
                )
                if records:
                    offset = records[-1].offset + 1
                    await channel.send((tp, records))
                elif args.exit and offset >= high_watermark:
                    return

    async with anyio.create_task_group() as tg:
        async with send:
            for tp in positions:
                tg.start_soon(fetch_loop, tp, send.clone())
        async with receive:
            async for tp, records in receive:
                for r in records:
                    ctx.out.write(render(tp.topic, tp.partition, r) + "\n")
                    positions[tp] = r.offset + 1  # what was printed is what gets committed
                    printed += 1
                    if limit is not None and printed >= limit:
                        ctx.out.flush()
                        tg.cancel_scope.cancel()
                        return printed
                ctx.out.flush()
    return printed


async def _commit(
    ctx: Context, admin: Admin, group: str, positions: dict[TopicPartition, int]
) -> None:
    results = await admin.alter_group_offsets(group, positions)
    failed = {tp: e for tp, e in results.items() if e is not None}
    if failed:
        tp, err = next(iter(failed.items()))
        ctx.note(f"could not commit the positions of group {group!r} ({tp}): {err}")
