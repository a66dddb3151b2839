"""Errors of share consumers: acknowledgements that could not be applied, and why.

All derive from kafkaio.errors.KafkaError; broker error codes keep their own classes.
"""

from __future__ import annotations

from kafkaio.errors import KafkaError


class AcknowledgementError(KafkaError):
    """A record could not be acknowledged (wrong mode, unknown record, already acknowledged)."""


class AcquisitionLockTimeoutError(AcknowledgementError):
    """The record's acquisition lock expired before it was acknowledged.

    The broker has made the record available again (it will be redelivered, possibly to
    another consumer, with a higher delivery count), so this acknowledgement cannot apply.
    Acknowledge sooner, poll fewer records at a time (``max_poll_records``), or ask the
    broker operator for a longer ``group.share.record.lock.duration.ms``.
    """

    retriable = False


class ShareSessionResetError(AcknowledgementError):
    """The share session that acquired the record ended before the acknowledgement was sent.

    The broker releases the records of a closed or invalid session, so they will be
    redelivered; there is nothing to acknowledge any more.
    """
