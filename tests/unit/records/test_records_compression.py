"""Compression codecs: round trips, Kafka framing details and bounded decompression."""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaio.errors import CorruptRecordError, KafkaConfigError
from kafkaio.records.compression import Compression, compress, decompress

CODECS = list(Compression)
SAMPLE = b"".join(b"record-%06d:" % i + os.urandom(8).hex().encode() * 3 for i in range(3000))


def xerial_frame(data: bytes, block_size: int = 32 * 1024) -> bytes:
    """Java's SnappyOutputStream framing: 16-byte header, then [int32 length][raw snappy]*."""
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for start in range(0, len(data), block_size):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + block_size]))
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


@pytest.mark.parametrize(
    ("name", "codec"),
    [
        ("none", Compression.NONE),
        ("gzip", Compression.GZIP),
        ("Snappy", Compression.SNAPPY),
        ("LZ4", Compression.LZ4),
        (" zstd ", Compression.ZSTD),
        (3, Compression.LZ4),
    ],
)
def test_compression_parses_names_and_ids(name: str | int, codec: Compression) -> None:
    assert Compression.parse(name) is codec


def test_compression_lowercase_name_via_constructor() -> None:
    assert Compression("gzip") is Compression.GZIP


@pytest.mark.parametrize("bad", ["brotli", 7, ""])
def test_unknown_compression_is_a_config_error(bad: str | int) -> None:
    with pytest.raises(KafkaConfigError, match="unknown compression"):
        Compression.parse(bad)


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_large(codec: Compression) -> None:
    packed = compress(codec, SAMPLE)
    if codec != Compression.NONE:
        assert len(packed) < len(SAMPLE)
    assert decompress(codec, packed) == SAMPLE
    assert decompress(codec, memoryview(packed)) == SAMPLE


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=3000), codec=st.sampled_from(CODECS))
def test_round_trip_any_bytes(data: bytes, codec: Compression) -> None:
    assert decompress(codec, compress(codec, data)) == data


def test_lz4_frames_use_independent_blocks_and_kafka_framing() -> None:
    frame = compress(Compression.LZ4, SAMPLE)
    assert struct.unpack_from("<I", frame)[0] == 0x184D2204
    flg, bd = frame[4], frame[5]
    assert flg >> 6 == 0b01  # version
    assert flg & 0x20, "block independence flag must be set (Kafka rejects linked blocks)"
    assert not flg & 0x08, "no content size, like Kafka's own producer"
    assert (bd >> 4) & 7 == 4, "64 KiB maximum block size"


def test_lz4_decodes_frames_from_other_encoders() -> None:
    with_size = lz4.frame.compress(SAMPLE, store_size=True, block_linked=True)
    assert decompress(Compression.LZ4, with_size) == SAMPLE
    checksummed = lz4.frame.compress(SAMPLE, content_checksum=True, block_checksum=True)
    assert decompress(Compression.LZ4, checksummed) == SAMPLE


def test_lz4_concatenated_frames_decode_fully() -> None:
    two = compress(Compression.LZ4, b"first ") + compress(Compression.LZ4, b"second")
    assert decompress(Compression.LZ4, two) == b"first second"


def test_zstd_frame_without_content_size_decodes() -> None:
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(SAMPLE)
    assert zstandard.frame_content_size(frame) == -1
    assert decompress(Compression.ZSTD, frame) == SAMPLE


def test_zstd_streamed_frame_decodes() -> None:
    compressor = zstandard.ZstdCompressor().compressobj()
    frame = b"".join(compressor.compress(SAMPLE[i : i + 5000]) for i in range(0, len(SAMPLE), 5000))
    frame += compressor.flush()
    assert decompress(Compression.ZSTD, frame) == SAMPLE


def test_snappy_xerial_framing_decodes() -> None:
    framed = xerial_frame(SAMPLE)
    assert framed.startswith(b"\x82SNAPPY\x00")
    assert decompress(Compression.SNAPPY, framed) == SAMPLE


def test_snappy_encodes_raw_blocks() -> None:
    packed = compress(Compression.SNAPPY, SAMPLE)
    assert not packed.startswith(b"\x82SNAPPY\x00")
    assert bytes(cramjam.snappy.decompress_raw(packed)) == SAMPLE


def test_gzip_output_is_a_gzip_container() -> None:
    packed = compress(Compression.GZIP, SAMPLE)
    assert gzip.decompress(packed) == SAMPLE


@pytest.mark.parametrize(
    "packed",
    [
        pytest.param(compress(Compression.GZIP, bytes(1 << 20)), id="gzip"),
        pytest.param(compress(Compression.SNAPPY, bytes(1 << 20)), id="snappy"),
        pytest.param(xerial_frame(bytes(1 << 20)), id="snappy-xerial"),
        pytest.param(compress(Compression.LZ4, bytes(1 << 20)), id="lz4"),
        pytest.param(lz4.frame.compress(bytes(1 << 20)), id="lz4-with-size"),
        pytest.param(compress(Compression.ZSTD, bytes(1 << 20)), id="zstd"),
        pytest.param(
            zstandard.ZstdCompressor(write_content_size=False).compress(bytes(1 << 20)),
            id="zstd-no-size",
        ),
    ],
)
def test_decompression_is_bounded(packed: bytes) -> None:
    codec = {b"\x1f\x8b": Compression.GZIP, b"\x04\x22": Compression.LZ4}.get(packed[:2])
    if codec is None:
        codec = Compression.ZSTD if packed[:4] == b"\x28\xb5\x2f\xfd" else Compression.SNAPPY
    assert len(decompress(codec, packed, max_size=1 << 20)) == 1 << 20
    with pytest.raises(CorruptRecordError, match="exceeds 65536 bytes"):
        decompress(codec, packed, max_size=1 << 16)


def test_lz4_lying_content_size_is_rejected() -> None:
    frame = bytearray(lz4.frame.compress(bytes(100_000), store_size=True))
    struct.pack_into("<Q", frame, 6, 10)  # claim 10 bytes; header checksum now wrong
    with pytest.raises(CorruptRecordError):
        decompress(Compression.LZ4, bytes(frame), max_size=50_000)


@pytest.mark.parametrize("codec", [c for c in CODECS if c != Compression.NONE])
@settings(max_examples=30, deadline=None)
@given(garbage=st.binary(max_size=200))
def test_garbage_raises_corrupt_record_error(codec: Compression, garbage: bytes) -> None:
    try:
        decompress(codec, garbage, max_size=1 << 16)
    except CorruptRecordError:
        pass


@pytest.mark.parametrize("codec", [c for c in CODECS if c != Compression.NONE])
def test_truncated_stream_raises(codec: Compression) -> None:
    packed = compress(codec, SAMPLE)
    with pytest.raises(CorruptRecordError):
        decompress(codec, packed[: len(packed) // 2])


def test_unknown_codec_id_raises() -> None:
    with pytest.raises(CorruptRecordError, match="unknown compression codec id 6"):
        decompress(6, b"abc")


def test_zstd_lying_content_size_is_rejected_without_allocating_it() -> None:
    frame = bytearray(zstandard.ZstdCompressor().compress(b"a" * 1000))
    descriptor = frame[4]
    assert descriptor >> 6 == 1  # 2-byte content size field (value - 256)
    header = 5 + (0 if descriptor & 0x20 else 1)
    struct.pack_into("<H", frame, header, 0xFFFF)  # claims 65,791 bytes
    with pytest.raises(CorruptRecordError):
        decompress(Compression.ZSTD, bytes(frame))


def test_zstd_concatenated_and_skippable_frames() -> None:
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"xyz"
    data = compress(Compression.ZSTD, b"one,") + skippable + compress(Compression.ZSTD, b"two")
    assert decompress(Compression.ZSTD, data) == b"one,two"
