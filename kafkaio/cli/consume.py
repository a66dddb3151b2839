"""``kafkaio consume TOPIC``: print records through a Consumer, either from assigned
partitions and a chosen start, or as a member of a group that commits what it printed."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kafkaio.admin import Admin
from kafkaio.cli import clients
from kafkaio.cli.app import EXIT_INTERRUPTED, EXIT_KAFKA_ERROR, Context, UsageError
from kafkaio.cli.interrupt import interruptible
from kafkaio.cli.output import DEFAULT_TEMPLATE, RecordFormatter, byte_sink, record_formatter
from kafkaio.consumer import Consumer, RebalanceListener
from kafkaio.errors import KafkaError
from kafkaio.metadata.cluster import TopicPartition

# How long one poll waits for records before `-e` checks whether every partition is read.
POLL_MS = 200
DEFAULT_SESSION_TIMEOUT_MS = 10_000
# Exit commits ask each unprinted partition's position for at most this long.
_POSITION_TIMEOUT_MS = 5_000


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "consume",
        parents=[common],
        help="print records of a topic",
        description="Print records of a topic's partitions, from the end unless told "
        "otherwise. With --group the tool is a member of the group: it gets partitions "
        "from the group (or the -p partitions), starts from the group's committed offsets "
        "(partitions without one start as the other options say), and commits what it "
        "printed when it exits (also on Ctrl-C).",
    )
    p.add_argument(
        "topics",
        nargs="+",
        metavar="topic",
        help="topics to read; one starting with ^ is a regular expression (as kcat)",
    )
    start = p.add_mutually_exclusive_group()
    start.add_argument(
        "--from-beginning", action="store_true", help="start at the earliest offset (-o beginning)"
    )
    start.add_argument(
        "-o",
        "--offset",
        type=parse_offset,
        metavar="START",
        help="where to start (as kcat): beginning, end, stored (the group's committed "
        "offsets; needs -g), N (offset N), -N (N records before the end), s@MS (the "
        "first record at or after time MS)",
    )
    start.add_argument("--timestamp", type=int, metavar="MS", help="start at this time (s@MS)")
    p.add_argument("-g", "--group", help="consume as a member of this group, committing on exit")
    p.add_argument(
        "--session-timeout-ms",
        type=int,
        default=DEFAULT_SESSION_TIMEOUT_MS,
        metavar="MS",
        help="group session timeout: a member that stops heartbeating is removed after it "
        f"(default {DEFAULT_SESSION_TIMEOUT_MS})",
    )
    p.add_argument(
        "-p", "--partition", type=int, action="append", help="only this partition (repeatable)"
    )
    p.add_argument("-c", "--count", type=int, help="stop after N records")
    p.add_argument(
        "-e", "--exit", action="store_true", help="stop once every partition is read to its end"
    )
    p.add_argument(
        "--format", choices=("raw", "json", "template"), default="raw", help="output format"
    )
    p.add_argument(
        "--template",
        help=f"output template (implies --format template), default {DEFAULT_TEMPLATE!r}; "
        "fields: topic partition offset timestamp key value headers",
    )
    p.add_argument("-K", "--key-separator", metavar="SEP", help="raw format: print key SEP value")
    p.add_argument(
        "-r",
        "--schema-registry",
        metavar="URL",
        help="Schema Registry URL for -s (e.g. http://localhost:8081)",
    )
    p.add_argument(
        "-s",
        "--serde",
        action="append",
        default=[],
        metavar="[key=|value=]FORMAT",
        help="decode keys and/or values written by Schema Registry serializers and print "
        "them as JSON: avro or json (JSON Schema); e.g. -s avro, -s key=avro -s value=json "
        "(needs -r)",
    )
    p.set_defaults(run=run)


@dataclass(frozen=True, slots=True)
class Start:
    """Where consumption starts: ``kind`` is beginning, end, stored, offset, relative or
    timestamp, with ``value`` for the last three."""

    kind: str
    value: int = 0


def parse_offset(text: str) -> Start:
    """kcat's -o: beginning, end, stored, N, -N, s@TIMESTAMP_MS."""
    lowered = text.strip().lower()
    if lowered in ("beginning", "end", "stored"):
        return Start(lowered)
    if lowered.startswith("s@"):
        try:
            return Start("timestamp", int(lowered[2:]))
        except ValueError:
            pass
    else:
        try:
            number = int(lowered)
        except ValueError:
            pass
        else:
            return Start("relative" if number < 0 else "offset", number)
    raise argparse.ArgumentTypeError(
        f"{text!r}: use beginning, end, stored, N, -N or s@TIMESTAMP_MS"
    )


def start_of(args: argparse.Namespace) -> Start:
    """The start the options ask for (default: the end)."""
    if args.from_beginning:
        return Start("beginning")
    if args.timestamp is not None:
        return Start("timestamp", args.timestamp)
    start: Start | None = args.offset
    return start or Start("end")


class Session:
    """One run of ``consume``: prints records, remembers the next offset after the last
    printed record of each partition, and commits those for a group."""

    def __init__(self, ctx: Context, consumer: Consumer, render: RecordFormatter) -> None:
        self.ctx = ctx
        self.args = ctx.args
        self.consumer = consumer
        self.render = render
        self.printed: dict[TopicPartition, int] = {}
        self.committed: dict[TopicPartition, int] = {}
        self.count = 0

    async def choose_start(self, tps: Iterable[TopicPartition]) -> None:
        """Seek to the start asked by -o/--timestamp; with a group, only partitions the
        group has no committed offset for. (--from-beginning and the default, the end, are
        the consumer's auto_offset_reset.)"""
        consumer = self.consumer
        start = start_of(self.args)
        if start.kind in ("beginning", "end", "stored"):
            return
        rest = sorted(tps)
        if self.args.group:
            rest = [tp for tp in rest if await consumer.committed(tp) is None]
        if not rest:
            return
        if start.kind == "timestamp":
            found = await consumer.offsets_for_times(dict.fromkeys(rest, start.value))
            after_last = [tp for tp, at in found.items() if at is None]
            for tp, at in found.items():
                if at is not None:
                    consumer.seek(tp, at.offset)
            if after_last:  # a time after the last record: start at the end
                await consumer.seek_to_end(*after_last)
        elif start.kind == "offset":
            for tp in rest:
                consumer.seek(tp, start.value)
        else:
            ends = await consumer.end_offsets(rest)
            beginnings = await consumer.beginning_offsets(rest)
            for tp in rest:
                consumer.seek(tp, max(ends[tp] + start.value, beginnings[tp], 0))

    async def print_records(self) -> None:
        """Poll and print until -c records were printed, -e found every partition read,
        or forever."""
        limit: int | None = self.args.count
        out = byte_sink(self.ctx.out)  # keys and values as they are, not decoded
        while limit is None or self.count < limit:
            batch = await self.consumer.getmany(
                timeout_ms=POLL_MS, max_records=None if limit is None else limit - self.count
            )
            for tp, records in batch.items():
                out.write(b"".join([self.render(r) + b"\n" for r in records]))
                self.printed[tp] = records[-1].offset + 1
                self.count += len(records)
            out.flush()
            if not batch and self.args.exit and await self.at_end():
                return

    async def at_end(self) -> bool:
        """Whether every assigned partition's position reached its high watermark (False
        while the group has assigned nothing yet or no fetch has answered)."""
        assigned = self.consumer.assignment()
        if not assigned:
            return False
        for tp in assigned:
            high = self.consumer.highwater(tp)
            if high is None or await self.consumer.position(tp) < high:
                return False
        return True

    async def commit(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Commit the printed positions of `partitions` (default: all assigned; those with
        nothing printed commit their current position, so the next run starts there)."""
        consumer = self.consumer
        offsets: dict[TopicPartition, int] = {}
        for tp in sorted(consumer.assignment() if partitions is None else partitions):
            if tp in self.printed:
                offsets[tp] = self.printed[tp]
            else:
                try:
                    offsets[tp] = await consumer.position(tp, timeout_ms=_POSITION_TIMEOUT_MS)
                except KafkaError:
                    continue  # no position yet: nothing read, nothing to commit
        offsets = {tp: o for tp, o in offsets.items() if self.committed.get(tp) != o}
        if offsets:
            await consumer.commit(offsets)
            self.committed.update(offsets)

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.printed.pop(tp, None)
            self.committed.pop(tp, None)


class _GroupListener(RebalanceListener):
    """Starts newly assigned partitions as the options say; commits what was printed from
    partitions before the group takes them away."""

    def __init__(self, session: Session) -> None:
        self.session = session

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        await self.session.choose_start(assigned)

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        try:
            await self.session.commit(revoked)
        except KafkaError as exc:
            self.session.ctx.note(f"could not commit before giving up {sorted(revoked)}: {exc}")
        self.session.forget(revoked)

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.session.forget(lost)


async def _topics(ctx: Context, admin: Admin) -> list[str]:
    """The topics named, with each ^regex replaced by the existing topics it matches."""
    names: list[str] = []
    existing: list[str] | None = None
    for name in ctx.args.topics:
        if not name.startswith("^"):
            names.append(name)
            continue
        try:
            pattern = re.compile(name)
        except re.error as exc:
            raise UsageError(f"bad topic regex {name!r}: {exc}") from None
        if existing is None:
            existing = await admin.list_topics()
        matched = [t for t in existing if pattern.match(t)]
        if not matched:
            raise UsageError(f"no topic matches {name!r}")
        names.extend(matched)
    return list(dict.fromkeys(names))


async def _partitions(ctx: Context, admin: Admin, topics: list[str]) -> list[TopicPartition]:
    args = ctx.args
    out: list[TopicPartition] = []
    for topic in topics:
        all_partitions = await clients.topic_partitions(admin, topic)
        wanted = args.partition or all_partitions
        missing = sorted(set(wanted) - set(all_partitions))
        if missing:
            raise UsageError(
                f"topic {topic!r} has partitions 0-{len(all_partitions) - 1}; "
                f"no partition {missing[0]}"
            )
        out += [TopicPartition(topic, p) for p in sorted(set(wanted))]
    return out


def _consumer(ctx: Context) -> Consumer:
    args = ctx.args
    start = start_of(args)
    if start.kind == "stored" and not args.group:
        raise UsageError("-o stored starts at the group's committed offsets: it needs -g GROUP")
    reset = "earliest" if start.kind == "beginning" else "latest"
    serdes = _registry_deserializers(ctx)
    if not args.group:
        return clients.consumer(ctx, auto_offset_reset=reset, **serdes)
    session_ms = args.session_timeout_ms
    if session_ms < 10:
        raise UsageError(f"--session-timeout-ms must be at least 10, got {session_ms}")
    return clients.consumer(
        ctx,
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset=reset,
        session_timeout_ms=session_ms,
        heartbeat_interval_ms=max(session_ms // 5, 1),
        **serdes,
    )


def _registry_deserializers(ctx: Context) -> dict[str, Any]:
    """-s/-r: key_deserializer / value_deserializer that decode Schema Registry records."""
    args = ctx.args
    if not args.serde:
        if args.schema_registry:
            raise UsageError("-r/--schema-registry is used with -s avro or -s json")
        return {}
    if not args.schema_registry:
        raise UsageError("-s needs the Schema Registry's URL: -r URL")
    from kafkaio.cli.decoding import registry_deserializers

    return registry_deserializers(args.schema_registry, args.serde)


async def run(ctx: Context) -> int:
    args = ctx.args
    if args.count is not None and args.count < 0:
        raise UsageError("--count must be 0 or more")
    for name in args.topics:
        if not name.startswith("^"):
            clients.check_topic_name(name)
    render = record_formatter(args.format, args.template, args.key_separator)
    async with ctx.admin() as admin:
        topics = await _topics(ctx, admin)
        tps = await _partitions(ctx, admin, topics)
    if args.count == 0:
        return 0
    consumer = _consumer(ctx)
    session = Session(ctx, consumer, render)
    code = 0
    async with consumer:  # close() leaves the group
        try:
            async with interruptible() as interrupt:
                if args.group and not args.partition:
                    listener = _GroupListener(session)
                    patterns = [t for t in args.topics if t.startswith("^")]
                    if patterns:  # the group follows topics created later too
                        # as kcat: a ^regex matches names it starts (the consumer's
                        # patterns match whole names)
                        plain = [re.escape(t) for t in args.topics if not t.startswith("^")]
                        joined = "|".join([f"(?:{p}).*" for p in patterns] + plain)
                        consumer.subscribe(pattern=joined, listener=listener)
                    else:
                        consumer.subscribe(topics, listener=listener)
                else:
                    consumer.assign(tps)
                    await session.choose_start(tps)
                await session.print_records()
        finally:  # also after Ctrl-C or an error: commit what was printed
            if args.group:
                code = await _commit_on_exit(ctx, session)
            if not ctx.out.isatty():
                ctx.note(f"consumed {session.count} records from {', '.join(topics)}")
    if interrupt.interrupted:
        ctx.note("interrupted")
        return EXIT_INTERRUPTED
    return code


async def _commit_on_exit(ctx: Context, session: Session) -> int:
    try:
        await session.commit()
    except KafkaError as exc:
        ctx.note(
            f"could not commit the printed positions of group {ctx.args.group!r}: {exc} "
            "(the next run with this group starts from the previous commit)"
        )
        return EXIT_KAFKA_ERROR
    return 0
