"""Share groups (KIP-932, "queues for Kafka"): ShareConsumer and its acknowledgement types.

Records of a share group are handed out one delivery at a time and acknowledged per record.
"""

from __future__ import annotations

from kafkaio.share.acknowledgements import AcknowledgeType, AckOutcome
from kafkaio.share.consumer import ShareConsumer
from kafkaio.share.errors import (
    AcknowledgementError,
    AcquisitionLockTimeoutError,
    ShareSessionResetError,
)
from kafkaio.share.record import ShareRecord

__all__ = [
    "AckOutcome",
    "AcknowledgeType",
    "AcknowledgementError",
    "AcquisitionLockTimeoutError",
    "ShareConsumer",
    "ShareRecord",
    "ShareSessionResetError",
]
