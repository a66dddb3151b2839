"""RebalanceListener: application callbacks run when the group moves partitions.

Subclass it and override what you need; each method may be sync or async (``async def``).
"""

from __future__ import annotations

from collections.abc import Awaitable

from kafkaio.metadata.cluster import TopicPartition


class RebalanceListener:
    """Callbacks of a group rebalance, run in the application's task (inside ``getmany()``,
    ``getone()``, ``async for``, ``unsubscribe()`` or ``close()``), never in the network task.

    * ``on_partitions_revoked(revoked)``: before partitions are given up (rebalance, leave).
      With ``enable_auto_commit`` the consumed offsets are already committed; otherwise
      commit here (``await consumer.commit()``) to avoid re-delivery.
    * ``on_partitions_assigned(assigned)``: the new assignment (positions not yet known;
      ``seek()`` here to choose them).
    * ``on_partitions_lost(lost)``: partitions taken away without a chance to commit (the
      member was fenced or exceeded ``max_poll_interval_ms``); they may already belong to
      another member. Defaults to ``on_partitions_revoked``, as in the Java client.

    An exception raised by a callback is raised from the call that ran it, after the
    rebalance step was acknowledged (the group moves on).
    """

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> Awaitable[None] | None:
        return None

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> Awaitable[None] | None:
        return None

    def on_partitions_lost(self, lost: set[TopicPartition]) -> Awaitable[None] | None:
        return self.on_partitions_revoked(lost)
