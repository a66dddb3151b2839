"""Errors raised only by the producer: records too large to send, and a producer that closed.

Both derive from kafkaio.errors.KafkaError, like every kafkaio error.
"""

from __future__ import annotations

from kafkaio.errors import KafkaError


class RecordTooLargeError(KafkaError):
    """A record cannot be sent because it is larger than a producer limit.

    Raised before anything is sent: the record's serialized size exceeds max_request_size
    or buffer_memory. Send a smaller record or raise the limit.
    """


class ProducerClosedError(KafkaError):
    """The producer was closed (or failed) before the record was delivered.

    Records still in the producer when it closes fail with this error rather than vanishing.
    """
