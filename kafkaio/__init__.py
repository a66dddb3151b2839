"""kafkaio: an asyncio-native Kafka client framework built on anyio."""

from __future__ import annotations

__version__ = "0.1.0.dev0"
