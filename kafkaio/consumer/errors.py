"""Errors only the consumer raises; all derive from kafkaio.errors.KafkaError.

Broker error codes (OffsetOutOfRangeError...) live in kafkaio.errors.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafkaio.errors import KafkaError
from kafkaio.metadata.cluster import TopicPartition


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
