"""Errors raised only by the producer: records too large to send, a record ``produce`` cannot
buffer without waiting, a producer that closed, transactional state errors.

Both derive from kafkaio.errors.KafkaError, like every kafkaio error.
"""

from __future__ import annotations

from kafkaio.errors import KafkaError


class RecordTooLargeError(KafkaError):
    """A record cannot be sent because it is larger than a producer limit.

    Raised before anything is sent: the record's serialized size exceeds max_request_size
    or buffer_memory. Send a smaller record or raise the limit.
    """


class WouldBlockError(KafkaError, BufferError):
    """``Producer.produce`` cannot buffer the record without waiting: ``buffer_memory`` is
    full, or the topic's partitions are not known yet. Nothing was buffered; ``await
    producer.enqueue(...)`` the record, which waits (at most max_block_ms). A BufferError,
    as confluent-kafka's ``produce`` raises when its queue is full."""


class ProducerClosedError(KafkaError):
    """The producer was closed (or failed) before the record was delivered.

    Records still in the producer when it closes fail with this error rather than vanishing.
    """


class TransactionStateError(KafkaError):
    """A transactional call was made in a state that does not allow it.

    E.g. ``send`` outside a transaction, ``begin_transaction`` twice, or ``commit_transaction``
    after an abortable error (then call ``abort_transaction``). The message names the state.
    """


class TransactionAbortedError(KafkaError):
    """The record or operation was dropped because its transaction was aborted.

    Records not yet sent when ``abort_transaction`` is called (or when the transaction hit an
    abortable error) fail with this error; they were never written.
    """
