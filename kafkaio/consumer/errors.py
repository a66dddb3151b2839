"""Errors only the consumer raises; all derive from kafkaio.errors.KafkaError.

Broker error codes (OffsetOutOfRangeError...) live in kafkaio.errors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kafkaio.errors import KafkaError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.structs import OffsetAndMetadata


class NoOffsetForPartitionError(KafkaError):
    """Partitions have no position and auto_offset_reset is 'none'.

    ``partitions`` names them; seek() them (or set auto_offset_reset) to continue.
    """

    def __init__(self, partitions: Iterable[TopicPartition]) -> None:
        self.partitions = sorted(partitions)
        names = ", ".join(str(tp) for tp in self.partitions)
        super().__init__(
            f"no offset to start from for {names} and auto_offset_reset is 'none'; seek() "
            "these partitions or use auto_offset_reset='earliest' or 'latest'"
        )


class LogTruncationError(KafkaError):
    """The leader's log no longer holds records the consumer's position follows (KIP-320),
    and auto_offset_reset is 'none'.

    ``positions`` maps each partition to the fetch offset that was found truncated;
    ``divergent_offsets`` to the first offset known to diverge (None when the leader knows
    nothing of the position's epoch). seek() each partition (e.g. to its divergent offset) to
    continue; until then it is not fetched.
    """

    def __init__(
        self,
        positions: Mapping[TopicPartition, int],
        divergent_offsets: Mapping[TopicPartition, OffsetAndMetadata | None],
    ) -> None:
        self.positions = dict(positions)
        self.divergent_offsets = dict(divergent_offsets)
        parts = []
        for tp in sorted(self.positions):
            divergent = self.divergent_offsets.get(tp)
            where = "unknown" if divergent is None else str(divergent.offset)
            parts.append(f"{tp} at offset {self.positions[tp]} (diverges from {where})")
        super().__init__(
            "log truncation detected for " + ", ".join(parts) + " and auto_offset_reset is "
            "'none'; seek() these partitions (e.g. to the divergent offset) to continue"
        )
