"""Hostile record batches: mutated valid batches of every codec and magic (0, 1, 2).

Mutations with and without a recomputed CRC (so they reach the record parser) must end in
records or CorruptRecordError, within a time bound and an allocation bounded by the
decompression limit; compression bombs stop at ``max_decompressed_size``.
"""

from __future__ import annotations

import contextlib
import random
import struct
import zlib

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkaio.records import BatchBuilder, Compression, iter_batches
from kafkaio.records.compression import compress
from tests.unit.fuzz._harness import FuzzStats, bounded_decode, mutate, traced

MAX_DECOMPRESSED = 64 * 1024
_traced = contextlib.contextmanager(traced)


def v2_blob(codec: Compression, rnd: random.Random) -> bytes:
    out = b""
    for base in (0, 10):
        builder = BatchBuilder(
            compression=codec, producer_id=5, producer_epoch=1, base_sequence=base
        )
        for i in range(rnd.randint(1, 6)):
            headers = [("h", rnd.randbytes(3))] if rnd.random() < 0.5 else None
            key = rnd.randbytes(rnd.randint(0, 8)) if rnd.random() < 0.7 else None
            builder.append(1_700_000_000_000 + i, key, rnd.randbytes(rnd.randint(0, 40)), headers)
        out += builder.build(base)
    return out


def _legacy_message(
    offset: int,
    magic: int,
    attributes: int,
    key: bytes | None,
    value: bytes | None,
    timestamp: int = 1_700_000_000_000,
) -> bytes:
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body


def legacy_blob(codec: Compression, magic: int, rnd: random.Random) -> bytes:
    """Magic 0/1 message sets, as old brokers send them (a compressed wrapper if codec)."""
    inner = [
        _legacy_message(i, magic, 0, rnd.randbytes(3) if i % 2 else None, rnd.randbytes(20))
        for i in range(rnd.randint(1, 5))
    ]
    if codec is Compression.NONE:
        return b"".join(inner)
    last = len(inner) - 1
    wrapped = compress(codec, b"".join(inner))
    wrapper_offset = 100 + last if magic == 1 else last
    return _legacy_message(wrapper_offset, magic, int(codec), None, wrapped)


def fix_crcs(raw: bytearray) -> bytes:
    """Recompute the CRC of every v2 batch whose framing is still intact."""
    pos = 0
    while pos + 61 <= len(raw):
        (length,) = struct.unpack_from(">i", raw, pos + 8)
        end = pos + 12 + length
        if length < 49 or end > len(raw) or raw[pos + 16] != 2:
            break
        struct.pack_into(">I", raw, pos + 17, crc32c(bytes(raw[pos + 21 : end])))
        pos = end
    return bytes(raw)


def decode_everything(blob: bytes) -> int:
    n = 0
    for batch in iter_batches(blob, topic="t", partition=1, max_decompressed_size=MAX_DECOMPRESSED):
        for record in batch:
            n += 1
            _ = (record.offset, record.timestamp, record.key, record.value, record.headers)
    return n


CODECS = list(Compression)
MAGICS = (0, 1, 2)
EXAMPLES = 400


def sweep(codec: Compression, magic: int, seed: int = 0) -> FuzzStats:
    rnd = random.Random(f"{seed}-{codec}-{magic}")
    stats = FuzzStats()
    for i in range(EXAMPLES):
        blob = v2_blob(codec, rnd) if magic == 2 else legacy_blob(codec, magic, rnd)
        assert decode_everything(blob) > 0  # the seed is valid
        bad = mutate(rnd, blob, header=0)
        if magic == 2 and i % 2:
            bad = fix_crcs(bytearray(bad))  # let the corruption reach the record parser
        bounded_decode(
            lambda b=bad: decode_everything(b), stats, f"{codec.name} v{magic} {bad.hex()}"
        )
    return stats


@pytest.mark.parametrize("magic", MAGICS)
@pytest.mark.parametrize("codec", CODECS, ids=[c.name.lower() for c in CODECS])
def test_mutated_batches(codec: Compression, magic: int) -> None:
    with _traced():
        stats = sweep(codec, magic)
    assert stats.crashes == []
    assert stats.rejected > 0


@pytest.mark.parametrize("codec", CODECS[1:], ids=[c.name.lower() for c in CODECS[1:]])
def test_compression_bomb_stops_at_the_limit(codec: Compression) -> None:
    """8 MiB of zeros in one record compresses to a few KiB; decoding stops at 64 KiB."""
    builder = BatchBuilder(compression=codec, batch_size=16 * 1024 * 1024)
    assert builder.append(0, None, bytes(8 * 1024 * 1024), None) is not None
    blob = builder.build(0)
    assert len(blob) < 512 * 1024
    stats = FuzzStats()
    with _traced():
        bounded_decode(lambda: decode_everything(blob), stats, f"bomb {codec.name}")
    assert stats.crashes == [] and stats.rejected == 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    codec=st.sampled_from(CODECS),
    seed=st.integers(0, 2**32),
    flips=st.lists(st.tuples(st.integers(0), st.integers(0, 7)), min_size=1, max_size=6),
    recompute_crc=st.booleans(),
)
def test_hypothesis_bit_flips(
    codec: Compression, seed: int, flips: list[tuple[int, int]], recompute_crc: bool
) -> None:
    raw = bytearray(v2_blob(codec, random.Random(seed)))
    for index, bit in flips:
        raw[index % len(raw)] ^= 1 << bit
    bad = fix_crcs(raw) if recompute_crc else bytes(raw)
    stats = FuzzStats()
    bounded_decode(lambda: decode_everything(bad), stats, "hyp")
    assert stats.crashes == []
