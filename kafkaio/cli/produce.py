"""``kafkaio produce TOPIC``: records from lines or JSON lines (stdin or --file) to a topic,
with keys, headers, compression, acks and an optional fixed partition."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from typing import Any

import anyio

from kafkaio.cli.app import Context, UsageError
from kafkaio.cli.wire import OutRecord, Wire, build_batches
from kafkaio.errors import KafkaConfigError
from kafkaio.producer.murmur2 import partition_for_key
from kafkaio.progress import Progress
from kafkaio.records import Compression

_ACKS = {"all": -1, "-1": -1, "0": 0, "1": 1}
_REQUEST_BYTES = 1024 * 1024  # batches per Produce request, about


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "produce",
        parents=[common],
        help="produce lines or JSON lines from stdin or a file",
        description="Produce one record per input line. With --format json each line is an "
        'object: {"key": ..., "value": ..., "headers": {...}, "partition": N, '
        '"timestamp": MS} (a non-object line is the value).',
    )
    p.add_argument("topic")
    p.add_argument("-f", "--file", help="read records from FILE instead of stdin")
    p.add_argument("--format", choices=("lines", "json"), default="lines", help="input format")
    p.add_argument(
        "-K", "--key-separator", metavar="SEP", help="split each line at SEP into key and value"
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
    p.add_argument("--acks", default="all", choices=list(_ACKS), help="acks (default all)")
    p.add_argument("-p", "--partition", type=int, help="produce every record to this partition")
    p.set_defaults(run=run)


def parse_headers(items: Iterable[str]) -> list[tuple[str, bytes | None]]:
    headers: list[tuple[str, bytes | None]] = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"header {item!r}: expected KEY=VALUE")
        headers.append((key, value.encode()))
    return headers


def parse_lines(
    data: bytes, *, fmt: str, key_separator: str | None, headers: list[tuple[str, bytes | None]]
) -> list[tuple[int | None, OutRecord]]:
    """(partition or None, record) for each input line; blank lines are skipped in JSON."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    sep = key_separator.encode() if key_separator is not None else None
    out: list[tuple[int | None, OutRecord]] = []
    for number, line in enumerate(lines, 1):
        line = line.removesuffix(b"\r")
        if fmt == "json":
            if not line.strip():
                continue
            out.append(_json_record(line, number, headers))
            continue
        key: bytes | None = None
        if sep is not None:
            head, found, tail = line.partition(sep)
            key, line = (head, tail) if found else (None, line)
        out.append((None, OutRecord(key, line, list(headers))))
    return out


def _json_record(
    line: bytes, number: int, headers: list[tuple[str, bytes | None]]
) -> tuple[int | None, OutRecord]:
    try:
        obj = json.loads(line)
    except ValueError as exc:
        raise UsageError(f"input line {number} is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        return None, OutRecord(None, _to_bytes(obj), list(headers))
    record_headers = list(headers)
    raw_headers = obj.get("headers") or {}
    pairs = raw_headers.items() if isinstance(raw_headers, dict) else raw_headers
    for k, v in pairs:
        record_headers.append((str(k), None if v is None else _to_bytes(v)))
    partition = obj.get("partition")
    timestamp = obj.get("timestamp")
    if partition is not None and not isinstance(partition, int):
        raise UsageError(f"input line {number}: partition must be an integer")
    if timestamp is not None and not isinstance(timestamp, int):
        raise UsageError(f"input line {number}: timestamp must be an integer (ms)")
    key = obj.get("key")
    value = obj.get("value")
    return partition, OutRecord(
        None if key is None else _to_bytes(key),
        None if value is None else _to_bytes(value),
        record_headers,
        timestamp,
    )


def _to_bytes(value: Any) -> bytes:
    return value.encode() if isinstance(value, str) else json.dumps(value).encode()


def assign_partitions(
    records: list[tuple[int | None, OutRecord]], partitions: int, fixed: int | None
) -> dict[int, list[OutRecord]]:
    """Group records by partition: fixed, per record, by key (murmur2 as the Java client),
    or unkeyed records spread round-robin in chunks of 1000."""
    by_partition: dict[int, list[OutRecord]] = {}
    unkeyed = 0
    for explicit, record in records:
        if fixed is not None:
            p = fixed
        elif explicit is not None:
            p = explicit
        elif record.key is not None:
            p = partition_for_key(record.key, partitions)
        else:
            p = (unkeyed // 1000) % partitions
            unkeyed += 1
        by_partition.setdefault(p, []).append(record)
    return by_partition


def _chunks(batches: list[bytes]) -> Iterable[list[bytes]]:
    chunk: list[bytes] = []
    size = 0
    for b in batches:
        if chunk and size + len(b) > _REQUEST_BYTES:
            yield chunk
            chunk, size = [], 0
        chunk.append(b)
        size += len(b)
    if chunk:
        yield chunk


async def run(ctx: Context) -> int:
    args = ctx.args
    headers = parse_headers(args.header)
    if args.file:
        with open(args.file, "rb") as f:
            data = f.read()
    else:
        data = await anyio.to_thread.run_sync(sys.stdin.buffer.read)
    records = parse_lines(data, fmt=args.format, key_separator=args.key_separator, headers=headers)
    compression = Compression.parse(args.compression)
    async with ctx.admin() as admin:
        wire = Wire(admin, ctx.bootstrap, ctx.connection_config())
        try:
            info = await wire.topic(args.topic)
            count = len(info.partitions)
            for p in [args.partition] + [e for e, _ in records]:
                if p is not None and not 0 <= p < count:
                    raise KafkaConfigError(
                        f"partition {p} does not exist: topic {args.topic!r} has {count} "
                        f"partitions (0-{count - 1})"
                    )
            by_partition = assign_partitions(records, count, args.partition)
            progress = Progress("produced", len(records), stream=ctx.out) if _tty(ctx) else None

            async def send_partition(p: int, items: list[OutRecord]) -> None:
                batches = build_batches(items, compression)
                for chunk in _chunks(batches):
                    await wire.produce(
                        args.topic, p, chunk, acks=_ACKS[args.acks], timeout=ctx.timeout_ms / 1000
                    )
                    n = sum(_batch_count(b) for b in chunk)
                    if progress is not None:
                        progress.update(n, sum(len(b) for b in chunk))

            async with anyio.create_task_group() as tg:
                for p, items in sorted(by_partition.items()):
                    tg.start_soon(send_partition, p, items)
            if progress is not None:
                progress.finish()
        finally:
            await wire.close()
    ctx.note(
        f"produced {len(records)} records to {args.topic} "
        f"({len(by_partition)} of {count} partitions)"
    )
    return 0


def _batch_count(batch: bytes) -> int:
    # RecordBatch v2 header: records count is the int32 at byte 57.
    return int.from_bytes(batch[57:61], "big")


def _tty(ctx: Context) -> bool:
    try:
        return ctx.out.isatty()
    except (AttributeError, ValueError):
        return False
