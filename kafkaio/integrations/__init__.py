"""kafkaio.integrations: small helpers for running kafkaio clients inside other frameworks.

``ConsumerRunner`` runs a consume loop as a background task with a health snapshot.
"""

from __future__ import annotations

from kafkaio.integrations.runner import (
    ConsumerRunner,
    PartitionStatus,
    RecordHandler,
    RunnerState,
    RunnerStatus,
)

__all__ = ["ConsumerRunner", "PartitionStatus", "RecordHandler", "RunnerState", "RunnerStatus"]
