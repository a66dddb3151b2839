"""How well each topic's records compress, so that compressed batches fill ``batch_size``.

``batch_size`` bounds a batch's *compressed* size, as in the Java producer: a batch takes
records until their uncompressed bytes times the topic's estimated compression ratio (times a
5% margin) reach it. The estimate starts at 1.0 (no gain), creeps down by 0.005 for every
batch that compressed better than estimated, and jumps up at once (by at least 0.05) for one
that compressed worse, so a wrong guess makes batches larger than ``batch_size`` rarely and
only by a little. A batch also never holds more than ``max_batch_bytes`` uncompressed (the
largest batch a request can carry), whatever the estimate. If a broker still rejects a batch
as too large, the sender splits it (see ``RecordAccumulator.split``) and the estimate goes
back to 1.0.

Sans-I/O: plain arithmetic on what the sender observed.
"""

from __future__ import annotations

from kafkaio.records import Compression
from kafkaio.records.batch import HEADER_SIZE

IMPROVING_STEP = 0.005  # per batch that compressed better than estimated
DETERIORATING_STEP = 0.05  # at least, per batch that compressed worse
ESTIMATION_MARGIN = 1.05  # the estimate is applied with this safety factor
INITIAL_RATIO = 1.0


class CompressionRatios:
    """Per-topic compression ratio estimates and the batch limits they give.

    ``batch_limit(topic)`` is the uncompressed byte count at which a new batch of ``topic``
    counts as full; without compression that is ``batch_size`` itself.
    """

    __slots__ = ("compressed", "batch_size", "max_batch_bytes", "_ratios")

    def __init__(self, compression: Compression, batch_size: int, max_batch_bytes: int) -> None:
        self.compressed = compression is not Compression.NONE
        self.batch_size = batch_size
        self.max_batch_bytes = max(batch_size, max_batch_bytes)
        self._ratios: dict[str, float] = {}

    def estimate(self, topic: str) -> float:
        """The topic's estimated compressed/uncompressed ratio of record bytes."""
        return self._ratios.get(topic, INITIAL_RATIO)

    def batch_limit(self, topic: str) -> int:
        """Uncompressed bytes (header included) at which a new batch of ``topic`` is full."""
        if not self.compressed:
            return self.batch_size
        ratio = self._ratios.get(topic, INITIAL_RATIO) * ESTIMATION_MARGIN
        limit = HEADER_SIZE + int((self.batch_size - HEADER_SIZE) / ratio)
        return min(limit, self.max_batch_bytes)

    def encoded_size(self, topic: str, size: int) -> int:
        """About the bytes a batch of ``size`` uncompressed bytes (header included) of
        ``topic`` takes once compressed, by the estimate (never more than ``size``)."""
        if not self.compressed:
            return size
        ratio = min(1.0, self._ratios.get(topic, INITIAL_RATIO) * ESTIMATION_MARGIN)
        return HEADER_SIZE + int((size - HEADER_SIZE) * ratio)

    def observe(self, topic: str, uncompressed: int, compressed: int) -> None:
        """A batch of ``topic`` was encoded: ``uncompressed`` and ``compressed`` bytes of
        records (without the batch header). Moves the estimate towards what was seen."""
        if not self.compressed or uncompressed <= 0:
            return
        observed = compressed / uncompressed
        current = self._ratios.get(topic, INITIAL_RATIO)
        if observed > current:
            self._ratios[topic] = max(current + DETERIORATING_STEP, observed)
        elif observed < current:
            self._ratios[topic] = max(current - IMPROVING_STEP, observed)

    def reset(self, topic: str, observed: float = INITIAL_RATIO) -> None:
        """Start over at ``observed`` (at least 1.0): a batch of ``topic`` was too large."""
        self._ratios[topic] = max(INITIAL_RATIO, observed)
