"""FetchBuffer + FetchCollector: lazy hand-out, positions advance only on hand-out, pause,
seek and unassignment, read_committed filtering of aborted transactions, corrupt data and
deserializers that raise (the records before the bad one are handed out, none is lost)."""

from __future__ import annotations

import gc
import struct
import tracemalloc
from collections.abc import Callable

import pytest
from crc32c import crc32c

from kafkaio.consumer.fetch_buffer import DECODE_CHUNK, CompletedFetch
from kafkaio.errors import CorruptRecordError, RecordDeserializationError
from kafkaio.records import BatchBuilder, Compression
from kafkaio.records.record import ControlRecordType

from .fakes import batch, control_batch, make_rig, tp, values


def _rig_with(
    blob: bytes, *, position: int = 0, aborted: list[tuple[int, int]] | None = None, **kw: object
):  # type: ignore[no-untyped-def]
    rig = make_rig(**kw)
    rig.subscriptions.assign_from_user([tp(0), tp(1)])
    rig.subscriptions.seek(tp(0), position)
    rig.subscriptions.seek(tp(1), 0)
    rig.buffer.add(CompletedFetch(tp(0), position, blob, aborted))
    return rig


def test_position_advances_only_when_records_are_handed_out() -> None:
    rig = _rig_with(batch(0, values(0, 5)) + batch(5, values(5, 5)))
    assert rig.subscriptions.position(tp(0)).offset == 0
    first = rig.collector.collect(max_records=3)[tp(0)]
    assert [r.offset for r in first] == [0, 1, 2]
    assert rig.subscriptions.position(tp(0)).offset == 3
    rest = rig.collector.collect(max_records=100)[tp(0)]
    assert [r.offset for r in rest] == list(range(3, 10))
    assert [r.value for r in rest] == values(3, 7)
    assert rig.subscriptions.position(tp(0)).offset == 10
    assert len(rig.buffer) == 0 and rig.buffer.buffered_bytes == 0
    assert rig.collector.collect() == {}


def test_record_fields() -> None:
    rig = _rig_with(batch(0, [b"abc"], timestamp=77))
    (record,) = rig.collector.collect()[tp(0)]
    assert (record.topic, record.partition, record.offset) == ("t", 0, 0)
    assert (record.timestamp, record.timestamp_type) == (77, 0)
    assert (record.key, record.value, list(record.headers)) == (b"k0", b"abc", [])
    assert (record.serialized_key_size, record.serialized_value_size) == (2, 3)


def test_deserializers_apply() -> None:
    rig = _rig_with(
        batch(0, [b"1", b"2"]),
        key_deserializer=lambda b: b.decode().upper(),
        value_deserializer=lambda b: int(b) * 10,
    )
    records = rig.collector.collect()[tp(0)]
    assert [(r.key, r.value) for r in records] == [("K0", 10), ("K1", 20)]


def test_records_below_the_position_are_skipped() -> None:
    # a compressed batch starting before the fetch offset is returned whole by the broker
    blob = batch(0, values(0, 10), compression=Compression.LZ4)
    rig = _rig_with(blob, position=6)
    records = rig.collector.collect()[tp(0)]
    assert [r.offset for r in records] == [6, 7, 8, 9]
    assert rig.subscriptions.position(tp(0)).offset == 10


def test_paused_partition_keeps_data_and_position() -> None:
    rig = _rig_with(batch(0, values(0, 4)))
    rig.subscriptions.pause([tp(0)])
    assert rig.collector.collect() == {}
    assert rig.buffer.has_data(tp(0))
    assert rig.subscriptions.position(tp(0)).offset == 0
    rig.subscriptions.resume([tp(0)])
    assert [r.offset for r in rig.collector.collect()[tp(0)]] == [0, 1, 2, 3]


def test_a_partition_being_revoked_hands_out_nothing_more() -> None:
    """Between the revocation callback (which committed what was handed out) and the
    membership's acknowledgement, buffered records of a revoked partition stay where they
    are, as Java's FetchCollector skips partitions pending revocation: handed out, they
    would be consumed again by the partition's next owner."""
    rig = _rig_with(batch(0, values(0, 4)))
    rig.subscriptions.mark_pending_revocation([tp(0)])
    assert rig.collector.collect() == {}
    assert rig.subscriptions.position(tp(0)).offset == 0


def test_seek_drops_buffered_data() -> None:
    rig = _rig_with(batch(0, values(0, 4)))
    rig.collector.collect(max_records=1)
    rig.subscriptions.seek(tp(0), 100)
    assert rig.collector.collect() == {}
    assert not rig.buffer.has_data(tp(0))
    assert rig.subscriptions.position(tp(0)).offset == 100


def test_unassigned_partition_data_is_dropped() -> None:
    rig = _rig_with(batch(0, values(0, 4)))
    rig.subscriptions.assign_from_user([tp(1)])
    assert rig.collector.collect() == {}
    assert len(rig.buffer) == 0


def test_max_records_and_partition_filter_across_partitions() -> None:
    rig = _rig_with(batch(0, values(0, 3)))
    rig.buffer.add(CompletedFetch(tp(1), 0, batch(0, values(100, 3))))
    only_one = rig.collector.collect(partitions={tp(1)})
    assert list(only_one) == [tp(1)]
    rig.buffer.add(CompletedFetch(tp(1), 3, batch(3, values(103, 3))))
    both = rig.collector.collect(max_records=4)
    assert sum(len(v) for v in both.values()) == 4
    assert (
        rig.subscriptions.position(tp(0)).offset + rig.subscriptions.position(tp(1)).offset == 3 + 4
    )


def _transactional_log() -> tuple[bytes, list[tuple[int, int]]]:
    """offsets 0-1 committed txn (pid 7) + marker 2; 3-4 aborted txn (pid 8) + marker 5;
    6 plain record; 7-8 committed txn (pid 8 again) + marker 9."""
    blob = (
        batch(0, [b"c0", b"c1"], producer_id=7, transactional=True)
        + control_batch(2, 7, ControlRecordType.COMMIT)
        + batch(3, [b"a0", b"a1"], producer_id=8, transactional=True)
        + control_batch(5, 8, ControlRecordType.ABORT)
        + batch(6, [b"plain"])
        + batch(7, [b"c2", b"c3"], producer_id=8, transactional=True)
        + control_batch(9, 8, ControlRecordType.COMMIT)
    )
    return blob, [(8, 3)]


def test_read_committed_skips_aborted_transactions_and_markers() -> None:
    blob, aborted = _transactional_log()
    rig = _rig_with(blob, aborted=aborted, isolation_level="read_committed")
    records = rig.collector.collect()[tp(0)]
    assert [(r.offset, r.value) for r in records] == [
        (0, b"c0"),
        (1, b"c1"),
        (6, b"plain"),
        (7, b"c2"),
        (8, b"c3"),
    ]
    assert rig.subscriptions.position(tp(0)).offset == 10  # past the last marker


def test_read_uncommitted_returns_aborted_records_but_not_markers() -> None:
    blob, aborted = _transactional_log()
    rig = _rig_with(blob, aborted=aborted)
    records = rig.collector.collect()[tp(0)]
    assert [r.offset for r in records] == [0, 1, 3, 4, 6, 7, 8]
    assert rig.subscriptions.position(tp(0)).offset == 10


def test_fetch_of_only_markers_advances_position_without_records() -> None:
    rig = _rig_with(
        control_batch(4, 7, ControlRecordType.COMMIT), position=4, isolation_level="read_committed"
    )
    assert rig.collector.collect() == {}
    assert rig.subscriptions.position(tp(0)).offset == 5


def test_corrupt_batch_raises_and_keeps_position() -> None:
    good = batch(0, values(0, 2))
    bad = bytearray(batch(2, values(2, 2)))
    bad[-1] ^= 0xFF
    rig = _rig_with(good + bytes(bad))
    assert [r.offset for r in rig.collector.collect(max_records=2)[tp(0)]] == [0, 1]
    with pytest.raises(CorruptRecordError) as info:
        rig.collector.collect()
    assert (info.value.partition, info.value.offset) == (0, 2)
    assert rig.subscriptions.position(tp(0)).offset == 2
    assert not rig.buffer.has_data(tp(0))  # refetched next time; the error repeats until seek


def test_a_corrupt_batch_after_good_ones_in_one_take_hands_the_good_ones_out_first() -> None:
    good = batch(0, values(0, 2))
    bad = bytearray(batch(2, values(2, 2)))
    bad[-1] ^= 0xFF
    rig = _rig_with(good + bytes(bad))
    assert [r.offset for r in rig.collector.collect()[tp(0)]] == [0, 1]
    assert rig.subscriptions.position(tp(0)).offset == 2
    assert not rig.buffer.has_data(tp(0))  # the refetch from offset 2 starts at the bad batch


def _strict(data: bytes | None) -> str:
    assert data is not None
    if data.startswith(b"bad"):
        raise ValueError(f"cannot decode {data!r}")
    return data.decode()


def test_a_failing_value_deserializer_hands_out_the_records_before_it_then_raises() -> None:
    rig = _rig_with(
        batch(0, [b"a", b"b"]) + batch(2, [b"c", b"bad", b"d"]), value_deserializer=_strict
    )
    assert [r.value for r in rig.collector.collect()[tp(0)]] == ["a", "b", "c"]
    assert rig.subscriptions.position(tp(0)).offset == 3
    for _ in range(2):  # the error repeats: the position stays at the bad record
        with pytest.raises(RecordDeserializationError) as info:
            rig.collector.collect()
        error = info.value
        assert (error.topic, error.partition, error.offset, error.part) == ("t", 0, 3, "value")
        assert isinstance(error.__cause__, ValueError)
        assert "offset 3" in str(error) and "seek to offset 4" in str(error)
        assert rig.subscriptions.position(tp(0)).offset == 3
    rig.subscriptions.seek(tp(0), 4)  # skipping it drops the buffered fetch: refetched
    assert rig.collector.collect() == {}


def test_a_failing_key_deserializer_is_named_and_the_first_record_raises_at_once() -> None:
    rig = _rig_with(batch(0, [b"v"]), key_deserializer=lambda b: _strict(b"bad" + b))
    with pytest.raises(RecordDeserializationError) as info:
        rig.collector.collect()
    assert (info.value.offset, info.value.part) == (0, "key")
    assert rig.subscriptions.position(tp(0)).offset == 0


def test_a_bad_record_in_one_partition_loses_none_taken_from_another() -> None:
    rig = _rig_with(batch(0, values(0, 3)), value_deserializer=_strict)
    rig.buffer.add(CompletedFetch(tp(1), 0, batch(0, [b"bad"])))
    first = rig.collector.collect()
    assert {p: [r.offset for r in rs] for p, rs in first.items()} == {tp(0): [0, 1, 2]}
    assert rig.subscriptions.position(tp(0)).offset == 3
    with pytest.raises(RecordDeserializationError) as info:
        rig.collector.collect()
    assert (info.value.partition, info.value.offset) == (1, 0)
    assert rig.subscriptions.position(tp(1)).offset == 0


def test_next_offset_after_reads_batch_headers_and_ignores_a_partial_tail() -> None:
    from kafkaio.consumer.fetch_buffer import next_offset_after

    blob = batch(5, values(5, 3)) + batch(8, values(8, 2))
    assert next_offset_after(blob) == 10
    assert next_offset_after(blob + batch(10, values(10, 4))[:-3]) == 10  # cut last batch
    assert next_offset_after(batch(0, values(0, 1))[:20]) is None
    assert next_offset_after(b"") is None


def test_queued_fetches_of_a_partition_are_handed_out_in_order() -> None:
    rig = _rig_with(batch(0, values(0, 3)))
    rig.buffer.add(CompletedFetch(tp(0), 3, batch(3, values(3, 2))))
    assert len(rig.buffer) == 2 and rig.buffer.next_offset(tp(0)) == 5
    first = rig.collector.collect(max_records=4)
    assert [r.offset for r in first[tp(0)]] == [0, 1, 2, 3]
    assert len(rig.buffer) == 1
    rest = rig.collector.collect()
    assert [r.offset for r in rest[tp(0)]] == [4]
    assert rig.subscriptions.position(tp(0)).offset == 5
    assert len(rig.buffer) == 0 and rig.buffer.bytes_for(tp(0)) == 0


def _tiny_records_batch(count: int) -> bytes:
    """One zstd batch of `count` records with no key, an empty value and no headers (the
    smallest records there are): a few KiB on the wire for megabytes of records."""
    builder = BatchBuilder(compression=Compression.ZSTD, batch_size=1 << 30)
    for _ in range(count):
        builder.append(1_000, None, b"")
    return builder.build(0)


def _peak_bytes(call: Callable[[], object]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_batch_of_millions_of_tiny_records_is_decoded_as_records_are_taken() -> None:
    # a compressed batch of many tiny records: decoding it at once made an object per
    # record (9.6 million, 1.2 GB, from a 6 KB batch of 64 MiB); a take decodes only what
    # it hands out (the decompressed bytes, a few MiB here, are all it keeps)
    count = 300_000
    blob = _tiny_records_batch(count)
    assert len(blob) < count  # under a byte per record on the wire
    rig = _rig_with(blob)
    taken: list[int] = []
    peak = _peak_bytes(lambda: taken.extend(r.offset for r in rig.collector.collect(500)[tp(0)]))
    assert taken == list(range(500))
    assert peak < 8 * 1024 * 1024  # eager: 300,000 tuples and their ints, well over 30 MiB
    fetch = rig.buffer.get(tp(0))
    assert fetch is not None and len(fetch._current) <= 500
    # every record still comes out, in order, and the position follows
    seen = 500
    while True:
        batch_out = rig.collector.collect(50_000).get(tp(0), [])
        if not batch_out:
            break
        assert batch_out[0].offset == seen and batch_out[-1].offset == seen + len(batch_out) - 1
        seen += len(batch_out)
    assert seen == count
    assert rig.subscriptions.position(tp(0)).offset == count


def test_an_unbounded_collect_takes_per_fetch_what_its_bytes_could_hold() -> None:
    # max_poll_records=None: "whatever is buffered", but a fetch gives at most as many
    # records per call as its bytes could hold uncompressed (not the 300,000 it expands to)
    blob = _tiny_records_batch(300_000)
    rig = _rig_with(blob)
    fetch = rig.buffer.get(tp(0))
    assert fetch is not None
    first = rig.collector.collect(None)[tp(0)]
    assert len(first) == fetch.record_budget == max(len(blob) // 7, DECODE_CHUNK) < 300_000
    # uncompressed data of ordinary records comes out whole, as before
    plain = _rig_with(batch(0, values(0, 5000)))
    assert len(plain.collector.collect(None)[tp(0)]) == 5000


def test_a_corrupt_record_late_in_a_batch_hands_out_those_before_it() -> None:
    # decoding is lazy, so a batch whose record 3000 is corrupt hands out 0..2999 first and
    # raises CorruptRecordError at the bad one (as Java's consumer does)
    raw = bytearray(batch(0, [b"%05d" % i for i in range(4000)]))
    bad = raw.index(b"k3000")  # the key's bytes: its length varint is the byte before
    raw[bad - 1] = 0x7E  # key length 63: runs into the following records
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    rig = _rig_with(bytes(raw))
    got = rig.collector.collect(10_000)[tp(0)]
    assert [r.offset for r in got] == list(range(3000))
    assert rig.subscriptions.position(tp(0)).offset == 3000
    assert len(rig.buffer) == 0  # the rest of the fetch is dropped: it is fetched again
    rig.buffer.add(CompletedFetch(tp(0), 3000, bytes(raw)))  # ... and the batch comes back
    with pytest.raises(CorruptRecordError, match="offset=0"):
        rig.collector.collect(10_000)
    assert rig.subscriptions.position(tp(0)).offset == 3000


def test_used_bytes_count_fetches_used_up_not_dropped_ones() -> None:
    # bytes-consumed-total reads used_bytes: before, the consumer counted the buffer's
    # shrinking during polls that returned records, so a fetch used up by a later poll
    # that returned none (the usual end of a partition) was never counted
    blob = batch(0, values(0, 3))
    rig = _rig_with(blob)
    assert rig.buffer.used_bytes == 0
    assert len(rig.collector.collect()[tp(0)]) == 3
    assert rig.collector.collect() == {}
    assert len(rig.buffer) == 0 and rig.buffer.used_bytes == len(blob)
    rig.buffer.add(CompletedFetch(tp(0), 3, batch(3, values(3, 2))))
    rig.subscriptions.seek(tp(0), 100)  # the buffered fetch is stale: dropped, not used
    assert rig.collector.collect() == {}
    assert len(rig.buffer) == 0 and rig.buffer.used_bytes == len(blob)
