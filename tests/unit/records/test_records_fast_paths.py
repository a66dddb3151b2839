"""The decoder's fast paths agree with the plain API: record_tuples() vs records(), and Record.

Hypothesis builds batches of every compression (with and without headers, null keys and
values, multi-byte varints) and both views of each batch must carry the same data.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaio.records import (
    BatchBuilder,
    Compression,
    LegacyRecordBatch,
    Record,
    RecordBatch,
    iter_batches,
)

# large values (three-byte length varints) drawn cheaply from a length
optional_bytes = (
    st.none()
    | st.binary(max_size=300)
    | st.integers(min_value=8_180, max_value=8_300).map(lambda n: bytes([n % 251]) * n)
)
headers_st = st.lists(
    st.tuples(st.text(max_size=20), st.none() | st.binary(max_size=40)), max_size=3
)
record_st = st.tuples(
    # timestamps far apart too: deltas of three or more varint bytes, and negative ones
    st.integers(min_value=0, max_value=2**42),
    optional_bytes,
    optional_bytes,
    st.none() | headers_st,
)


def build(records: list, codec: Compression, base_offset: int, **kwargs: object) -> bytes:  # type: ignore[type-arg]
    builder = BatchBuilder(compression=codec, batch_size=1 << 30, **kwargs)  # type: ignore[arg-type]
    for ts, key, value, headers in records:
        assert builder.append(ts, key, value, headers) is not None
    return builder.build(base_offset)


@settings(max_examples=80, deadline=None)
@given(
    records=st.lists(record_st, min_size=1, max_size=25),
    codec=st.sampled_from(list(Compression)),
    base_offset=st.integers(min_value=0, max_value=2**50),
    log_append_time=st.booleans(),
)
def test_record_tuples_equal_records(
    records: list,  # type: ignore[type-arg]
    codec: Compression,
    base_offset: int,
    log_append_time: bool,
) -> None:
    raw = build(records, codec, base_offset, timestamp_type=int(log_append_time))
    (batch,) = list(iter_batches(raw))
    assert isinstance(batch, RecordBatch)
    tuples = batch.record_tuples()
    objects = batch.records()
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in objects] == [
        (o, t, k, v, list(h)) for o, t, k, v, h in tuples
    ]
    max_ts = max(r[0] for r in records)
    assert [tuple(t[:4]) for t in tuples] == [
        (base_offset + i, max_ts if log_append_time else ts, key, value)
        for i, (ts, key, value, _) in enumerate(records)
    ]
    assert [list(t[4]) for t in tuples] == [list(r[3] or []) for r in records]


@settings(max_examples=30, deadline=None)
@given(timestamps=st.lists(st.integers(min_value=0, max_value=2**40), min_size=2, max_size=40))
def test_unordered_timestamps_and_wide_deltas(timestamps: list[int]) -> None:
    """Negative and multi-byte timestamp deltas take the decoder's slow varint path."""
    raw = build([(ts, b"k", b"v", None) for ts in timestamps], Compression.NONE, 0)
    (batch,) = list(iter_batches(raw))
    assert [r.timestamp for r in batch] == timestamps
    assert [t[1] for t in batch.record_tuples()] == timestamps


def test_many_records_use_multi_byte_offset_deltas() -> None:
    raw = build([(i, None, b"x" * (i % 300), None) for i in range(20_000)], Compression.LZ4, 7)
    (batch,) = list(iter_batches(raw))
    tuples = batch.record_tuples()
    assert [t[0] for t in tuples] == list(range(7, 20_007))
    assert [len(t[3] or b"") for t in tuples] == [i % 300 for i in range(20_000)]


def test_records_without_headers_share_nothing_mutable() -> None:
    raw = build([(1, b"a", b"1", None), (2, b"b", b"2", [("h", b"x")])], Compression.NONE, 0)
    (batch,) = list(iter_batches(raw))
    first, second = batch.records()
    assert first.headers == [] and second.headers == [("h", b"x")]
    first.headers.append(("added", None))  # a real list, kept on the record
    assert first.headers == [("added", None)]
    assert batch.records()[0].headers == []  # a fresh decode is unaffected
    no_headers, with_headers = batch.record_tuples()
    assert no_headers[4] == () and with_headers[4] == [("h", b"x")]


def test_record_value_semantics() -> None:
    raw = build([(5, b"k", b"v", None)], Compression.NONE, 3)
    (batch,) = list(iter_batches(raw))
    (record,) = batch.records()
    assert record == Record(3, 5, b"k", b"v", [])  # equality ignores the batch
    assert record == Record(3, 5, b"k", b"v", None)
    assert record != Record(3, 5, b"k", b"other", [])
    assert record != (3, 5, b"k", b"v", [])
    assert record.batch is batch and record.timestamp_type == 0 and record.leader_epoch == -1
    assert repr(batch).startswith("RecordBatch(base_offset=3, record_count=1, attributes=0x0,")
    assert repr(record) == "Record(offset=3, timestamp=5, key=b'k', value=b'v', headers=[])"
    with pytest.raises(TypeError):
        hash(record)
    record.headers = [("a", b"b")]
    record.value = b"changed"
    assert (record.headers, record.value) == ([("a", b"b")], b"changed")
    detached = Record(1, 2, None, None, [("x", None)])
    assert detached.batch is None and detached.timestamp_type == 0 and detached.leader_epoch == -1


def test_legacy_batches_offer_record_tuples() -> None:
    import struct
    import zlib

    key, value = b"k", b"legacy"
    body = struct.pack(">bbq", 1, 0, 1_234) + struct.pack(">i", len(key)) + key
    body += struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    blob = struct.pack(">qi", 42, len(message)) + message
    (batch,) = list(iter_batches(blob))
    assert isinstance(batch, LegacyRecordBatch)
    assert batch.record_tuples() == [(42, 1_234, key, value, [])]
    assert [(r.offset, r.value, r.headers) for r in batch] == [(42, value, [])]
