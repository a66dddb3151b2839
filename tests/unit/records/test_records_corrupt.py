"""Malformed input: bad CRCs, truncation at every byte, lying fields and random garbage.

The decoder must stop cleanly at a partial trailing batch or raise CorruptRecordError; never
IndexError, struct.error, a hang or an allocation larger than its input.
"""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkaio.errors import CorruptRecordError
from kafkaio.records import BatchBuilder, Compression, iter_batches


def make_batch(codec: Compression = Compression.NONE, base_offset: int = 100, n: int = 4) -> bytes:
    builder = BatchBuilder(compression=codec)
    for i in range(n):
        builder.append(1_000 + i, b"key-%d" % i, b"value-%d" % i * 3, [("h", b"x")] if i else None)
    return builder.build(base_offset)


def decode_all(blob: bytes, verify_crc: bool = True) -> list[tuple[int, bytes | None]]:
    out = []
    for batch in iter_batches(blob, topic="t", partition=3, verify_crc=verify_crc):
        out.extend((r.offset, r.value) for r in batch)
    return out


def fix_crc(raw: bytearray) -> bytes:
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    return bytes(raw)


@pytest.mark.parametrize("codec", list(Compression))
def test_crc_mismatch_names_topic_partition_offset(codec: Compression) -> None:
    good = make_batch(codec)
    raw = bytearray(good + make_batch(codec, base_offset=104))
    raw[-3] ^= 0x01  # corrupt the second batch
    batches = iter_batches(bytes(raw), topic="orders", partition=7)
    assert next(batches).base_offset == 100
    with pytest.raises(CorruptRecordError, match="CRC") as info:
        next(batches)
    err = info.value
    assert (err.topic, err.partition, err.offset) == ("orders", 7, 104)
    assert "topic='orders'" in str(err) and "offset=104" in str(err)


def test_crc_check_can_be_skipped() -> None:
    raw = bytearray(make_batch())
    struct.pack_into(">I", raw, 17, 0)
    assert len(decode_all(bytes(raw), verify_crc=False)) == 4
    with pytest.raises(CorruptRecordError):
        decode_all(bytes(raw))


@pytest.mark.parametrize("codec", list(Compression))
def test_truncation_at_every_cut_point_stops_cleanly(codec: Compression) -> None:
    first = make_batch(codec, base_offset=0)
    blob = first + make_batch(codec, base_offset=4)
    expected = decode_all(blob)
    assert len(expected) == 8
    for cut in range(len(blob) + 1):
        got = decode_all(blob[:cut])
        # a partial trailing batch is silently skipped: only whole batches come out
        assert got == (expected if cut == len(blob) else expected[:4] if cut >= len(first) else [])


def test_corrupt_batch_length_is_an_error() -> None:
    raw = bytearray(make_batch())
    struct.pack_into(">i", raw, 8, -5)
    with pytest.raises(CorruptRecordError, match="length -5") as info:
        decode_all(bytes(raw))
    assert info.value.offset == 100
    struct.pack_into(">i", raw, 8, 30)  # v2 header alone needs 49
    with pytest.raises(CorruptRecordError, match="minimum"):
        decode_all(bytes(raw))


@pytest.mark.parametrize("count", [-1, 0, 3, 5, 2**31 - 1])
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.LZ4])
def test_lying_record_count(count: int, codec: Compression) -> None:
    raw = bytearray(make_batch(codec))
    struct.pack_into(">i", raw, 57, count)
    with pytest.raises(CorruptRecordError) as info:
        decode_all(fix_crc(raw))
    assert info.value.offset == 100 and info.value.partition == 3


def test_unknown_magic() -> None:
    raw = bytearray(make_batch())
    raw[16] = 3
    with pytest.raises(CorruptRecordError, match="magic 3"):
        decode_all(bytes(raw))


def test_unknown_codec_in_attributes() -> None:
    raw = bytearray(make_batch())
    struct.pack_into(">h", raw, 21, 6)
    with pytest.raises(CorruptRecordError, match="codec id 6"):
        decode_all(fix_crc(raw))


def test_negative_key_length() -> None:
    builder = BatchBuilder()
    builder.append(1, b"k", b"v")
    raw = bytearray(builder.build())
    # record: length, attributes, ts delta, offset delta, key length (zigzag 2 -> 1 byte)
    assert raw[61 + 4] == 2
    raw[61 + 4] = 5  # zigzag -3
    with pytest.raises(CorruptRecordError, match="negative"):
        decode_all(fix_crc(raw))


def test_overlong_varint_is_rejected() -> None:
    builder = BatchBuilder()
    builder.append(1, b"k", b"v" * 40)
    raw = bytearray(builder.build())
    raw[62:72] = b"\xff" * 10  # timestamp delta varint that never ends within 64 bits
    with pytest.raises(CorruptRecordError):
        decode_all(fix_crc(raw))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    codec=st.sampled_from(list(Compression)),
    flips=st.lists(
        st.tuples(st.integers(min_value=0), st.integers(1, 255)), min_size=1, max_size=4
    ),
)
def test_bit_flips_in_records_with_valid_crc(
    codec: Compression, flips: list[tuple[int, int]]
) -> None:
    """Corruption the CRC cannot catch (recomputed) still never escapes as a foreign error."""
    raw = bytearray(make_batch(codec))
    for index, mask in flips:
        raw[61 + index % (len(raw) - 61)] ^= mask
    try:
        decode_all(fix_crc(raw))
    except CorruptRecordError:
        pass


@settings(max_examples=300, deadline=None)
@given(garbage=st.binary(max_size=400))
def test_random_bytes_raise_only_kafkaio_errors(garbage: bytes) -> None:
    try:
        decode_all(garbage, verify_crc=False)
    except CorruptRecordError:
        pass


@settings(max_examples=200, deadline=None)
@given(tail=st.binary(min_size=49, max_size=300), magic=st.sampled_from([0, 1, 2]))
def test_random_body_with_plausible_header(tail: bytes, magic: int) -> None:
    """Garbage behind a well-formed length and magic, so the decoders really run on it."""
    body = bytearray(struct.pack(">i", -1) + bytes([magic]) + tail)
    blob = struct.pack(">qi", 0, len(body)) + bytes(body)
    try:
        decode_all(blob, verify_crc=False)
    except CorruptRecordError:
        pass
