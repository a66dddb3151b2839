"""kafkaio.integrations: small helpers for running kafkaio clients inside other frameworks.

``ConsumerRunner`` runs a consume loop as a background task with a handler-error policy
(retry, dead-letter topic, stop, skip) and a health snapshot.
"""

from __future__ import annotations

from kafkaio.integrations.runner import (
    ConsumerRunner,
    OnError,
    PartitionStatus,
    RecordHandler,
    RunnerState,
    RunnerStatus,
)

__all__ = ["ConsumerRunner", "OnError", "PartitionStatus", "RecordHandler", "RunnerState", "RunnerStatus"]
