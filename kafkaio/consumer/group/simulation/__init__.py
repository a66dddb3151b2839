"""A deterministic rebalance simulation: members join and leave a group under the eager,
cooperative (KIP-429) and consumer (KIP-848) protocols; see `simulate` and `Scenario`."""

from __future__ import annotations

from kafkaio.consumer.group.simulation.model import Protocol, Scenario, Stats, simulate

__all__ = ["Protocol", "Scenario", "Stats", "simulate"]
