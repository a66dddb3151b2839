"""RecordBatch v2: builder behaviour and encode -> decode round trips."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaio.errors import KafkaConfigError, KafkaError
from kafkaio.records import (
    BatchBuilder,
    Compression,
    ControlRecordType,
    RecordBatch,
    iter_batches,
    parse_control_record,
)

optional_bytes = st.none() | st.binary(max_size=300)
headers_st = st.lists(st.tuples(st.text(max_size=20), optional_bytes), max_size=4)
record_st = st.tuples(
    st.integers(min_value=0, max_value=2**42),  # timestamp ms
    optional_bytes,
    optional_bytes,
    headers_st,
)


def build(records: list[tuple[int, bytes | None, bytes | None, list]], **kwargs) -> bytes:  # type: ignore[type-arg]
    base_offset = kwargs.pop("base_offset", 0)
    builder = BatchBuilder(batch_size=1 << 30, **kwargs)
    for ts, key, value, headers in records:
        assert builder.append(ts, key, value, headers) is not None
    return builder.build(base_offset=base_offset)


def only_batch(raw: bytes) -> RecordBatch:
    batches = list(iter_batches(raw))
    assert len(batches) == 1
    batch = batches[0]
    assert isinstance(batch, RecordBatch)
    return batch


@settings(max_examples=120, deadline=None)
@given(
    records=st.lists(record_st, min_size=1, max_size=30),
    codec=st.sampled_from(list(Compression)),
    base_offset=st.integers(min_value=0, max_value=2**40),
)
def test_round_trip(records: list, codec: Compression, base_offset: int) -> None:  # type: ignore[type-arg]
    builder = BatchBuilder(compression=codec, batch_size=1 << 30)
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers)
    raw = builder.build(base_offset)
    batch = only_batch(raw)
    assert batch.compression is codec
    assert batch.record_count == len(records)
    assert batch.base_offset == base_offset
    assert batch.last_offset == base_offset + len(records) - 1
    assert batch.first_timestamp == records[0][0]
    assert batch.max_timestamp == max(r[0] for r in records)
    assert batch.size_in_bytes == len(raw)
    decoded = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch]
    expected = [
        (base_offset + i, ts, key, value, list(headers))
        for i, (ts, key, value, headers) in enumerate(records)
    ]
    assert decoded == expected


@settings(max_examples=30, deadline=None)
@given(batches=st.lists(st.lists(record_st, min_size=1, max_size=5), min_size=1, max_size=5))
def test_several_batches_in_one_blob(batches: list) -> None:  # type: ignore[type-arg]
    blob = b""
    offset = 0
    for records in batches:
        blob += build(records, base_offset=offset)
        offset += len(records)
    got = [r.offset for batch in iter_batches(blob) for r in batch]
    assert got == list(range(offset))
    # memoryview and bytearray inputs decode the same
    assert [r.value for b in iter_batches(memoryview(blob)) for r in b] == [
        r[2] for records in batches for r in records
    ]
    assert [r.key for b in iter_batches(bytearray(blob)) for r in b] == [
        r[1] for records in batches for r in records
    ]


def test_batch_header_fields() -> None:
    builder = BatchBuilder(
        compression="zstd",
        is_transactional=True,
        producer_id=1234,
        producer_epoch=7,
        base_sequence=99,
    )
    builder.append(1_000, b"k", b"v")
    builder.append(900, b"k", b"v")  # timestamps need not be monotonic
    builder.append(1_500, None, None)
    batch = only_batch(builder.build(base_offset=50))
    assert batch.magic == 2
    assert batch.is_transactional and not batch.is_control
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (1234, 7, 99)
    assert batch.partition_leader_epoch == -1
    assert batch.timestamp_type == 0
    assert (batch.first_timestamp, batch.max_timestamp) == (1_000, 1_500)
    assert [r.timestamp for r in batch] == [1_000, 900, 1_500]
    assert batch.last_offset == 52 and batch.next_offset == 53


def test_set_producer_state_before_build() -> None:
    builder = BatchBuilder()
    builder.append(1, b"k", b"v")
    builder.set_producer_state(producer_id=5, producer_epoch=2, base_sequence=40)
    batch = only_batch(builder.build())
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (5, 2, 40)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_building_again_reuses_the_compressed_records(codec: str) -> None:
    """A rebuild with new producer state (a sequence assigned at send time) or after more
    appends gives the same bytes as a fresh builder would."""

    def fresh(count: int, state: tuple[int, int, int]) -> bytes:
        b = BatchBuilder(compression=codec)
        for i in range(count):
            b.append(100 + i, b"k%d" % i, b"value %d " % i * 20)
        b.set_producer_state(*state)
        return b.build()

    builder = BatchBuilder(compression=codec)
    for i in range(10):
        builder.append(100 + i, b"k%d" % i, b"value %d " % i * 20)
    assert builder.build() == fresh(10, (-1, -1, -1))
    builder.set_producer_state(7, 1, 300)
    again = builder.build()
    assert again == fresh(10, (7, 1, 300))
    assert [r.value for r in only_batch(again)] == [b"value %d " % i * 20 for i in range(10)]
    builder.append(110, b"k10", b"value 10 " * 20)  # appending drops the kept records
    assert builder.build() == fresh(11, (7, 1, 300))


def test_log_append_time_uses_max_timestamp() -> None:
    builder = BatchBuilder(timestamp_type=1)
    builder.append(10, b"a", b"1")
    builder.append(30, b"b", b"2")
    builder.append(20, b"c", b"3")
    batch = only_batch(builder.build())
    assert batch.timestamp_type == 1
    records = list(batch)
    assert [r.timestamp for r in records] == [30, 30, 30]
    assert all(r.timestamp_type == 1 for r in records)
    assert records[0].leader_epoch == -1


def test_append_returns_none_when_full_but_first_record_always_fits() -> None:
    builder = BatchBuilder(batch_size=200)
    big = b"x" * 1000
    size = builder.append(1, None, big)
    assert size is not None and size > 1000
    assert builder.append(2, None, b"y") is None
    assert builder.record_count == 1

    builder = BatchBuilder(batch_size=300)
    sizes = []
    while (size := builder.append(1, b"key", b"v" * 20)) is not None:
        sizes.append(size)
    assert builder.size_in_bytes() <= 300
    assert builder.size_in_bytes() == 61 + sum(sizes)
    raw = builder.build()
    assert len(raw) == builder.size_in_bytes()
    assert only_batch(raw).record_count == len(sizes) == builder.record_count


def test_estimate_size_is_an_upper_bound() -> None:
    headers = [("trace", b"abc"), ("empty", None)]
    estimate = BatchBuilder.estimate_size_in_bytes(b"key", b"v" * 500, headers)
    builder = BatchBuilder()
    builder.append(2**40, b"key", b"v" * 500, headers)
    assert builder.size_in_bytes() <= estimate < builder.size_in_bytes() + 64


def test_builder_rejects_bad_config_and_empty_build() -> None:
    with pytest.raises(KafkaConfigError, match="magic"):
        BatchBuilder(magic=1)
    with pytest.raises(KafkaConfigError):
        BatchBuilder(compression="brotli")
    with pytest.raises(KafkaError, match="empty"):
        BatchBuilder().build()


def test_build_can_repeat_with_another_base_offset() -> None:
    builder = BatchBuilder(compression=Compression.LZ4)
    builder.append(1, b"k", b"v")
    first = only_batch(builder.build(0))
    second = only_batch(builder.build(10))
    assert [r.offset for r in first] == [0]
    assert [r.offset for r in second] == [10]


def make_control_batch(marker: ControlRecordType, base_offset: int = 7) -> bytes:
    """A transaction marker batch: control bit set, key = (version 0, type)."""
    builder = BatchBuilder(is_transactional=True, producer_id=3, producer_epoch=1)
    builder.append(5, struct.pack(">hh", 0, marker), struct.pack(">hi", 0, 12))
    raw = bytearray(builder.build(base_offset))
    attributes = struct.unpack_from(">h", raw, 21)[0] | 0x20
    struct.pack_into(">h", raw, 21, attributes)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    return bytes(raw)


@pytest.mark.parametrize("marker", list(ControlRecordType))
def test_control_batch_and_marker(marker: ControlRecordType) -> None:
    batch = only_batch(make_control_batch(marker))
    assert batch.is_control and batch.is_transactional
    (record,) = list(batch)
    control = parse_control_record(record.key)
    assert control.version == 0
    assert control.type == marker
    assert control.is_commit == (marker == ControlRecordType.COMMIT)
    assert control.is_abort == (marker == ControlRecordType.ABORT)


@pytest.mark.parametrize("key", [None, b"", b"\x00\x00\x01"])
def test_malformed_control_key(key: bytes | None) -> None:
    with pytest.raises(KafkaError, match="control record key"):
        parse_control_record(key)
