"""The simulation model: the real assignors drive who owns what; a fixed timing model turns
revocations into partition-time without consumption. Pure functions, no clock, no I/O.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kafkaio.consumer.group.assignors import CooperativeStickyAssignor, StickyAssignor
from kafkaio.consumer.group.consumer_protocol import Subscription
from kafkaio.metadata.cluster import TopicPartition


class Protocol(enum.Enum):
    EAGER = "eager (sticky)"
    COOPERATIVE = "cooperative (cooperative-sticky)"
    CONSUMER = "consumer (KIP-848)"


@dataclass(frozen=True, slots=True)
class Scenario:
    """``start`` members, then ``joins`` members join one at a time, then ``leaves`` of them
    leave one at a time; each change settles before the next one.

    Timing model (ms): a classic round needs every member to notice the rebalance on its
    next heartbeat (``heartbeat_interval_ms``) plus JoinGroup+SyncGroup (``round_trip_ms``
    each); a KIP-848 owner revokes on its next heartbeat and acknowledges at once, and the
    new owner receives the partition on its next heartbeat (half an interval on average).
    """

    partitions: int = 1000
    start: int = 100
    joins: int = 100
    leaves: int = 50
    heartbeat_interval_ms: float = 3000
    round_trip_ms: float = 20


@dataclass(slots=True)
class Stats:
    protocol: Protocol
    changes: int = 0
    rebalances: int = 0  # group-wide rounds (classic) or epoch bumps (KIP-848)
    partitions_moved: int = 0  # partitions whose owner changed
    revocations: int = 0  # partitions handed to on_partitions_revoked
    idle_partition_ms: float = 0.0  # partition-time with no owner consuming it
    owners: dict[str, list[TopicPartition]] = field(default_factory=dict, repr=False)

    @property
    def idle_partition_seconds(self) -> float:
        return self.idle_partition_ms / 1000


def _subs(
    owned: dict[str, list[TopicPartition]], generation: int, members: list[str]
) -> dict[str, Subscription]:
    return {
        m: Subscription(("t",), None, tuple(sorted(owned.get(m, ()))), generation) for m in members
    }


def simulate(protocol: Protocol, scenario: Scenario) -> Stats:
    """Run `scenario` under `protocol` and count rounds, moves and idle partition-time."""
    stats = Stats(protocol)
    counts = {"t": scenario.partitions}
    members = [f"m{i:05d}" for i in range(scenario.start)]
    sticky = StickyAssignor()
    cooperative = CooperativeStickyAssignor()
    owned = {m: list(p) for m, p in sticky.assign(counts, _subs({}, 1, members)).items()}
    changes: list[tuple[str, str]] = [
        ("join", f"m{scenario.start + i:05d}") for i in range(scenario.joins)
    ]
    changes += [("leave", f"m{i:05d}") for i in range(scenario.leaves)]
    classic_round = scenario.heartbeat_interval_ms + 2 * scenario.round_trip_ms
    generation = 1
    for kind, member in changes:
        stats.changes += 1
        if kind == "join":
            members.append(member)
        else:
            members.remove(member)
        if kind == "leave":  # its partitions are idle until their new owner takes them
            owned.pop(member, None)
        before = {tp: m for m, parts in owned.items() for tp in parts}
        generation += 1
        if protocol is Protocol.CONSUMER:
            target = sticky.assign(counts, _subs(owned, generation, members))
            stats.rebalances += 1
            moved = [tp for m, parts in target.items() for tp in parts if before.get(tp) != m]
            revoked = [tp for tp in moved if tp in before]
            stats.revocations += len(revoked)
            handover = scenario.heartbeat_interval_ms / 2 + scenario.round_trip_ms
            stats.idle_partition_ms += len(moved) * handover
            owned = {m: list(p) for m, p in target.items()}
        elif protocol is Protocol.EAGER:
            # everyone revokes everything, then one round assigns again
            target = sticky.assign(counts, _subs(owned, generation, members))
            stats.rebalances += 1
            stats.revocations += sum(len(p) for p in owned.values())
            moved = [tp for m, parts in target.items() for tp in parts if before.get(tp) != m]
            stats.idle_partition_ms += scenario.partitions * classic_round
            owned = {m: list(p) for m, p in target.items()}
        else:
            first = cooperative.assign(counts, _subs(owned, generation, members))
            stats.rebalances += 1
            revoked = [tp for m, parts in owned.items() for tp in parts if tp not in first[m]]
            stats.revocations += len(revoked)
            kept = {m: [tp for tp in owned.get(m, ()) if tp in first[m]] for m in members}
            # what round one hands out at once (free partitions) waits for that round only
            immediate = [tp for m, parts in first.items() for tp in parts if tp not in before]
            stats.idle_partition_ms += len(immediate) * classic_round
            final = {m: list(p) for m, p in first.items()}
            if revoked:
                generation += 1
                second = cooperative.assign(counts, _subs(kept, generation, members))
                stats.rebalances += 1
                stats.idle_partition_ms += len(revoked) * 2 * classic_round
                final = {m: list(p) for m, p in second.items()}
            moved = [tp for m, parts in final.items() for tp in parts if before.get(tp) != m]
            owned = final
        stats.partitions_moved += len(moved)
    stats.owners = owned
    return stats
