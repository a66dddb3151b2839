"""kafkaio.Consumer: the AsyncKafkaConsumer-style reactor consumer."""

from __future__ import annotations
