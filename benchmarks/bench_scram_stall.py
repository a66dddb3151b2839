"""The event loop's longest stall while a Consumer logs in with SCRAM asking many iterations.

A fake broker on loopback (the chaos suite's FakeCluster) answers SCRAM-SHA-256 with a
server-first message asking ``--iterations`` PBKDF2 rounds. A ticker task measures the
longest gap between 1 ms sleeps while ``start()`` runs; the broker refuses the login at the
end, so ``start()`` ends with SaslAuthenticationFailedError. Run from the repository root:

    python -m benchmarks.bench_scram_stall            # 10,000,000 iterations, limit raised
    python -m benchmarks.bench_scram_stall --limit 16384   # refused before any hashing
"""

from __future__ import annotations

import argparse
import hashlib
import time

import anyio

from kafkaio import Consumer
from kafkaio.errors import SaslAuthenticationFailedError
from tests.chaos._fake_cluster import FakeCluster


async def longest_stall(iterations: int, limit: int) -> tuple[float, float, str]:
    """(start() seconds, longest loop stall in ms, how start() ended)."""
    longest = 0.0
    done = anyio.Event()

    async def ticker() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not done.is_set():
            await anyio.sleep(0.001)
            now = time.perf_counter()
            longest = max(longest, now - last - 0.001)
            last = now

    async with FakeCluster() as cluster:
        cluster.scram_iterations = iterations
        consumer = Consumer(
            bootstrap_servers=cluster.bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_plain_username="alice",
            sasl_plain_password="s3cret",
            sasl_scram_max_iterations=limit,
            request_timeout_ms=30000,
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            began = time.perf_counter()
            try:
                await consumer.start()
                outcome = "started"
            except SaslAuthenticationFailedError as exc:
                outcome = f"SaslAuthenticationFailedError: {str(exc)[:80]}"
            elapsed = time.perf_counter() - began
            await consumer.close()
            done.set()
    return elapsed, longest * 1000, outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=10_000_000)
    parser.add_argument("--limit", type=int, default=None, help="sasl_scram_max_iterations "
                        "(default: the iterations asked, so the hashing runs)")
    args = parser.parse_args(argv)
    limit = args.limit if args.limit is not None else args.iterations
    began = time.perf_counter()
    hashlib.pbkdf2_hmac("sha256", b"s3cret", b"salt", args.iterations)
    print(f"PBKDF2-SHA256 x {args.iterations:,} on one thread: {time.perf_counter() - began:.2f} s")
    elapsed, stall, outcome = anyio.run(longest_stall, args.iterations, limit)
    print(f"start() {elapsed:.2f} s, longest event-loop stall {stall:.1f} ms; {outcome}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
