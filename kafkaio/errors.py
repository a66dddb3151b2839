"""The one exception hierarchy of kafkaio.

Every error kafkaio raises derives from :class:`KafkaError`. Broker error codes map to
subclasses through :func:`for_code`; each class says whether retrying may help
(``retriable``) and whether cached metadata should be refreshed first (``invalid_metadata``).
"""

from __future__ import annotations

from typing import ClassVar


class KafkaError(Exception):
    """Base class of every kafkaio error."""

    retriable: ClassVar[bool] = False
    invalid_metadata: ClassVar[bool] = False


class KafkaConfigError(KafkaError, ValueError):
    """A configuration value is missing, of the wrong type or out of range."""


class KafkaProtocolError(KafkaError):
    """Bytes on the wire do not follow the Kafka protocol (truncated, oversized, malformed)."""


class CorruptRecordError(KafkaError):
    """A record batch failed its CRC-32C check or could not be decoded.

    Names the topic, partition and base offset of the batch when they are known.
    """

    def __init__(
        self,
        message: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        where = []
        if topic is not None:
            where.append(f"topic={topic!r}")
        if partition is not None:
            where.append(f"partition={partition}")
        if offset is not None:
            where.append(f"offset={offset}")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)
        self.topic = topic
        self.partition = partition
        self.offset = offset


class KafkaConnectionError(KafkaError):
    """A connection to a broker could not be made or was lost. Retrying may help."""

    retriable = True


class KafkaTimeoutError(KafkaError):
    """A deadline passed before the operation completed."""

    retriable = True


class UnsupportedVersionError(KafkaError):
    """The broker does not support any version of an API that this client can speak."""
