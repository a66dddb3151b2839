"""Record codec benchmark: kafkaio's RecordBatch v2 encode/decode against aiokafka's C codec.

Run ``python -m benchmarks.bench_records``; prints a markdown table of median ns per record.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable

from kafkaio.records import BatchBuilder, Compression, iter_batches

RECORDS = 1000
KEY_SIZE = 8
VALUE_SIZE = 100
REPEATS = 7
TARGET_NS = 40_000_000  # aim for ~40 ms per repeat

_WORDS = [b"alpha", b"beta", b"gamma", b"user", b"id", b"value", b"1234", b"true", b"null"]


def make_records() -> list[tuple[int, bytes, bytes]]:
    """Deterministic, compressible-ish records: (timestamp ms, 8-byte key, 100-byte value)."""
    rng = random.Random(42)
    out = []
    for i in range(RECORDS):
        value = b" ".join(rng.choice(_WORDS) for _ in range(25))[:VALUE_SIZE].ljust(VALUE_SIZE)
        out.append((1_700_000_000_000 + i, b"%08d" % i, value))
    return out


def median_ns_per_record(fn: Callable[[], object]) -> float:
    """Median over REPEATS of the time per record of ``fn`` (which handles RECORDS records)."""
    fn()
    start = time.perf_counter_ns()
    fn()
    once = max(time.perf_counter_ns() - start, 1)
    loops = max(1, TARGET_NS // once)
    samples = []
    for _ in range(REPEATS):
        start = time.perf_counter_ns()
        for _ in range(loops):
            fn()
        samples.append((time.perf_counter_ns() - start) / loops / RECORDS)
    return statistics.median(samples)


def kafkaio_encode(records: list[tuple[int, bytes, bytes]], codec: Compression) -> bytes:
    builder = BatchBuilder(compression=codec, batch_size=1 << 30)
    append = builder.append
    for ts, key, value in records:
        append(ts, key, value)
    return builder.build(0)


def kafkaio_decode(raw: bytes) -> None:
    for batch in iter_batches(raw):
        for record in batch:
            record.key  # noqa: B018
            record.value  # noqa: B018


def aiokafka_encode(records: list[tuple[int, bytes, bytes]], codec: Compression) -> bytes:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    append = builder.append
    for offset, (ts, key, value) in enumerate(records):
        append(offset, timestamp=ts, key=key, value=value, headers=[])
    return bytes(builder.build())


def aiokafka_decode(raw: bytes) -> None:
    from aiokafka.record.default_records import DefaultRecordBatch

    batch = DefaultRecordBatch(raw)
    if not batch.validate_crc():
        raise RuntimeError("aiokafka rejected the batch CRC")
    for record in batch:
        record.key  # noqa: B018
        record.value  # noqa: B018


def run() -> list[tuple[str, str, float, float | None]]:
    """Rows of (operation, compression, kafkaio ns/rec, aiokafka ns/rec or None)."""
    try:
        import aiokafka.record.default_records as aiokafka_records
    except ImportError:
        aiokafka_records = None
    records = make_records()
    rows: list[tuple[str, str, float, float | None]] = []
    for codec in (Compression.NONE, Compression.LZ4, Compression.ZSTD):
        raw = kafkaio_encode(records, codec)
        ours = median_ns_per_record(lambda c=codec: kafkaio_encode(records, c))
        theirs = (
            median_ns_per_record(lambda c=codec: aiokafka_encode(records, c))
            if aiokafka_records
            else None
        )
        rows.append(("encode", codec.name.lower(), ours, theirs))
        ours = median_ns_per_record(lambda r=raw: kafkaio_decode(r))
        theirs = (
            median_ns_per_record(lambda r=raw: aiokafka_decode(r)) if aiokafka_records else None
        )
        rows.append(("decode (iterate, touch key+value)", codec.name.lower(), ours, theirs))
    return rows


def main() -> None:
    rows = run()
    try:
        from aiokafka.record.default_records import DefaultRecordBatch

        aiokafka_impl = f"{DefaultRecordBatch.__module__}.{DefaultRecordBatch.__name__}"
    except ImportError:
        aiokafka_impl = "not installed"
    print(
        f"### Record codec: {RECORDS} records/batch, {KEY_SIZE}-byte keys, "
        f"{VALUE_SIZE}-byte values, median of {REPEATS} (ns/record)\n"
    )
    print(f"aiokafka implementation: `{aiokafka_impl}` (decode includes its CRC check)\n")
    print("| operation | compression | kafkaio | aiokafka | kafkaio/aiokafka |")
    print("|---|---|---:|---:|---:|")
    for op, codec, ours, theirs in rows:
        if theirs is None:
            print(f"| {op} | {codec} | {ours:,.0f} | n/a | n/a |")
        else:
            print(f"| {op} | {codec} | {ours:,.0f} | {theirs:,.0f} | {ours / theirs:.2f}x |")


if __name__ == "__main__":
    main()
