"""``kafkaio cluster`` (describe the cluster) and ``kafkaio broker`` (run the embedded
Tansu broker for local development until Ctrl-C, printing its bootstrap address)."""

from __future__ import annotations

import argparse
import signal
import threading
from typing import Any

import anyio

from kafkaio.cli.app import Context
from kafkaio.cli.output import emit_json, table
from kafkaio.errors import KafkaError


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("cluster", parents=[common], help="describe the cluster")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=describe_cluster)

    p = sub.add_parser(
        "broker",
        parents=[common],
        help="run a local Tansu broker (in memory) until Ctrl-C",
        description="Run the embedded Tansu broker (memory storage: data is gone when it "
        "stops) on 127.0.0.1 and print its bootstrap address.",
    )
    p.add_argument("--port", type=int, help="listen on this port (default: a free one)")
    p.set_defaults(run=run_broker)


async def describe_cluster(ctx: Context) -> int:
    async with ctx.admin() as admin:
        cluster = await admin.describe_cluster()
    if ctx.json:
        emit_json(ctx.out, cluster)
        return 0
    ctx.out.write(f"cluster {cluster.cluster_id}  controller {cluster.controller_id}\n")
    table(
        ctx.out,
        ("BROKER", "HOST", "PORT", "RACK"),
        [(b.node_id, b.host, b.port, b.rack) for b in cluster.brokers],
    )
    return 0


async def run_broker(ctx: Context) -> int:
    from kafkaio.testing.errors import BrokerStartError
    from kafkaio.testing.tansu import TansuBroker

    broker = TansuBroker(ctx.args.port)
    try:  # in this (main) thread: the broker is stopped when its starting thread ends
        broker.start()
    except BrokerStartError as exc:
        raise KafkaError(f"the Tansu broker did not start: {exc}") from None
    stopped = anyio.Event()
    try:
        ctx.out.write(f"{broker.bootstrap}\n")
        ctx.out.flush()
        ctx.note(
            f"Tansu broker running (in memory) on {broker.bootstrap}; press Ctrl-C to stop.\n"
            f"  export KAFKAIO_BOOTSTRAP_SERVERS={broker.bootstrap}"
        )
        if threading.current_thread() is threading.main_thread():
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async with anyio.create_task_group() as tg:

                    async def watch() -> None:
                        while broker.running:
                            await anyio.sleep(0.5)
                        stopped.set()
                        tg.cancel_scope.cancel()

                    tg.start_soon(watch)
                    async for _ in signals:
                        tg.cancel_scope.cancel()
                        break
        else:
            while broker.running:
                await anyio.sleep(0.5)
            stopped.set()
    finally:
        broker.stop()
    if stopped.is_set():
        ctx.note(f"the broker exited unexpectedly:\n{broker.log_tail(2000)}")
        return 1
    ctx.note("broker stopped")
    return 0
