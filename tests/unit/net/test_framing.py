"""FrameReader: reassembly at every split point, size checks before allocation."""

from __future__ import annotations

import struct
import tracemalloc

import pytest

from kafkaio.errors import KafkaProtocolError
from kafkaio.net.framing import FrameReader


def framed(*bodies: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(b)) + b for b in bodies)


BODIES = (b"\x00\x00\x00\x01first", b"", b"\x00\x00\x00\x02" + bytes(range(200)), b"xyz\x00")


def test_whole_stream_in_one_chunk() -> None:
    reader = FrameReader(1024)
    assert [bytes(f) for f in reader.feed(framed(*BODIES))] == list(BODIES)
    assert not reader.mid_frame and reader.buffered == 0


@pytest.mark.parametrize("split", range(len(framed(*BODIES)) + 1))
def test_split_at_every_byte(split: int) -> None:
    data = framed(*BODIES)
    reader = FrameReader(1024)
    frames = [bytes(f) for f in reader.feed(data[:split])]
    frames += [bytes(f) for f in reader.feed(data[split:])]
    assert frames == list(BODIES)
    assert not reader.mid_frame


def test_one_byte_at_a_time() -> None:
    data = framed(*BODIES)
    reader = FrameReader(1024)
    frames = []
    for i in range(len(data)):
        frames += [bytes(f) for f in reader.feed(data[i : i + 1])]
        # never more than one partial frame (plus a partial size prefix) held
        assert reader.buffered <= max(len(b) for b in BODIES)
    assert frames == list(BODIES)


def test_frame_inside_chunk_is_zero_copy_view() -> None:
    data = framed(b"abcd1234")
    (frame,) = FrameReader(64).feed(data)
    assert frame.obj is data


def test_partial_frame_buffer_grows_with_the_bytes_received() -> None:
    reader = FrameReader(10_000)
    assert reader.feed(struct.pack(">i", 5000) + b"x" * 10) == []
    assert reader.mid_frame
    assert reader.buffered == 10
    (frame,) = reader.feed(b"y" * 4990 + struct.pack(">i", 3))
    assert bytes(frame) == b"x" * 10 + b"y" * 4990
    assert reader.buffered == 0 and reader.mid_frame  # the next frame: its size, no bytes
    assert [bytes(f) for f in reader.feed(b"end")] == [b"end"]
    assert reader.buffered == 0 and not reader.mid_frame


def test_a_size_prefix_alone_allocates_nothing() -> None:
    # a peer announcing a 100 MiB frame and sending nothing more made the client allocate
    # 100 MiB at once (for every connection to it)
    reader = FrameReader(101 * 1024 * 1024)
    tracemalloc.start()
    try:
        assert reader.feed(struct.pack(">i", 100 * 1024 * 1024) + b"abc") == []
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert reader.mid_frame and reader.buffered == 3
    assert peak < 64 * 1024


def test_oversize_frame_rejected_before_allocating() -> None:
    reader = FrameReader(1000)
    with pytest.raises(KafkaProtocolError, match="1001 bytes exceeds max_response_size=1000"):
        reader.feed(struct.pack(">i", 1001))
    assert reader.buffered == 0


def test_oversize_split_prefix_rejected() -> None:
    reader = FrameReader(1000)
    assert reader.feed(b"\x7f\xff") == []
    with pytest.raises(KafkaProtocolError, match="exceeds max_response_size"):
        reader.feed(b"\xff\xff")
    assert reader.buffered == 0


def test_negative_size_rejected() -> None:
    with pytest.raises(KafkaProtocolError, match="negative"):
        FrameReader(1000).feed(struct.pack(">i", -5) + b"abc")


def test_tls_record_hint() -> None:
    # A TLS alert record (0x15 0x03 0x03 ...) read as a size prefix
    with pytest.raises(KafkaProtocolError, match="TLS record"):
        FrameReader(1 << 20).feed(b"\x15\x03\x03\x00\x02\x02\x46")


def test_max_frame_size_exactly_allowed() -> None:
    (frame,) = FrameReader(8).feed(framed(b"12345678"))
    assert bytes(frame) == b"12345678"
