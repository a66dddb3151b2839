"""The rebalance simulation: every protocol ends balanced with every partition owned once,
eager revokes everything each time, cooperative and KIP-848 only what moves."""

from __future__ import annotations

from collections import Counter

from kafkaio.consumer.group.simulation import Protocol, Scenario, simulate

SMALL = Scenario(partitions=60, start=5, joins=4, leaves=3)


def test_every_protocol_ends_with_a_balanced_complete_assignment() -> None:
    for protocol in Protocol:
        stats = simulate(protocol, SMALL)
        owned = Counter(tp for parts in stats.owners.values() for tp in parts)
        assert len(owned) == 60 and set(owned.values()) == {1}
        assert len(stats.owners) == 5 + 4 - 3
        sizes = [len(p) for p in stats.owners.values()]
        assert max(sizes) - min(sizes) <= 1
        assert stats.changes == 7


def test_cooperative_revokes_only_moved_partitions_in_two_rounds() -> None:
    eager = simulate(Protocol.EAGER, SMALL)
    coop = simulate(Protocol.COOPERATIVE, SMALL)
    kip848 = simulate(Protocol.CONSUMER, SMALL)
    assert eager.partitions_moved == coop.partitions_moved == kip848.partitions_moved
    assert coop.revocations == kip848.revocations < eager.revocations
    assert eager.rebalances == kip848.rebalances == 7
    assert 7 < coop.rebalances <= 14  # a second round after each change that revoked
    assert kip848.idle_partition_ms < coop.idle_partition_ms < eager.idle_partition_ms
