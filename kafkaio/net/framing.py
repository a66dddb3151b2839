"""Response framing: split a byte stream into size-prefixed Kafka frames.

Sans-I/O: feed received bytes in, take whole frames (without their 4-byte size prefix) out.
"""

from __future__ import annotations

import struct

from kafkaio.errors import KafkaProtocolError

_SIZE = struct.Struct(">i")


class FrameReader:
    """Reassembles frames from chunks of a byte stream.

    A frame that lies wholly inside one fed chunk comes out as a zero-copy memoryview of that
    chunk (so feed immutable ``bytes``); a frame spread over several chunks is copied into one
    buffer that grows with the bytes that arrive (a size prefix alone allocates nothing, so a
    peer cannot make the client reserve ``max_frame_size`` by sending four bytes). The reader
    holds at most one partial frame and three bytes of a partial size prefix, so its memory
    is bounded by the bytes received of the frame (at most ``max_frame_size``) plus the chunk
    being fed.
    """

    __slots__ = ("max_frame_size", "_header", "_body", "_size")

    def __init__(self, max_frame_size: int) -> None:
        if max_frame_size < 4:
            raise ValueError(f"max_frame_size must be at least 4 bytes, got {max_frame_size}")
        self.max_frame_size = max_frame_size
        self._header = bytearray()
        self._body: bytearray | None = None
        self._size = 0  # of the frame being assembled in _body

    @property
    def buffered(self) -> int:
        """Bytes held of the frame being assembled (of its size prefix, or of its body)."""
        return len(self._header) + (len(self._body) if self._body is not None else 0)

    @property
    def mid_frame(self) -> bool:
        """True when part of a frame (or of its size prefix) has been fed but not completed."""
        return bool(self._header) or self._body is not None

    def feed(self, data: bytes) -> list[memoryview]:
        """Consume one received chunk; return the frames it completed, in stream order.

        Raises KafkaProtocolError for a negative size or one above ``max_frame_size``; the
        stream cannot be resynchronised after that, so the connection must be closed.
        """
        frames: list[memoryview] = []
        view = memoryview(data)
        pos = 0
        end = len(view)
        while pos < end:
            body = self._body
            if body is not None:
                take = min(self._size - len(body), end - pos)
                body += view[pos : pos + take]
                pos += take
                if len(body) == self._size:
                    frames.append(memoryview(body))
                    self._body = None
                continue
            if not self._header and end - pos >= 4:
                size: int = _SIZE.unpack_from(view, pos)[0]
                pos += 4
            else:
                take = min(4 - len(self._header), end - pos)
                self._header += view[pos : pos + take]
                pos += take
                if len(self._header) < 4:
                    break
                size = _SIZE.unpack_from(self._header, 0)[0]
                self._header.clear()
            self._check_size(size)
            if end - pos >= size:
                frames.append(view[pos : pos + size])
                pos += size
            else:
                self._body = bytearray(view[pos:end])
                self._size = size
                pos = end
        return frames

    def _check_size(self, size: int) -> None:
        if size < 0:
            raise KafkaProtocolError(
                f"response frame size prefix is negative ({size}); the peer is not speaking "
                "the Kafka protocol or the stream is corrupt"
            )
        if size > self.max_frame_size:
            hint = ""
            if size >> 24 in (0x15, 0x16):  # a TLS record header read as a size
                hint = " (this looks like a TLS record: use security_protocol SSL or SASL_SSL)"
            elif size >> 24 == 0x48:  # "HTTP"
                hint = " (this looks like an HTTP response: check the port)"
            raise KafkaProtocolError(
                f"response frame of {size} bytes exceeds max_response_size={self.max_frame_size}"
                f"{hint}; raise max_response_size if the broker really sends frames this large"
            )
