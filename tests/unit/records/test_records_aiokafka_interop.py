"""Cross-checks against aiokafka's independent codec, in both directions and every format.

Batches kafkaio builds must decode in aiokafka; batches (v2) and message sets (v0/v1, plain
and compressed) that aiokafka builds must decode in kafkaio.
"""

from __future__ import annotations

import struct

import pytest

pytest.importorskip("aiokafka", reason="aiokafka (the codec oracle) is not installed")

from aiokafka.record.default_records import (  # noqa: E402
    DefaultRecordBatch,
    DefaultRecordBatchBuilder,
)
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder  # noqa: E402
from aiokafka.record.memory_records import MemoryRecords  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kafkaio.errors import CorruptRecordError  # noqa: E402
from kafkaio.records import BatchBuilder, Compression, LegacyRecordBatch, iter_batches  # noqa: E402

optional_bytes = st.none() | st.binary(max_size=200)
records_st = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=2**41),
        optional_bytes,
        optional_bytes,
        st.lists(st.tuples(st.text(max_size=10), optional_bytes), max_size=3),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=60, deadline=None)
@given(records=records_st, codec=st.sampled_from(list(Compression)))
def test_kafkaio_batches_decode_in_aiokafka(records: list, codec: Compression) -> None:  # type: ignore[type-arg]
    builder = BatchBuilder(compression=codec, producer_id=9, producer_epoch=1, base_sequence=4)
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers)
    raw = builder.build(base_offset=1_000)
    theirs = DefaultRecordBatch(raw)
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (9, 1, 4)
    assert theirs.max_timestamp == max(r[0] for r in records)
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs]
    assert got == [
        (1_000 + i, ts, key, value, headers) for i, (ts, key, value, headers) in enumerate(records)
    ]


@settings(max_examples=60, deadline=None)
@given(records=records_st, codec=st.sampled_from(list(Compression)))
def test_aiokafka_batches_decode_in_kafkaio(records: list, codec: Compression) -> None:  # type: ignore[type-arg]
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=1,
        producer_id=77,
        producer_epoch=3,
        base_sequence=10,
        batch_size=1 << 30,
    )
    for offset, (ts, key, value, headers) in enumerate(records):
        builder.append(offset, timestamp=ts, key=key, value=value, headers=headers)
    raw = bytes(builder.build())
    (batch,) = list(iter_batches(raw + raw[:20]))
    assert batch.compression is codec and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 3, 10)
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch]
    assert got == [(i, ts, key, value, h) for i, (ts, key, value, h) in enumerate(records)]


def legacy_message_set(
    magic: int, codec: Compression, values: list[bytes | None], base_offset: int = 0
) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 30)
    # Like real producers: inner offsets of a magic 1 wrapper are relative (0..n-1) and the
    # broker stamps the wrapper with the last absolute offset; magic 0 offsets are absolute.
    relative = magic == 1 and codec != Compression.NONE
    for i, value in enumerate(values):
        offset = i if relative else base_offset + i
        builder.append(offset, timestamp=1_600_000_000_000 + i, key=b"k%d" % i, value=value)
    raw = bytearray(builder.build())
    if relative:
        struct.pack_into(">q", raw, 0, base_offset + len(values) - 1)
    return bytes(raw)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize(
    "codec", [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]
)
def test_aiokafka_legacy_message_sets_decode(magic: int, codec: Compression) -> None:
    if magic == 0 and codec == Compression.LZ4:
        pytest.skip("magic 0 LZ4 uses Kafka 0.8's broken frame checksum; not supported")
    values = [b"value-%d" % i * 5 for i in range(5)] + [None]
    raw = legacy_message_set(magic, codec, values, base_offset=500)
    batches = list(iter_batches(raw, topic="old", partition=0))
    assert all(isinstance(b, LegacyRecordBatch) and b.magic == magic for b in batches)
    assert len(batches) == (len(values) if codec == Compression.NONE else 1)
    assert all(b.compression is codec for b in batches)
    records = [r for b in batches for r in b]
    assert [r.offset for r in records] == list(range(500, 506))
    assert [r.value for r in records] == values
    assert [r.key for r in records] == [b"k%d" % i for i in range(6)]
    expected_ts = [1_600_000_000_000 + i for i in range(6)] if magic else [-1] * 6
    assert [r.timestamp for r in records] == expected_ts
    assert batches[0].base_offset == 500 and batches[-1].last_offset == 505
    # aiokafka's own reader agrees
    theirs = MemoryRecords(raw)
    their_values = []
    while (batch := theirs.next_batch()) is not None:
        their_values.extend(r.value for r in batch)
    assert their_values == values


def test_legacy_crc_mismatch_names_location() -> None:
    raw = bytearray(legacy_message_set(1, Compression.NONE, [b"a", b"b"], base_offset=10))
    raw[-1] ^= 0xFF  # last byte of the second message's value
    batches = iter_batches(bytes(raw), topic="old", partition=2)
    assert [r.value for r in next(batches)] == [b"a"]
    with pytest.raises(CorruptRecordError, match="CRC-32") as info:
        next(batches)
    assert (info.value.topic, info.value.partition, info.value.offset) == ("old", 2, 11)


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_truncation_at_every_cut_point(magic: int) -> None:
    raw = legacy_message_set(magic, Compression.GZIP, [b"x" * 50, b"y" * 50])
    raw += legacy_message_set(magic, Compression.NONE, [b"z"], base_offset=2)
    for cut in range(len(raw) + 1):
        values = [r.value for b in iter_batches(raw[:cut]) for r in b]
        assert values in ([], [b"x" * 50, b"y" * 50], [b"x" * 50, b"y" * 50, b"z"])
    assert len([r for b in iter_batches(raw) for r in b]) == 3


def test_mixed_legacy_and_v2_blob() -> None:
    legacy = legacy_message_set(1, Compression.NONE, [b"old"], base_offset=0)
    builder = BatchBuilder()
    builder.append(5, None, b"new")
    blob = legacy + builder.build(base_offset=1)
    assert [(r.offset, r.value) for b in iter_batches(blob) for r in b] == [
        (0, b"old"),
        (1, b"new"),
    ]


@settings(max_examples=200, deadline=None)
@given(garbage=st.binary(min_size=8, max_size=200), magic=st.sampled_from([0, 1]))
def test_legacy_garbage_raises_only_kafkaio_errors(garbage: bytes, magic: int) -> None:
    body = struct.pack(">I", 0) + bytes([magic]) + garbage
    blob = struct.pack(">qi", 0, len(body)) + body
    try:
        list(iter_batches(blob, verify_crc=False))
    except CorruptRecordError:
        pass
