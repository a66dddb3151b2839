"""Errors of the consumer group managers that have no broker error code of their own.

Broker error codes map to classes in kafkaio.errors; these cover client-side outcomes.
"""

from __future__ import annotations

from kafkaio.errors import KafkaError


class CommitFailedError(KafkaError):
    """An offset commit cannot complete because the consumer is no longer in the group
    generation that owned the partitions (it was fenced, kicked out or rejoined).

    Its partitions may already belong to another member. Call poll() again to rejoin the
    group, and use a smaller batch (max_poll_records) or a larger max_poll_interval_ms if the
    application took too long between polls.
    """
