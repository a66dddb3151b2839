"""kafkaio: an asyncio-native Kafka client framework built on anyio."""

from __future__ import annotations

__version__ = "0.1.0.dev0"

from kafkaio.admin import Admin, NewTopic  # noqa: E402
from kafkaio.consumer import Consumer, ConsumerRecord, RebalanceListener  # noqa: E402
from kafkaio.metadata.cluster import TopicPartition  # noqa: E402
from kafkaio.producer import Producer  # noqa: E402
from kafkaio.share import AcknowledgeType, ShareConsumer, ShareRecord  # noqa: E402
from kafkaio.structs import ConsumerGroupMetadata, OffsetAndMetadata  # noqa: E402

__all__ = [
    "Admin",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "NewTopic",
    "OffsetAndMetadata",
    "Producer",
    "RebalanceListener",
    "TopicPartition",
    "__version__",
    "AcknowledgeType",
    "ShareConsumer",
    "ShareRecord",
]
