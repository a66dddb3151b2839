"""Memory and CPU of a default Consumer reading hostile record batches written through a broker.

Run ``python -m benchmarks.bench_hostile``: an embedded Tansu broker stores each poisoned batch
as it is (raw Produce), then a Consumer with default settings reads its partition for 6 s in
a fresh child process, which reports its peak RSS, the records handed out, the CPU time and
the errors raised. The batches:

- ``lz4-1g``: 4 MB on the wire, an lz4 frame whose header claims 60 MiB and whose blocks
  expand to 1 GiB (decompression stops at the 64 MiB bound: CorruptRecordError);
- ``zstd-tiny``: 5 MB of zstd holding 64 MiB of 7-to-9-byte records (6.8 million), read
  ``max_poll_records`` (500) at a time.
"""

from __future__ import annotations

import argparse
import json
import resource
import struct
import subprocess
import sys
import time

import anyio

SECONDS = 6.0
LZ4_MAGIC_HEADER = 14  # bytes of an lz4 frame header with a content size, before its checksum


def xxh32_short(data: bytes) -> int:
    """XXH32 (seed 0) of fewer than 16 bytes: an lz4 frame header's checksum is its second
    byte."""
    assert len(data) < 16
    p1, p2, p3, p4, p5, mask = 2654435761, 2246822519, 3266489917, 668265263, 374761393, 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    n, i = len(data), 0
    h = (p5 + n) & mask  # headers are under 16 bytes: no stripes
    while i + 4 <= n:
        h = (rotl((h + struct.unpack_from("<I", data, i)[0] * p3) & mask, 17) * p4) & mask
        i += 4
    while i < n:
        h = (rotl((h + data[i] * p5) & mask, 11) * p1) & mask
        i += 1
    h ^= h >> 15
    h = (h * p2) & mask
    h ^= h >> 13
    h = (h * p3) & mask
    return h ^ (h >> 16)


def _batch(payload: bytes, codec: int, count: int, last_delta: int) -> bytes:
    from crc32c import crc32c

    header = struct.pack(
        ">qiibIhiqqqhii",
        0,
        49 + len(payload),
        0,
        2,
        0,
        codec,
        last_delta,
        1_700_000_000_000,
        1_700_000_000_000,
        -1,
        -1,
        -1,
        count,
    )
    raw = bytearray(header + payload)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    return bytes(raw)


def poisoned(kind: str) -> bytes:
    if kind == "lz4-1g":
        import lz4.frame

        frame = bytearray(
            lz4.frame.compress(
                bytes(1 << 30),
                block_size=lz4.frame.BLOCKSIZE_MAX4MB,
                store_size=True,
                content_checksum=False,
            )
        )
        struct.pack_into("<Q", frame, 6, 60 << 20)  # the lie
        frame[LZ4_MAGIC_HEADER] = (xxh32_short(bytes(frame[4:LZ4_MAGIC_HEADER])) >> 8) & 0xFF
        return _batch(bytes(frame), 3, 1, 0)
    if kind == "zstd-tiny":
        import zstandard

        from kafkaio.records.varint import encode_varint

        parts: list[bytes] = []
        size = n = 0
        while size < (64 << 20) - 16:  # no key, no value, no headers
            delta = encode_varint(n)
            record = encode_varint(5 + len(delta)) + b"\x00\x00" + delta + b"\x01\x01\x00"
            parts.append(record)
            size += len(record)
            n += 1
        return _batch(zstandard.ZstdCompressor().compress(b"".join(parts)), 4, n, n - 1)
    raise SystemExit(f"unknown batch {kind!r}")


async def write(bootstrap: str, topic: str, kind: str) -> int:
    from kafkaio import Admin, NewTopic
    from kafkaio.net import Connection, ConnectionConfig
    from kafkaio.testing.raw import produce

    async with Admin(bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, 1, 1)])
    host, port = bootstrap.rsplit(":", 1)
    blob = poisoned(kind)
    conn = await Connection.connect(host, int(port), ConnectionConfig())
    try:
        await produce(conn, topic, 0, [blob])
    finally:
        await conn.close()
    return len(blob)


async def read(bootstrap: str, topic: str) -> dict[str, object]:
    from kafkaio import Consumer, TopicPartition

    tp = TopicPartition(topic, 0)
    records = 0
    errors: list[str] = []
    cpu = time.process_time()
    start = time.monotonic()
    async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        while time.monotonic() - start < SECONDS and len(errors) < 3:
            try:
                got = await consumer.getmany(timeout_ms=200)
            except Exception as exc:  # noqa: BLE001 - reported
                errors.append(f"{type(exc).__name__}: {str(exc)[:80]}")
                continue
            records += sum(len(batch) for batch in got.values())
    return {
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "records": records,
        "cpu_s": round(time.process_time() - cpu, 2),
        "errors": errors[:1],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("batches", nargs="*", default=["lz4-1g", "zstd-tiny"])
    parser.add_argument("--read", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--write", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.read:
        print(json.dumps(anyio.run(read, *args.read)))
        return 0
    if args.write:
        print(anyio.run(write, *args.write))
        return 0
    from kafkaio.testing.tansu import TansuBroker

    def child(*options: str) -> str:
        # each side in a process of its own: Linux keeps a process's peak RSS across exec,
        # so the reader must not be forked from one that built a batch
        command = [sys.executable, "-m", "benchmarks.bench_hostile", *options]
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()

    with TansuBroker() as broker:
        for kind in args.batches:
            topic = f"hostile-{kind}"
            size = int(child("--write", broker.bootstrap, topic, kind))
            outcome = child("--read", broker.bootstrap, topic)
            print(f"{kind} ({size:,} bytes on the wire): {outcome}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
