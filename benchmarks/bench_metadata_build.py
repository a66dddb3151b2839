"""Metadata refresh without a broker: the CPU time per partition of decoding a MetadataResponse
(v12) of N topics x 100 partitions and building its `ClusterMetadata` snapshot, with the
previous snapshot alive (as in a client), Python's garbage collector on (default thresholds)
and off. Each point runs in a fresh child process with kafkaio's client modules imported (a
client's heap). Run ``python -m benchmarks.bench_metadata_build [--topics 10,30,100,300]
[--brokers 3] [--refreshes 15] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import statistics
import time
import uuid
from collections.abc import Sequence

from benchmarks.common import int_list

TOPICS = (10, 30, 100, 300)
TOPIC_PARTITIONS = 100
REFRESHES = 15


def encode_response(topics: int, brokers: int = 1) -> bytes:
    """The frame of a MetadataResponse v12 (header included, no size prefix) of `topics`
    topics x 100 partitions on `brokers` brokers (replication factor min(3, brokers)),
    encoded by kafkaio's own protocol classes."""
    from kafkaio.protocol.messages import MetadataResponse

    rf = min(3, brokers)
    parts = MetadataResponse.MetadataResponsePartition
    response = MetadataResponse(
        brokers=[
            MetadataResponse.MetadataResponseBroker(n, f"broker{n}.example", 9092, None)
            for n in range(1, brokers + 1)
        ],
        cluster_id="bench-cluster",
        controller_id=1,
        topics=[
            MetadataResponse.MetadataResponseTopic(
                0,
                f"bench-metadata-{t}",
                uuid.uuid5(uuid.NAMESPACE_DNS, str(t)),
                False,
                [
                    parts(0, p, r[0], 3, r, r, [])
                    for p in range(TOPIC_PARTITIONS)
                    for r in [[1 + (p + i) % brokers for i in range(rf)]]
                ],
            )
            for t in range(topics)
        ],
    )
    return b"\x00\x00\x00\x07\x00" + response.encode(12)  # correlation id 7, no tags


def measure(topics: int, brokers: int, refreshes: int, gc_on: bool) -> dict[str, float]:
    """Child: `refreshes` decode + build rounds of one response, each replacing the snapshot."""
    import kafkaio.admin  # noqa: F401  (a client's heap)
    import kafkaio.consumer  # noqa: F401
    import kafkaio.producer  # noqa: F401
    from kafkaio.metadata import ClusterMetadata
    from kafkaio.protocol.frames import decode_response

    buf = encode_response(topics, brokers)
    partitions = topics * TOPIC_PARTITIONS
    snapshot = ClusterMetadata().with_response(decode_response(3, 12, buf), 0.0, full=True)
    collections = [0, 0, 0]

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections[info["generation"]] += 1

    gc.collect()
    if not gc_on:
        gc.disable()
    gc.callbacks.append(count)
    cpus = []
    decode_cpus = []
    for i in range(refreshes):
        start = time.process_time()
        response = decode_response(3, 12, buf)  # as a connection does
        decoded = time.process_time()
        snapshot = snapshot.with_response(response, float(i), full=True)
        del response
        end = time.process_time()
        cpus.append(end - start)
        decode_cpus.append(decoded - start)
    gc.callbacks.remove(count)
    assert sum(len(t.partitions) for t in snapshot.topics.values()) == partitions
    return {
        "us_per_partition": statistics.median(cpus) * 1e6 / partitions,
        "mean_us_per_partition": statistics.fmean(cpus) * 1e6 / partitions,
        "decode_us_per_partition": statistics.median(decode_cpus) * 1e6 / partitions,
        "young_per_refresh": collections[0] / refreshes,
        "middle_per_refresh": collections[1] / refreshes,
        "full_per_refresh": collections[2] / refreshes,
        "heap_objects": len(gc.get_objects()),
    }


def _child(args: tuple[int, int, int, bool]) -> dict[str, float]:
    return measure(*args)


def run(
    topics: Sequence[int], brokers: int, refreshes: int, runs: int
) -> dict[tuple[int, bool], list[dict[str, float]]]:
    results: dict[tuple[int, bool], list[dict[str, float]]] = {}
    ctx = multiprocessing.get_context("spawn")
    for _ in range(runs):
        for count in topics:
            for gc_on in (True, False):
                with ctx.Pool(1) as pool:
                    metrics = pool.apply(_child, ((count, brokers, refreshes, gc_on),))
                results.setdefault((count, gc_on), []).append(metrics)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--topics", type=int_list, default=TOPICS)
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("--refreshes", type=int, default=REFRESHES)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    results = run(args.topics, args.brokers, args.refreshes, args.runs)
    print(
        "| partitions | GC | µs/partition (median refresh) | mean | decode µs/partition "
        "| young / middle / full collections per refresh | heap objects |"
    )
    print("|---:|---|---:|---:|---:|---|---:|")
    for (count, gc_on), samples in results.items():

        def med(key: str, samples: list[dict[str, float]] = samples) -> float:
            return statistics.median(s[key] for s in samples)

        spread = [s["us_per_partition"] for s in samples]
        print(
            f"| {count * TOPIC_PARTITIONS:,} | {'on' if gc_on else 'off'} "
            f"| {med('us_per_partition'):.2f} ({min(spread):.2f}–{max(spread):.2f}) "
            f"| {med('mean_us_per_partition'):.2f} | {med('decode_us_per_partition'):.2f} "
            f"| {med('young_per_refresh'):.1f} / {med('middle_per_refresh'):.1f} / "
            f"{med('full_per_refresh'):.2f} | {med('heap_objects'):,.0f} |"
        )


if __name__ == "__main__":
    main()
