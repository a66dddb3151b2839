"""``kafkaio produce TOPIC``: records from lines or JSON lines (stdin or --file) through one
Producer, with keys, headers, compression, acks and an optional fixed partition."""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import os
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal
from anyio.streams.memory import MemoryObjectSendStream

from kafkaio.cli import clients
from kafkaio.cli.app import EXIT_INTERRUPTED, EXIT_KAFKA_ERROR, Context, UsageError
from kafkaio.cli.interrupt import interruptible
from kafkaio.errors import KafkaConfigError, KafkaError
from kafkaio.producer import DeliveryFuture, Producer, RecordTooLargeError
from kafkaio.progress import Progress
from kafkaio.records import Compression

Headers = list[tuple[str, bytes | None]]

ACKS = {"all": "all", "-1": "all", "0": 0, "1": 1}
_SHOWN_FAILURES = 10  # failed records listed one per line; the rest are counted
# After Ctrl-C, how long close() lets enqueued records reach the broker before failing them.
_CLOSE_ON_INTERRUPT_S = 5.0
_READ_CHUNK = 1 << 20


@dataclass(slots=True)
class InputRecord:
    """One record read from the input: its line number, content and optional placement."""

    line: int
    key: bytes | None
    value: bytes | None
    headers: Headers = field(default_factory=list)
    partition: int | None = None
    timestamp: int | None = None


@dataclass(slots=True)
class Outcome:
    """What became of the records: delivered, failed (line, error) or never handed over."""

    total: int
    delivered: int = 0
    partitions: set[int] = field(default_factory=set)
    failed: list[tuple[int, BaseException]] = field(default_factory=list)
    stopped_by: KafkaError | None = None
    interrupted: bool = False

    @property
    def not_sent(self) -> int:
        return self.total - self.delivered - len(self.failed)


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "produce",
        parents=[common],
        help="produce lines or JSON lines from stdin or a file",
        description="Produce one record per input line. With --format json each line is an "
        'object: {"key": ..., "value": ..., "headers": {...} or [[K, V], ...], "partition": N, '
        '"timestamp": MS} (a non-object line is the value); a key, value or header value '
        '{"base64": "..."} is the bytes it encodes, so `consume --format json` output '
        "produces the same records. Keyed records go to the murmur2 "
        "partition of their key (as the Java client); others are spread by the sticky "
        "partitioner. Exits 1 if any record was not delivered.",
    )
    p.add_argument("topic")
    p.add_argument("-f", "--file", help="read records from FILE instead of stdin")
    p.add_argument("--format", choices=("lines", "json"), default="lines", help="input format")
    p.add_argument(
        "-K",
        "--key-separator",
        metavar="SEP",
        help="split each line at the first SEP (not empty) into key and value",
    )
    p.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="add a header to every record (repeatable)",
    )
    p.add_argument(
        "-z",
        "--compression",
        default="none",
        choices=[c.name.lower() for c in Compression],
        help="compression codec",
    )
    p.add_argument("--acks", default="all", choices=list(ACKS), help="acks (default all)")
    p.add_argument("-p", "--partition", type=int, help="produce every record to this partition")
    p.set_defaults(run=run)


def parse_headers(items: Iterable[str]) -> Headers:
    headers: Headers = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"header {item!r}: expected KEY=VALUE")
        headers.append((key, value.encode()))
    return headers


def check_key_separator(key_separator: str | None) -> None:
    if key_separator == "":
        raise UsageError("-K/--key-separator must not be empty")


def parse_lines(
    data: bytes, *, fmt: str, key_separator: str | None, headers: Headers
) -> list[InputRecord]:
    """One record per input line (line numbers from 1); blank lines are skipped in JSON."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    check_key_separator(key_separator)
    sep = None if key_separator is None else key_separator.encode("utf-8", "surrogateescape")
    out: list[InputRecord] = []
    for number, line in enumerate(lines, 1):
        line = line.removesuffix(b"\r")
        if fmt == "json":
            if line.strip():
                out.append(_json_record(line, number, headers))
            continue
        key: bytes | None = None
        if sep is not None:
            head, found, tail = line.partition(sep)
            key, line = (head, tail) if found else (None, line)
        out.append(InputRecord(number, key, line, list(headers)))
    return out


def _json_record(line: bytes, number: int, headers: Headers) -> InputRecord:
    try:
        obj = json.loads(line)
    except ValueError as exc:
        raise UsageError(f"input line {number} is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        return InputRecord(number, None, _to_bytes(obj, number, "value"), list(headers))
    record_headers = list(headers)
    raw_headers = obj.get("headers") or {}
    pairs = raw_headers.items() if isinstance(raw_headers, dict) else raw_headers
    for k, v in pairs:
        record_headers.append(
            (str(k), None if v is None else _to_bytes(v, number, f"header {k!r}"))
        )
    partition = obj.get("partition")
    timestamp = obj.get("timestamp")
    if partition is not None and (not isinstance(partition, int) or isinstance(partition, bool)):
        raise UsageError(f"input line {number}: partition must be an integer")
    if timestamp is not None and (not isinstance(timestamp, int) or isinstance(timestamp, bool)):
        raise UsageError(f"input line {number}: timestamp must be an integer (ms)")
    key = obj.get("key")
    value = obj.get("value")
    return InputRecord(
        number,
        None if key is None else _to_bytes(key, number, "key"),
        None if value is None else _to_bytes(value, number, "value"),
        record_headers,
        partition,
        timestamp,
    )


def _to_bytes(value: Any, number: int, what: str) -> bytes:
    """A JSON key, value or header value as bytes: a str as UTF-8, ``{"base64": "..."}``
    (how ``consume --format json`` writes bytes that are not UTF-8) as the bytes it encodes,
    anything else as its JSON text."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("base64"), str):
        try:
            return base64.b64decode(value["base64"], validate=True)
        except binascii.Error as exc:
            raise UsageError(f"input line {number}: {what} is not valid base64: {exc}") from None
    return json.dumps(value).encode()


def check_partitions(
    records: Sequence[InputRecord], fixed: int | None, topic: str, count: int
) -> None:
    """Refuse, before anything is sent, a -p or per-record partition the topic lacks."""
    wanted = [fixed] if fixed is not None else [r.partition for r in records]
    for p in wanted:
        if p is not None and not 0 <= p < count:
            raise KafkaConfigError(
                f"partition {p} does not exist: topic {topic!r} has {count} partitions "
                f"(0-{count - 1})"
            )


async def deliver(
    producer: Producer,
    topic: str,
    records: Sequence[InputRecord],
    outcome: Outcome,
    *,
    fixed: int | None = None,
    progress: Progress | None = None,
) -> None:
    """Start ``producer``, enqueue every record, flush, close, and check every
    DeliveryFuture into ``outcome``: no record goes unaccounted.

    A record the producer refuses (too large) fails alone; any other error stops enqueuing
    and is kept in ``outcome.stopped_by``. Ctrl-C stops enqueuing too; the records already
    enqueued then get a few seconds to be delivered before close() fails them. With
    ``outcome.interrupted`` already set (Ctrl-C while the input was read) the records are
    enqueued and get those few seconds only.
    """
    pending: list[tuple[int, DeliveryFuture]] = []
    await producer.start()
    try:
        async with interruptible() as interrupt:
            try:
                for record in records:
                    try:
                        future = await producer.enqueue(
                            topic,
                            record.value,
                            key=record.key,
                            partition=fixed if fixed is not None else record.partition,
                            headers=record.headers or None,
                            timestamp_ms=record.timestamp,
                        )
                    except RecordTooLargeError as exc:
                        outcome.failed.append((record.line, exc))
                        continue
                    if progress is not None:
                        future.add_done_callback(_on_delivery(progress, len(record.value or b"")))
                    pending.append((record.line, future))
                if not outcome.interrupted:
                    await producer.flush()
            except KafkaError as exc:
                outcome.stopped_by = exc
        outcome.interrupted = outcome.interrupted or interrupt.interrupted
    finally:
        await producer.close(
            timeout_ms=_CLOSE_ON_INTERRUPT_S * 1000 if outcome.interrupted else None
        )
        for line, future in pending:  # all done now: close completes every future
            error = future.exception()
            if error is None:
                outcome.delivered += 1
                outcome.partitions.add(future.result().partition)
            else:
                outcome.failed.append((line, error))
        outcome.failed.sort(key=lambda item: item[0])


def _on_delivery(progress: Progress, size: int) -> Callable[[DeliveryFuture], None]:
    def done(_future: DeliveryFuture) -> None:
        progress.update(1, size)

    return done


def report(ctx: Context, topic: str, outcome: Outcome, partition_count: int) -> int:
    """Notes on stderr; EXIT_KAFKA_ERROR unless every record was delivered."""
    summary = (
        f"produced {outcome.delivered} records to {topic} "
        f"({len(outcome.partitions)} of {partition_count} partitions)"
    )
    delivered_all = outcome.delivered == outcome.total
    if delivered_all:
        ctx.note(summary)
    else:
        missing = outcome.total - outcome.delivered
        ctx.note(f"{summary}; {missing} of {outcome.total} NOT delivered")
    for line, error in outcome.failed[:_SHOWN_FAILURES]:
        ctx.note(f"  input line {line}: {error}")
    if len(outcome.failed) > _SHOWN_FAILURES:
        ctx.note(f"  ... and {len(outcome.failed) - _SHOWN_FAILURES} more failed records")
    if outcome.stopped_by is not None:
        ctx.note(f"  producing stopped: {outcome.stopped_by}")
    if outcome.not_sent:
        ctx.note(f"  {outcome.not_sent} input records were never handed to the producer")
    if outcome.interrupted:
        ctx.note("interrupted")
        return EXIT_INTERRUPTED
    return 0 if delivered_all else EXIT_KAFKA_ERROR


async def read_until_eof(fd: int, into: bytearray) -> None:
    """Append what file descriptor ``fd`` gives to ``into`` until end of file.

    A daemon thread does the blocking reads with os.read (no Python-level lock held), so
    cancelling this (Ctrl-C) returns at once, keeping what was read: the thread, maybe
    still blocked in a read, is abandoned and cannot hold up the interpreter's exit.
    """
    send, receive = anyio.create_memory_object_stream[bytes | OSError](1)
    async with BlockingPortal() as portal, send, receive:  # closed: the thread stops
        reader = threading.Thread(
            target=_read_chunks, args=(fd, portal, send), name="kafkaio-stdin", daemon=True
        )
        reader.start()
        async for chunk in receive:
            if isinstance(chunk, OSError):
                raise chunk
            if not chunk:
                return
            into += chunk


def _read_chunks(
    fd: int, portal: BlockingPortal, send: MemoryObjectSendStream[bytes | OSError]
) -> None:
    """The reading thread: hands every chunk (b"" at end of file, or the OSError) over."""
    try:
        while True:
            chunk: bytes | OSError
            try:
                chunk = os.read(fd, _READ_CHUNK)
            except OSError as exc:
                chunk = exc
            portal.call(send.send, chunk)
            if not isinstance(chunk, bytes) or not chunk:
                return
    except Exception:  # the reader went away (Ctrl-C) or the event loop ended: stop quietly
        return


async def _read_stdin() -> tuple[bytes, bool]:
    """stdin up to end of file, or up to Ctrl-C; returns (data, interrupted). Interrupted,
    only complete lines count (an unfinished last line is dropped)."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (e.g. under a test)
        return sys.stdin.buffer.read(), False
    data = bytearray()
    async with interruptible() as interrupt:
        await read_until_eof(fd, data)
    if interrupt.interrupted:
        del data[data.rfind(b"\n") + 1 :]
    return bytes(data), interrupt.interrupted


async def run(ctx: Context) -> int:
    args = ctx.args
    headers = parse_headers(args.header)
    check_key_separator(args.key_separator)  # before waiting for stdin
    clients.check_topic_name(args.topic)
    if args.file:
        with open(args.file, "rb") as f:
            data, interrupted = f.read(), False
    else:
        data, interrupted = await _read_stdin()
    records = parse_lines(data, fmt=args.format, key_separator=args.key_separator, headers=headers)
    if interrupted and not records:
        ctx.note(f"produced 0 records to {args.topic}")
        ctx.note("interrupted")
        return EXIT_INTERRUPTED
    async with ctx.admin() as admin:
        count = len(await clients.topic_partitions(admin, args.topic))
    check_partitions(records, args.partition, args.topic, count)
    if not records:
        return report(ctx, args.topic, Outcome(0), count)
    producer = clients.producer(ctx, acks=ACKS[args.acks], compression_type=args.compression)
    progress = Progress("produced", len(records), stream=ctx.out) if _tty(ctx) else None
    # Ctrl-C while reading: the lines read are still produced, given a few seconds (as kcat).
    outcome = Outcome(len(records), interrupted=interrupted)
    try:
        await deliver(
            producer, args.topic, records, outcome, fixed=args.partition, progress=progress
        )
    finally:
        if progress is not None:
            progress.finish()
    return report(ctx, args.topic, outcome, count)


def _tty(ctx: Context) -> bool:
    try:
        return ctx.out.isatty()
    except (AttributeError, ValueError):
        return False
