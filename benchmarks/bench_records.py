"""Record codec benchmark: kafkaio's RecordBatch v2 encode/decode against aiokafka's C codec.

Run ``python -m benchmarks.bench_records``; prints a markdown table of median ns per record.
Samples of kafkaio and aiokafka alternate, so load from other processes hits both alike.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from functools import partial

from kafkaio.records import COMPILED, BatchBuilder, Compression, iter_batches

RECORDS = 1000
SMALL_BATCH = 10  # records per batch in the many-small-batches case
KEY_SIZE = 8
VALUE_SIZE = 100
REPEATS = 9
TARGET_NS = 20_000_000  # aim for ~20 ms per sample

_WORDS = [b"alpha", b"beta", b"gamma", b"user", b"id", b"value", b"1234", b"true", b"null"]

Row = tuple[str, str, float, "float | None"]


def make_records() -> list[tuple[int, bytes, bytes]]:
    """Deterministic, compressible-ish records: (timestamp ms, 8-byte key, 100-byte value)."""
    rng = random.Random(42)
    out = []
    for i in range(RECORDS):
        value = b" ".join(rng.choice(_WORDS) for _ in range(25))[:VALUE_SIZE].ljust(VALUE_SIZE)
        out.append((1_700_000_000_000 + i, b"%08d" % i, value))
    return out


def _loops(fn: Callable[[], object]) -> int:
    fn()
    start = time.perf_counter_ns()
    fn()
    return max(1, TARGET_NS // max(time.perf_counter_ns() - start, 1))


def _sample(fn: Callable[[], object], loops: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(loops):
        fn()
    return (time.perf_counter_ns() - start) / loops / RECORDS


def median_ns_per_record(fn: Callable[[], object]) -> float:
    """Median over REPEATS of the time per record of ``fn`` (which handles RECORDS records)."""
    loops = _loops(fn)
    return statistics.median(_sample(fn, loops) for _ in range(REPEATS))


def paired_medians(
    ours: Callable[[], object], theirs: Callable[[], object] | None
) -> tuple[float, float | None]:
    """Medians of ns per record for two functions sampled alternately."""
    if theirs is None:
        return median_ns_per_record(ours), None
    loops_ours, loops_theirs = _loops(ours), _loops(theirs)
    a: list[float] = []
    b: list[float] = []
    for _ in range(REPEATS):
        a.append(_sample(ours, loops_ours))
        b.append(_sample(theirs, loops_theirs))
    return statistics.median(a), statistics.median(b)


def kafkaio_encode(
    records: list[tuple[int, bytes, bytes]], codec: Compression, per_batch: int = RECORDS
) -> bytes:
    out = []
    for first in range(0, len(records), per_batch):
        builder = BatchBuilder(compression=codec, batch_size=1 << 30)
        append = builder.append
        for ts, key, value in records[first : first + per_batch]:
            append(ts, key, value)
        out.append(builder.build(first))
    return b"".join(out)


def kafkaio_decode(raw: bytes) -> None:
    for batch in iter_batches(raw):
        for record in batch:
            record.key  # noqa: B018
            record.value  # noqa: B018


def kafkaio_decode_tuples(raw: bytes) -> None:
    for batch in iter_batches(raw):
        for _offset, _timestamp, _key, _value, _headers in batch.record_tuples():
            pass


def aiokafka_encode(
    records: list[tuple[int, bytes, bytes]], codec: Compression, per_batch: int = RECORDS
) -> bytes:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    out = []
    for first in range(0, len(records), per_batch):
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
        for offset, (ts, key, value) in enumerate(records[first : first + per_batch]):
            append(offset, timestamp=ts, key=key, value=value, headers=[])
        out.append(bytes(builder.build()))
    return b"".join(out)


def aiokafka_decode(raw: bytes) -> None:
    from aiokafka.record.memory_records import MemoryRecords

    records = MemoryRecords(raw)
    while (batch := records.next_batch()) is not None:
        if not batch.validate_crc():
            raise RuntimeError("aiokafka rejected the batch CRC")
        for record in batch:
            record.key  # noqa: B018
            record.value  # noqa: B018


def run() -> list[Row]:
    """Rows of (operation, compression, kafkaio ns/rec, aiokafka ns/rec or None)."""
    try:
        import aiokafka.record.default_records  # noqa: F401

        have_aiokafka = True
    except ImportError:
        have_aiokafka = False
    records = make_records()
    rows: list[Row] = []

    def add(op: str, codec: str, ours: Callable[[], object], theirs: Callable[[], object]) -> None:
        mine, other = paired_medians(ours, theirs if have_aiokafka else None)
        rows.append((op, codec, mine, other))

    for codec in (Compression.NONE, Compression.LZ4, Compression.ZSTD):
        name = codec.name.lower()
        raw = kafkaio_encode(records, codec)
        add(
            "encode",
            name,
            partial(kafkaio_encode, records, codec),
            partial(aiokafka_encode, records, codec),
        )
        add(
            "decode (iterate Records, touch key+value)",
            name,
            partial(kafkaio_decode, raw),
            partial(aiokafka_decode, raw),
        )
        add(
            "decode (`record_tuples()`, unpack all)",
            name,
            partial(kafkaio_decode_tuples, raw),
            partial(aiokafka_decode, raw),
        )
    small = kafkaio_encode(records, Compression.NONE, SMALL_BATCH)
    add(
        f"encode, {SMALL_BATCH} records/batch",
        "none",
        partial(kafkaio_encode, records, Compression.NONE, SMALL_BATCH),
        partial(aiokafka_encode, records, Compression.NONE, SMALL_BATCH),
    )
    add(
        f"decode Records, {SMALL_BATCH} records/batch",
        "none",
        partial(kafkaio_decode, small),
        partial(aiokafka_decode, small),
    )
    return rows


def main() -> None:
    rows = run()
    try:
        from aiokafka.record.default_records import DefaultRecordBatch

        aiokafka_impl = f"{DefaultRecordBatch.__module__}.{DefaultRecordBatch.__name__}"
    except ImportError:
        aiokafka_impl = "not installed"
    print(
        f"### Record codec: {RECORDS} records, {KEY_SIZE}-byte keys, {VALUE_SIZE}-byte "
        f"values, median of {REPEATS} alternating samples (ns/record)\n"
    )
    print(f"kafkaio codec: {'mypyc-compiled' if COMPILED else 'pure Python'}")
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
