"""The Kafka producer: accumulator, sender (a request manager), partitioners, idempotence.

``Producer`` is the public entry point; the other modules are its sans-I/O parts.
"""

from __future__ import annotations

from kafkaio.producer.client import Producer, ProducerRecord
from kafkaio.producer.errors import ProducerClosedError, RecordTooLargeError, WouldBlockError
from kafkaio.producer.future import DeliveryFuture, RecordMetadata

__all__ = [
    "DeliveryFuture",
    "Producer",
    "ProducerClosedError",
    "ProducerRecord",
    "RecordMetadata",
    "RecordTooLargeError",
    "WouldBlockError",
]
