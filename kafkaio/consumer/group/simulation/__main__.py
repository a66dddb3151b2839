"""Print the simulation figures: ``python -m kafkaio.consumer.group.simulation``.

One table row per protocol for the default `Scenario`.
"""

from __future__ import annotations

import sys

from kafkaio.consumer.group.simulation.model import Protocol, Scenario, simulate


def main(argv: list[str]) -> None:
    scenario = Scenario(
        *(int(a) for a in argv[:4])  # partitions start joins leaves
    )
    print(
        f"{scenario.partitions} partitions, {scenario.start} members, +{scenario.joins} "
        f"joining then -{scenario.leaves} leaving one at a time; heartbeat "
        f"{scenario.heartbeat_interval_ms:g} ms"
    )
    print(f"{'protocol':34} {'rounds':>7} {'moved':>7} {'revoked':>8} {'idle partition-s':>17}")
    for protocol in Protocol:
        s = simulate(protocol, scenario)
        print(
            f"{protocol.value:34} {s.rebalances:>7} {s.partitions_moved:>7} "
            f"{s.revocations:>8} {s.idle_partition_seconds:>17.0f}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
