"""Hostile record data: headers that lie about sizes, lengths past 2**63, and the compiled and
pure-Python decoders fed the same mutated batches (they must agree, error messages included).

Decompression is bounded by what a codec really produces, whatever its headers claim: the
peak of traced allocations stays near ``max_size`` for a frame that expands far past it.
"""

from __future__ import annotations

import gc
import importlib.util
import struct
import sys
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import cramjam
import lz4.frame
import pytest
import zstandard
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafkaio.records.batch
from benchmarks.bench_hostile import xxh32_short
from kafkaio.errors import CorruptRecordError
from kafkaio.records import COMPILED, Compression, compress, decompress, iter_batches
from kafkaio.records.varint import encode_uvarint, encode_varint

MAX = 2 << 20  # max_size of these tests
BOMB = 64 << 20  # what the hostile frames really expand to


def lz4_claiming(claim: int, real: int = BOMB) -> bytes:
    """An lz4 frame whose content size field says `claim` bytes and whose blocks hold `real`."""
    frame = bytearray(
        lz4.frame.compress(
            bytes(real),
            block_size=lz4.frame.BLOCKSIZE_MAX4MB,
            store_size=True,
            content_checksum=False,
        )
    )
    assert frame[4] & 0x08  # content size present, at bytes 6..13; header checksum at 14
    struct.pack_into("<Q", frame, 6, claim)
    frame[14] = (xxh32_short(bytes(frame[4:14])) >> 8) & 0xFF
    return bytes(frame)


def zstd_claiming(claim: int, real: int = BOMB) -> bytes:
    """A zstd frame whose content size field (4 bytes) says `claim` and that holds `real`."""
    frame = bytearray(zstandard.ZstdCompressor().compress(bytes(real)))
    descriptor = frame[4]
    assert descriptor >> 6 == 2  # a 4-byte size, after the window byte unless single-segment
    struct.pack_into("<I", frame, 5 if descriptor & 0x20 else 6, claim)
    return bytes(frame)


def snappy_claiming(claim: int, real: int = BOMB) -> bytes:
    """Raw snappy whose length preamble says `claim` and whose elements make `real`."""
    raw = bytes(cramjam.snappy.compress_raw(bytes(real)))
    preamble = len(encode_uvarint(real))
    return encode_uvarint(claim) + raw[preamble:]


def xerial_claiming(claim: int, real: int = BOMB, block: int = 1 << 20) -> bytes:
    """xerial framing whose blocks' preambles each claim `claim` // blocks."""
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    blocks = real // block
    for _ in range(blocks):
        body = snappy_claiming(claim // blocks, block)
        out += struct.pack(">i", len(body)) + body
    return bytes(out)


def gzip_claiming(claim: int, real: int = BOMB) -> bytes:
    """gzip whose ISIZE trailer says `claim` (mod 2**32) and whose stream makes `real`."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    data = bytearray(compressor.compress(bytes(real)) + compressor.flush())
    struct.pack_into("<I", data, len(data) - 4, claim & 0xFFFFFFFF)
    return bytes(data)


LIARS: dict[str, tuple[Compression, Callable[[int], bytes]]] = {
    "lz4": (Compression.LZ4, lz4_claiming),
    "zstd": (Compression.ZSTD, zstd_claiming),
    "snappy": (Compression.SNAPPY, snappy_claiming),
    "snappy-xerial": (Compression.SNAPPY, xerial_claiming),
    "gzip": (Compression.GZIP, gzip_claiming),
}


def peak_traced(call: Callable[[], object]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        call()
    except CorruptRecordError:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


@pytest.mark.parametrize("claim", [1024, MAX // 2], ids=["claims-1KiB", "claims-under-max"])
@pytest.mark.parametrize("name", list(LIARS))
def test_a_frame_that_lies_about_its_size_is_bounded_by_what_it_produces(
    name: str, claim: int
) -> None:
    # an lz4 frame claiming 1 MiB that expands to 1 GiB took a consumer to 1,078 MiB: the
    # one-shot decompressor grew its buffer to the real size before the size was checked
    codec, make = LIARS[name]
    frame = make(claim)
    assert len(frame) < BOMB // 16
    with pytest.raises(CorruptRecordError):
        decompress(codec, frame, max_size=MAX)
    peak = peak_traced(lambda: decompress(codec, frame, max_size=MAX))
    assert peak < 3 * MAX + len(frame), f"{name}: {peak >> 20} MiB traced for max_size 2 MiB"


@pytest.mark.parametrize("name", list(LIARS))
def test_frames_within_the_bound_decode_and_small_lies_are_refused(name: str) -> None:
    codec, make = LIARS[name]
    real = MAX // 2
    assert decompress(codec, make(real, real), max_size=MAX) == bytes(real)
    with pytest.raises(CorruptRecordError):  # content that disagrees with its stated size
        decompress(codec, make(1024, real), max_size=MAX)


# -- record fields past 2**63 --------------------------------------------------------------


def raw_batch(record_body: bytes, count: int = 1) -> bytes:
    """A v2 batch (uncompressed, CRC fixed) holding one record with `record_body` after its
    length varint."""
    records = encode_varint(len(record_body)) + record_body
    header = struct.pack(
        ">qiibIhiqqqhii", 0, 49 + len(records), 0, 2, 0, 0, count - 1, 1000, 1000, -1, -1, -1, count
    )
    raw = bytearray(header + records)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    return bytes(raw)


def huge_length_record(field: str) -> bytes:
    """attributes, timestamp delta, offset delta, then a key (or value) length of 2**63."""
    huge = encode_uvarint(1 << 64)  # zigzag(2**63): past what a C int64 holds
    body = b"\x00\x00\x00"
    if field == "key":
        return body + huge + b"\x01\x00"
    return body + b"\x01" + huge + b"\x00"


@pytest.mark.parametrize("field", ["key", "value"])
def test_a_length_past_2_63_is_a_corrupt_record_in_both_builds(field: str) -> None:
    # the compiled decoder raised "ValueError: int too large to convert to i64"
    blob = raw_batch(huge_length_record(field))
    (batch,) = iter_batches(blob, topic="t", partition=0)
    with pytest.raises(CorruptRecordError, match=f"record {field} length .* runs past the end"):
        batch.records()
    with pytest.raises(CorruptRecordError, match="runs past the end"):
        batch.cursor().take(1)


def test_a_key_that_runs_into_the_next_batch_is_refused() -> None:
    # the record bytes of an uncompressed batch are a slice of the whole fetch: a record
    # whose length and key agree, but run past the batch's end, must not read what follows
    key = b"k" * 40
    body = b"\x00\x00\x00" + encode_varint(len(key)) + key + b"\x01\x00"
    whole = raw_batch(body)
    cut = 61 + 8  # the batch claims to end 8 bytes into its record
    raw = bytearray(whole[:cut])
    struct.pack_into(">i", raw, 8, cut - 12)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    blob = bytes(raw) + whole[cut:] + struct.pack(">qi", 1, 1000)  # then a partial batch
    (batch,) = iter_batches(blob)
    with pytest.raises(CorruptRecordError, match="runs past the end"):
        batch.records()
    with pytest.raises(CorruptRecordError, match="runs past the end"):
        batch.cursor().take(1)


def test_offsets_that_do_not_increase_are_corrupt() -> None:
    # a batch of millions of identical records (offset delta 0 each) came out whole, each
    # record at the same offset; offsets in a batch increase (compaction leaves gaps only)
    record = b"\x0c\x00\x00\x00\x01\x01\x00"  # length 6, offset delta 0, no key or value
    payload = record * 5
    header = struct.pack(
        ">qiibIhiqqqhii", 0, 49 + len(payload), 0, 2, 0, 0, 0, 1000, 1000, -1, -1, -1, 5
    )
    raw = bytearray(header + payload)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    (batch,) = iter_batches(bytes(raw))
    with pytest.raises(CorruptRecordError, match="does not increase"):
        batch.records()
    cursor = batch.cursor()
    assert [r[0] for r in cursor.take(5)] == [0]  # the good record before the bad one
    with pytest.raises(CorruptRecordError, match="does not increase"):
        cursor.take(5)


def test_a_legacy_wrapper_of_many_tiny_messages_is_decoded_as_taken() -> None:
    # a magic 1 wrapper (gzip) of 60,000 messages decoded every one into a Record when its
    # batch was read; now the framing is walked and messages are decoded as they are taken
    from tests.unit.records.test_records_aiokafka_interop import legacy_message_set

    raw = legacy_message_set(1, Compression.GZIP, [b""] * 60_000, base_offset=1000)
    batches: list[Any] = []
    peak = peak_traced(lambda: batches.extend(iter_batches(raw, topic="old", partition=0)))
    (batch,) = batches
    assert (batch.record_count, batch.base_offset, batch.last_offset) == (60_000, 1000, 60_999)
    # 2.4 MB decompressed, held about three times at the peak (9 MiB); decoding every
    # message at once peaked at 23 MiB
    assert peak < 14 * 2**20
    cursor = batch.cursor()
    first = cursor.take(500)
    assert [r[0] for r in first] == list(range(1000, 1500)) and cursor.remaining == 59_500
    assert [r.offset for r in batch.records()][-1] == 60_999


# -- the compiled decoder and the pure-Python one agree ------------------------------------


def _load_pure_batch() -> ModuleType:
    """kafkaio/records/batch.py loaded from source (the compiled module shadows it)."""
    path = Path(kafkaio.records.batch.__file__ or "").with_suffix("")
    source = path.parent / "batch.py"
    spec = importlib.util.spec_from_file_location("_kafkaio_pure_batch", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _outcome(module: Any, blob: bytes) -> object:
    """Every record as tuples, or the error's type and text."""
    out: list[object] = []
    try:
        for batch in module.iter_batches(blob, topic="t", partition=1):
            if hasattr(batch, "cursor"):
                cursor = batch.cursor()
                while cursor.remaining:
                    out.extend(cursor.take(3))
            else:
                out.extend(batch.record_tuples())
    except CorruptRecordError as exc:
        return (type(exc).__name__, str(exc), out)
    return out


# A varint field: mostly the true value, sometimes any 64-bit-or-more number.
_ANY = st.one_of(
    st.integers(min_value=0, max_value=300),
    st.integers(min_value=2**62, max_value=2**70),
    st.integers(min_value=0, max_value=2**64),
)


@st.composite
def _record_bytes(draw: st.DrawFn) -> bytes:
    """One record, each length a true one or a lie (zigzag varints, as the format has)."""
    key = draw(st.one_of(st.none(), st.binary(max_size=12)))
    value = draw(st.one_of(st.none(), st.binary(max_size=12)))
    headers = draw(st.lists(st.tuples(st.binary(max_size=4), st.binary(max_size=4)), max_size=2))

    def length(data: bytes | None) -> bytes:
        true = 1 if data is None else len(data) << 1
        return encode_uvarint(draw(st.one_of(st.just(true), _ANY)))

    body = bytearray(b"\x00")  # attributes
    body += encode_uvarint(draw(st.one_of(st.just(0), _ANY)))  # timestamp delta
    body += encode_uvarint(draw(st.one_of(st.just(0), _ANY)))  # offset delta
    body += length(key) + (key or b"") + length(value) + (value or b"")
    body += encode_uvarint(draw(st.one_of(st.just(len(headers) << 1), _ANY)))
    for name, data in headers:
        body += length(name) + name + length(data) + data
    size = draw(st.one_of(st.just(len(body) << 1), _ANY))
    return encode_uvarint(size) + bytes(body)


@pytest.mark.skipif(not COMPILED, reason="the mypyc-compiled codec is not built")
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(_record_bytes(), min_size=1, max_size=6),
    codec=st.sampled_from([Compression.NONE, Compression.NONE, Compression.LZ4]),
    tail=st.binary(max_size=8),
)
def test_compiled_and_pure_decoders_agree_on_hostile_records(
    records: list[bytes], codec: Compression, tail: bytes
) -> None:
    # records whose every length may lie, past 2**63 included: the compiled decoder and the
    # pure-Python source it is built from give the same records or the same error
    pure = _PURE.get("batch") or _PURE.setdefault("batch", _load_pure_batch())
    payload = b"".join(records) + tail
    attributes = int(codec)
    if codec:
        payload = compress(codec, payload)
    header = struct.pack(
        ">qiibIhiqqqhii",
        7,
        49 + len(payload),
        0,
        2,
        0,
        attributes,
        len(records) - 1,
        1000,
        1000,
        -1,
        -1,
        -1,
        len(records),
    )
    raw = bytearray(header + payload)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    blob = bytes(raw) + struct.pack(">qi", 99, 500)  # a partial batch follows, as in fetches
    assert _outcome(kafkaio.records.batch, blob) == _outcome(pure, blob)


_PURE: dict[str, ModuleType] = {}
