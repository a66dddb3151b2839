"""Compression codecs of Kafka record batches: gzip, snappy, lz4 and zstd.

Pure functions over bytes; decompression is bounded by ``max_size`` so a hostile batch cannot
make the client allocate unbounded memory.
"""

from __future__ import annotations

import struct
import threading
import zlib
from enum import IntEnum

import cramjam
import lz4.frame
import zstandard

from kafkaio.errors import CorruptRecordError, KafkaConfigError

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "Compression",
    "compress",
    "decompress",
]

#: Largest decompressed batch accepted unless the caller says otherwise (64 MiB).
DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16
_LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_U32LE = struct.Struct("<I")
_U64LE = struct.Struct("<Q")
_I32BE = struct.Struct(">i")
# Output step of the streaming decompressors: what a bomb can allocate past max_size.
_STEP = 256 * 1024
_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50
_ZSTD_MAX_BLOCK = 128 * 1024
_ZSTD_FCS_SIZES = (0, 2, 4, 8)
_ZSTD_DICT_ID_SIZES = (0, 1, 2, 4)


class Compression(IntEnum):
    """Compression codec id, as stored in the low 3 bits of batch attributes.

    ``Compression("lz4")`` and ``Compression.parse("LZ4")`` accept names as well as ids.
    """

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def _missing_(cls, value: object) -> Compression | None:
        if isinstance(value, str):
            member = cls.__members__.get(value.strip().upper())
            if member is not None:
                return member
        return None

    @classmethod
    def parse(cls, value: str | int) -> Compression:
        """Return the codec named or numbered by ``value`` ("none", "gzip", "snappy", "lz4", "zstd")."""
        if isinstance(value, cls):  # the common cases first: Enum's own lookup is slow
            return value
        member = _BY_KEY.get(value) if isinstance(value, (int, str)) else None
        if member is not None:
            return member
        if isinstance(value, str):
            member = cls._missing_(value)
            if member is not None:
                return member
        else:
            try:
                return cls(value)
            except ValueError:
                pass
        names = ", ".join(m.name.lower() for m in cls)
        raise KafkaConfigError(f"unknown compression type {value!r}: use one of {names}")


# Ids and lowercase names of every codec, for Compression.parse's fast path.
_BY_KEY: dict[int | str, Compression] = {
    **{int(member): member for member in Compression},
    **{member.name.lower(): member for member in Compression},
}


class _Local(threading.local):
    """Per-thread zstd contexts: creating one costs ~14 us, and they are not thread-safe."""

    def __init__(self) -> None:
        self.zstd_decompressor = zstandard.ZstdDecompressor()
        self.zstd_compressor = zstandard.ZstdCompressor(level=3)


_local = _Local()


def compress(codec: Compression | int, data: bytes | bytearray | memoryview) -> bytes:
    """Compress ``data`` the way Kafka's own clients do for ``codec``."""
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.LZ4:
        # Kafka's framing: independent 64 KiB blocks, no content size, no checksums (KIP-57).
        return lz4.frame.compress(  # type: ignore[no-any-return]
            data,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    if codec == Compression.ZSTD:
        return _local.zstd_compressor.compress(data)
    if codec == Compression.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == Compression.GZIP:
        compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
        return compressor.compress(data) + compressor.flush()
    raise KafkaConfigError(f"unknown compression codec id {int(codec)}: use 0-4")


def decompress(
    codec: Compression | int,
    data: bytes | bytearray | memoryview,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """Decompress ``data``; raise CorruptRecordError if it is malformed or exceeds ``max_size``."""
    try:
        if codec == Compression.LZ4:
            return _lz4_decompress(data, max_size)
        if codec == Compression.ZSTD:
            return _zstd_decompress(data, max_size)
        if codec == Compression.SNAPPY:
            return _snappy_decompress(data, max_size)
        if codec == Compression.GZIP:
            return _gzip_decompress(data, max_size)
        if codec == Compression.NONE:
            return bytes(data)
    except CorruptRecordError:
        raise
    except Exception as exc:  # codec libraries raise assorted types on garbage input
        name = Compression(codec).name.lower()
        raise CorruptRecordError(f"cannot decompress {name} data: {exc}") from exc
    raise CorruptRecordError(
        f"unknown compression codec id {int(codec)} in batch attributes; the data is corrupt "
        "or written by a newer Kafka than this client supports"
    )


def _too_large(max_size: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"decompressed batch exceeds {max_size} bytes; raise max_size if such batches are expected"
    )


def _lz4_bound(data: bytes | bytearray | memoryview) -> int:
    """Upper bound of a single lz4 frame's output from its block headers, or -1 if it cannot
    tell (several frames, or a malformed header).

    Each block decodes to at most the frame's block maximum (the decoder enforces it), so
    blocks x maximum is a true bound. The optional content size field is not trusted: a
    frame may claim a few bytes and hold a gigabyte (a one-shot decompress would grow its
    buffer to whatever the blocks produce). A frame whose claim exceeds its blocks' bound
    gives -1 too, so that no buffer of the claimed size is allocated up front.
    """
    n = len(data)
    if n < 7 or _U32LE.unpack_from(data, 0)[0] != _LZ4_MAGIC:
        return -1
    flg = data[4]
    block_max = _LZ4_BLOCK_SIZES.get((data[5] >> 4) & 7)
    if block_max is None:
        return -1
    pos = 6
    claimed = -1
    if flg & 0x08:  # content size present: read, checked against the blocks below
        if n < 14:
            return -1
        claimed = int(_U64LE.unpack_from(data, 6)[0])
        pos += 8
    if flg & 0x01:  # dictionary id
        pos += 4
    pos += 1  # header checksum
    block_checksum = 4 if flg & 0x10 else 0
    blocks = 0
    while pos + 4 <= n:
        size = _U32LE.unpack_from(data, pos)[0]
        pos += 4
        if size == 0:
            pos += 4 if flg & 0x04 else 0
            if pos != n:
                return -1  # several frames: walk them slowly
            bound = blocks * block_max
            return bound if claimed <= bound else -1
        pos += (size & 0x7FFFFFFF) + block_checksum
        blocks += 1
    return -1


def _lz4_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    bound = _lz4_bound(data)
    if 0 <= bound <= max_size:
        out: bytes = lz4.frame.decompress(data)
        return out
    # Unknown or large bound: decompress frame by frame in steps, never past max_size.
    parts: list[bytes] = []
    total = 0
    remaining: bytes | bytearray | memoryview = data
    while len(remaining):
        decompressor = lz4.frame.LZ4FrameDecompressor()
        chunk = decompressor.decompress(remaining, max_length=_STEP)
        while True:
            total += len(chunk)
            if total > max_size:
                raise _too_large(max_size)
            parts.append(chunk)
            if decompressor.eof or decompressor.needs_input:
                break
            chunk = decompressor.decompress(b"", max_length=_STEP)
        if not decompressor.eof:
            raise CorruptRecordError("lz4 frame is truncated")
        remaining = decompressor.unused_data or b""
    return b"".join(parts)


def _zstd_bound(data: bytes | bytearray | memoryview) -> tuple[int, int, bool]:
    """Walk zstd frames without decompressing: (upper bound of output, frames, sizes known).

    Raises CorruptRecordError when the frames are truncated or malformed, which zstandard's
    streaming API would not report.
    """
    n = len(data)
    pos = 0
    bound = 0
    frames = 0
    sizes_known = True
    while pos < n:
        if pos + 4 > n:
            raise CorruptRecordError("zstd data ends inside a frame magic number")
        magic = _U32LE.unpack_from(data, pos)[0]
        if magic & 0xFFFFFFF0 == _ZSTD_SKIPPABLE_MAGIC:
            if pos + 8 > n:
                raise CorruptRecordError("zstd skippable frame is truncated")
            pos += 8 + _U32LE.unpack_from(data, pos + 4)[0]
            continue
        if magic != _ZSTD_MAGIC or pos + 5 > n:
            raise CorruptRecordError("zstd frame has a bad magic number or is truncated")
        descriptor = data[pos + 4]
        single_segment = descriptor & 0x20
        size_field = _ZSTD_FCS_SIZES[descriptor >> 6]
        if size_field == 0 and single_segment:
            size_field = 1
        sizes_known = sizes_known and size_field > 0
        pos += 5 + (0 if single_segment else 1) + _ZSTD_DICT_ID_SIZES[descriptor & 3] + size_field
        frames += 1
        while True:
            if pos + 3 > n:
                raise CorruptRecordError("zstd frame is truncated")
            header = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16)
            block_type = (header >> 1) & 3
            block_size = header >> 3
            pos += 3
            if block_type == 0:  # raw
                bound += block_size
                pos += block_size
            elif block_type == 1:  # run-length: one byte repeated block_size times
                bound += block_size
                pos += 1
            elif block_type == 2:  # compressed: at most one full block
                bound += _ZSTD_MAX_BLOCK
                pos += block_size
            else:
                raise CorruptRecordError("zstd frame has a reserved block type")
            if header & 1:
                break
        pos += 4 if descriptor & 0x04 else 0  # content checksum
        if pos > n:
            raise CorruptRecordError("zstd frame is truncated")
    return bound, frames, sizes_known


def _zstd_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    # Frames from the Java client carry no content size, so zstandard's one-shot decompress()
    # cannot be used on them: walk the frames first to bound the output, then stream.
    bound, frames, sizes_known = _zstd_bound(data)
    decompressor = _local.zstd_decompressor
    if bound <= max_size:
        if frames == 1 and sizes_known:
            if zstandard.frame_content_size(data) > bound:
                raise CorruptRecordError("zstd frame declares more content than its blocks hold")
            return decompressor.decompress(data)
        parts = []
        remaining: bytes | bytearray | memoryview = data
        while len(remaining):
            dobj = decompressor.decompressobj()
            parts.append(dobj.decompress(remaining))
            if not dobj.eof:
                raise CorruptRecordError("zstd frame is truncated")
            remaining = dobj.unused_data
        return parts[0] if len(parts) == 1 else b"".join(parts)
    # Possibly too large: bounded reads, fail as soon as the output passes max_size.
    reader = decompressor.stream_reader(data, read_across_frames=True)
    parts = []
    total = 0
    while True:
        part: bytes = reader.read(min(_STEP, max_size - total + 1))
        if not part:
            return b"".join(parts)
        total += len(part)
        if total > max_size:
            raise _too_large(max_size)
        parts.append(part)


def _snappy_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    if bytes(data[:8]) != _XERIAL_MAGIC:
        if cramjam.snappy.decompress_raw_len(data) > max_size:
            raise _too_large(max_size)
        return bytes(cramjam.snappy.decompress_raw(data))
    # xerial framing (Java's SnappyOutputStream): 16-byte header, then [int32 length][raw block]*
    view = memoryview(data)
    pos = _XERIAL_HEADER_SIZE
    end = len(view)
    parts: list[bytes] = []
    total = 0
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecordError("xerial snappy block header is truncated")
        (size,) = _I32BE.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise CorruptRecordError("xerial snappy block length runs past the end of the data")
        block = view[pos : pos + size]
        pos += size
        total += cramjam.snappy.decompress_raw_len(block)
        if total > max_size:
            raise _too_large(max_size)
        parts.append(bytes(cramjam.snappy.decompress_raw(block)))
    return b"".join(parts)


def _gzip_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    remaining: bytes = bytes(data)
    while remaining:
        decompressor = zlib.decompressobj(31)
        out = decompressor.decompress(remaining, max_size - total + 1)
        total += len(out)
        if total > max_size:
            raise _too_large(max_size)
        parts.append(out)
        if not decompressor.eof:
            raise CorruptRecordError("gzip stream is truncated")
        remaining = decompressor.unused_data  # concatenated gzip members
    return parts[0] if len(parts) == 1 else b"".join(parts)
