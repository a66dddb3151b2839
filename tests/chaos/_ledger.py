"""Bookkeeping of a chaos run: what was acked and consumed when, faults, recovery times.

Record i goes to partition i % partitions with value b"%08d" % i, so every consumed value
names its record; lost = produced - distinct consumed, duplicates = consumed - distinct.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field


def value_of(i: int) -> bytes:
    return b"%08d" % i


@dataclass
class Fault:
    """One injected fault: its kind, the partitions it hurts and when it ended."""

    kind: str
    partitions: frozenset[int]
    ended_at: float
    produce_recovery_s: float | None = None
    consume_recovery_s: float | None = None


@dataclass
class Ledger:
    partitions: int
    acked: dict[int, list[float]] = field(default_factory=dict)  # partition -> ack times
    consumed: Counter[bytes] = field(default_factory=Counter)
    offsets: dict[bytes, set[int]] = field(default_factory=dict)  # value -> offsets seen
    consumed_at: dict[int, list[float]] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    restarts: int = 0
    uncommitted_window: int = 0  # records read but not committed when members were closed
    produce_errors: list[str] = field(default_factory=list)

    def ack(self, partition: int) -> None:
        self.acked.setdefault(partition, []).append(time.monotonic())

    def consume(self, partition: int, offset: int, value: bytes) -> None:
        self.consumed[value] += 1
        self.offsets.setdefault(value, set()).add(offset)
        self.consumed_at.setdefault(partition, []).append(time.monotonic())

    def fault(self, kind: str, partitions: set[int] | frozenset[int] | range) -> None:
        self.faults.append(Fault(kind, frozenset(partitions), time.monotonic()))

    @staticmethod
    def _first_after(
        times: dict[int, list[float]], parts: frozenset[int], t: float
    ) -> float | None:
        later = [x for p in parts for x in times.get(p, ()) if x > t]
        return min(later) - t if later else None

    def compute_recoveries(self) -> None:
        for f in self.faults:
            f.produce_recovery_s = self._first_after(self.acked, f.partitions, f.ended_at)
            f.consume_recovery_s = self._first_after(self.consumed_at, f.partitions, f.ended_at)

    def summary(self, produced: int) -> dict[str, object]:
        self.compute_recoveries()
        distinct = len(self.consumed)
        kinds = Counter(f.kind for f in self.faults)
        rec: dict[str, dict[str, float | None]] = {}
        for kind in kinds:
            prod = [
                f.produce_recovery_s
                for f in self.faults
                if f.kind == kind and f.produce_recovery_s is not None
            ]
            cons = [
                f.consume_recovery_s
                for f in self.faults
                if f.kind == kind and f.consume_recovery_s is not None
            ]
            rec[kind] = {
                "produce_max_s": round(max(prod), 3) if prod else None,
                "consume_max_s": round(max(cons), 3) if cons else None,
            }
        return {
            "produced": produced,
            "acked": sum(len(v) for v in self.acked.values()),
            "consumed": sum(self.consumed.values()),
            "distinct": distinct,
            "lost": produced - distinct,
            "duplicates": sum(self.consumed.values()) - distinct,
            # the same record written twice (at two offsets): must be 0 with idempotence
            "producer_duplicates": sum(len(o) - 1 for o in self.offsets.values()),
            # the same offset read twice: after a restart, from the last commit
            "consumer_duplicates": sum(self.consumed.values())
            - sum(len(o) for o in self.offsets.values()),
            "uncommitted_window": self.uncommitted_window,
            "restarts": self.restarts,
            "faults": dict(kinds),
            "recovery": rec,
        }
