"""kafkaio: an asyncio-native Kafka client framework built on anyio.

The names below are imported on first use: ``from kafkaio import Producer`` loads the
producer (and the protocol messages it speaks), not the consumer, admin and share clients.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0.dev0"

if TYPE_CHECKING:
    from kafkaio.admin import Admin as Admin
    from kafkaio.admin import NewTopic as NewTopic
    from kafkaio.consumer import Consumer as Consumer
    from kafkaio.consumer import ConsumerRecord as ConsumerRecord
    from kafkaio.consumer import RebalanceListener as RebalanceListener
    from kafkaio.metadata.cluster import TopicPartition as TopicPartition
    from kafkaio.producer import Producer as Producer
    from kafkaio.share import AcknowledgeType as AcknowledgeType
    from kafkaio.share import ShareConsumer as ShareConsumer
    from kafkaio.share import ShareRecord as ShareRecord
    from kafkaio.structs import ConsumerGroupMetadata as ConsumerGroupMetadata
    from kafkaio.structs import OffsetAndMetadata as OffsetAndMetadata

_EXPORTS: dict[str, str] = {
    "Admin": "kafkaio.admin",
    "NewTopic": "kafkaio.admin",
    "Consumer": "kafkaio.consumer",
    "ConsumerRecord": "kafkaio.consumer",
    "RebalanceListener": "kafkaio.consumer",
    "TopicPartition": "kafkaio.metadata.cluster",
    "Producer": "kafkaio.producer",
    "AcknowledgeType": "kafkaio.share",
    "ShareConsumer": "kafkaio.share",
    "ShareRecord": "kafkaio.share",
    "ConsumerGroupMetadata": "kafkaio.structs",
    "OffsetAndMetadata": "kafkaio.structs",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kafkaio' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


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
