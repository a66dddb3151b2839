"""Metadata refresh at scale: the wall time, CPU time and peak RSS of one full metadata
refresh (every topic) by each client, on a cluster of 100 to 10,000 partitions.

The broker gains topics of TOPIC_PARTITIONS partitions point by point (1, 10, 30, 100
topics); at each point each client, in a fresh child process, connects, refreshes once (not
measured: connections, API versions), then REFRESHES times; the table gives the median
refresh. kafkaio: ``Admin.describe_topics()`` (a Metadata request for all topics, parsed into
ClusterMetadata); aiokafka: what ``AIOKafkaConsumer.topics()`` does (its client's
``fetch_all_metadata()``); confluent-kafka: ``AdminClient.list_topics()``. CPU time is the
whole process's (librdkafka's threads too). Run
``python -m benchmarks.bench_metadata [--topics 1,10,100] [--runs R] [--broker apache]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence

from benchmarks import clients
from benchmarks.common import APACHE, BenchBroker, add_broker_argument, in_turn, int_list
from benchmarks.isolate import Metrics, run_isolated
from benchmarks.report import Row, median_row, print_suite

SUITE = "scale: metadata"
CLIENTS = (clients.KAFKAIO, clients.AIOKAFKA, clients.CONFLUENT)
TOPIC_PARTITIONS = 100
TOPICS = (1, 10, 30, 100)  # x 100 partitions: 100 to 10,000 partitions
REFRESHES = 5
CREATE_BATCH = 10  # topics per CreateTopics request


Refresh = Callable[[], Awaitable[int]]  # one full refresh; returns the partitions it saw


async def _timed(refresh: Refresh, partitions: int) -> Metrics:
    """The median of REFRESHES refreshes, after unmeasured ones until the refresh sees every
    partition (the topics were just created)."""
    deadline = time.monotonic() + 60
    while (seen := await refresh()) < partitions:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the refresh saw {seen} partitions, not {partitions} or more")
        await asyncio.sleep(0.5)
    walls, cpus = [], []
    for _ in range(REFRESHES):
        wall, cpu = time.perf_counter(), time.process_time()
        await refresh()
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    cpu_ms = statistics.median(cpus) * 1000
    return {
        "wall_ms": statistics.median(walls) * 1000,
        "cpu_ms": cpu_ms,
        "cpu_us_per_partition": cpu_ms * 1000 / partitions,
    }


async def _kafkaio(bootstrap: str, partitions: int) -> Metrics:
    from kafkaio.admin import Admin

    async with Admin(bootstrap) as admin:

        async def refresh() -> int:
            topics = await admin.describe_topics()
            return sum(len(t.partitions) for t in topics.values())

        return await _timed(refresh, partitions)


async def _aiokafka(bootstrap: str, partitions: int) -> Metrics:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:

        async def refresh() -> int:  # what topics() does, keeping the metadata it fetched
            cluster = await consumer._client.fetch_all_metadata()
            return sum(len(cluster.partitions_for_topic(n) or ()) for n in cluster.topics())

        return await _timed(refresh, partitions)
    finally:
        await consumer.stop()


async def _confluent(bootstrap: str, partitions: int) -> Metrics:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})

    async def refresh() -> int:  # blocks the loop: nothing else runs in this process
        metadata = admin.list_topics(timeout=60)
        return sum(len(t.partitions) for t in metadata.topics.values())

    return await _timed(refresh, partitions)


REFRESHERS = {clients.KAFKAIO: _kafkaio, clients.AIOKAFKA: _aiokafka, clients.CONFLUENT: _confluent}


def measure_metadata(client: str, bootstrap: str, partitions: int) -> Metrics:
    """Child: `client`'s full metadata refreshes on a cluster of `partitions` (or a few
    more: the internal topics)."""
    clients._prepare(client)
    return asyncio.run(REFRESHERS[client](bootstrap, partitions))


def suite(
    topics: Sequence[int] = TOPICS, runs: int = 1, bootstrap: str | None = APACHE
) -> list[Row]:
    names = clients.available(CLIENTS, bootstrap)
    samples: dict[tuple[str, str], list[Metrics]] = {}
    made = 0
    with BenchBroker(bootstrap) as broker:
        for count in topics:
            while made < count:
                batch = min(CREATE_BATCH, count - made)
                broker.new_topics("bench-metadata", TOPIC_PARTITIONS, batch)
                made += batch
            partitions = count * TOPIC_PARTITIONS
            case = f"{partitions:,} partitions ({count} x {TOPIC_PARTITIONS})"
            for round_ in range(runs):
                for name in in_turn(names, round_):
                    metrics = run_isolated(measure_metadata, name, broker.bootstrap, partitions)
                    samples.setdefault((case, name), []).append(metrics)
    return [median_row(SUITE, case, name, runs_) for (case, name), runs_ in samples.items()]


def describe(topics: Sequence[int] = TOPICS, runs: int = 1) -> str:
    return (
        f"Metadata: one full refresh (all topics) on a cluster of "
        f"{', '.join(f'{t * TOPIC_PARTITIONS:,}' for t in topics)} partitions (topics of "
        f"{TOPIC_PARTITIONS}); kafkaio Admin.describe_topics(), aiokafka "
        "AIOKafkaConsumer.topics(), confluent-kafka AdminClient.list_topics(); the median of "
        f"{REFRESHES} refreshes after one unmeasured, whole-process CPU; each run in a fresh "
        f"child process, {runs} run(s) per point."
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--topics", type=int_list, default=TOPICS)
    parser.add_argument("--runs", type=int, default=1)
    add_broker_argument(parser)
    parser.set_defaults(bootstrap=APACHE)
    args = parser.parse_args(argv)
    print_suite(describe(args.topics, args.runs), suite(args.topics, args.runs, args.bootstrap))


if __name__ == "__main__":
    main()
