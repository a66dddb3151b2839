"""kafkaio.Consumer: the AsyncKafkaConsumer-style reactor consumer."""

from __future__ import annotations

from kafkaio.consumer.consumer import Consumer
from kafkaio.consumer.errors import LogTruncationError, NoOffsetForPartitionError
from kafkaio.consumer.group.assignors import (
    ConsumerPartitionAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
)
from kafkaio.consumer.group.errors import CommitFailedError
from kafkaio.consumer.listener import RebalanceListener
from kafkaio.consumer.record import ConsumerRecord
from kafkaio.structs import ConsumerGroupMetadata, OffsetAndTimestamp

__all__ = [
    "CommitFailedError",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerPartitionAssignor",
    "ConsumerRecord",
    "LogTruncationError",
    "NoOffsetForPartitionError",
    "OffsetAndTimestamp",
    "RangeAssignor",
    "RebalanceListener",
    "RoundRobinAssignor",
    "StickyAssignor",
]
