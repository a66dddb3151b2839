"""Errors of the Spark data source: data loss and failed offset lookups.

Both derive from kafkaio.errors.KafkaError; Spark shows them as the failing task's cause.
"""

from __future__ import annotations

from kafkaio.errors import KafkaError


class DataLossError(KafkaError):
    """Offsets the query should read are gone (retention, a deleted or recreated topic) or
    did not arrive in time. Set failOnDataLoss=false to skip them with a warning instead."""


class OffsetLookupError(KafkaError):
    """The source could not turn its offset options into offsets (ListOffsets failed, a
    timestamp matched no record, or explicit offsets did not name the partitions read)."""
