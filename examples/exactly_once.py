"""Exactly-once consume-transform-produce: read an input topic, write transformed records.

Each batch is produced and its input offsets committed in one transaction, so a crash and
restart neither loses nor duplicates output for read_committed consumers.

    python -m examples.exactly_once --bootstrap 127.0.0.1:9092 \
        --input orders --output orders-upper --group upper --transactional-id upper-1

Restart it with the same ``--transactional-id``: the new instance fences the old one
(InitProducerId), the coordinator aborts the old one's open transaction, and the consumer
resumes from the offsets committed with the last committed transaction. Run one instance per
transactional id (e.g. one per input partition set); this example assigns every partition of
the input topic to itself (manual ``assign`` with a ``group_id``: offsets are stored in the
group, which has no members, so they are committed with generation -1 and no member id).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable

import anyio

from kafkaio import Consumer, Producer, TopicPartition
from kafkaio.consumer import ConsumerRecord
from kafkaio.errors import KafkaError, ProducerFencedError
from kafkaio.structs import ConsumerGroupMetadata

log = logging.getLogger("examples.exactly_once")


def transform(record: ConsumerRecord[bytes, bytes]) -> bytes:
    """The work: here, the input value upper-cased, prefixed with where it came from."""
    value = record.value or b""
    return f"{record.partition}:{record.offset}:".encode() + value.upper()


async def run_pipeline(
    bootstrap: str,
    input_topic: str,
    output_topic: str,
    group_id: str,
    transactional_id: str,
    *,
    max_batch: int = 200,
    stop_when_idle_s: float | None = None,
    pause_in_transaction_s: float = 0.0,
    on_transaction: Callable[[int], None] | None = None,
) -> int:
    """Run until cancelled (or idle for ``stop_when_idle_s``); returns records processed.

    ``on_transaction(count)`` is called after each committed transaction.
    ``pause_in_transaction_s`` waits between producing and committing (records are already
    written, uncommitted): a crash then leaves a transaction for the next instance to abort.
    """
    processed = 0
    group = ConsumerGroupMetadata(group_id)  # a standalone consumer: generation -1
    async with Producer(bootstrap, transactional_id=transactional_id, linger_ms=5) as producer:
        # start() ran init_transactions(): older instances are fenced, their transaction
        # aborted, before we read the committed offsets below.
        async with Consumer(
            bootstrap_servers=bootstrap,
            group_id=group_id,
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        ) as consumer:
            partitions = await producer.partitions_for(input_topic)
            consumer.assign([TopicPartition(input_topic, p) for p in partitions])
            idle_since = anyio.current_time()
            while True:
                batch = await consumer.getmany(timeout_ms=200, max_records=max_batch)
                if not batch:
                    idle = anyio.current_time() - idle_since
                    if stop_when_idle_s is not None and idle >= stop_when_idle_s:
                        return processed
                    continue
                idle_since = anyio.current_time()
                try:
                    async with producer.transaction():
                        for records in batch.values():
                            for record in records:
                                await producer.enqueue(
                                    output_topic, transform(record), key=record.key
                                )
                        if pause_in_transaction_s:
                            await producer.flush()
                            print(
                                f"records written; committing in {pause_in_transaction_s:g} s",
                                flush=True,
                            )
                            await anyio.sleep(pause_in_transaction_s)
                        offsets = {tp: records[-1].offset + 1 for tp, records in batch.items()}
                        await producer.send_offsets_to_transaction(offsets, group)
                except ProducerFencedError:
                    log.error(
                        "another instance with transactional id %r took over; stopping",
                        transactional_id,
                    )
                    raise
                except KafkaError as exc:
                    # aborted: read the batch again and retry it in a new transaction
                    log.warning("transaction aborted (%s); retrying the batch", exc)
                    for tp, records in batch.items():
                        consumer.seek(tp, records[0].offset)
                    continue
                count = sum(len(r) for r in batch.values())
                processed += count
                if on_transaction is not None:
                    on_transaction(count)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--max-batch", type=int, default=200)
    parser.add_argument("--stop-when-idle", type=float, default=None, metavar="SECONDS")
    parser.add_argument(
        "--pause-in-transaction",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait between producing and committing (to watch it, or to test crashes)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    def progress(count: int) -> None:
        print(f"committed {count} records", flush=True)

    total = anyio.run(
        lambda: run_pipeline(
            args.bootstrap,
            args.input,
            args.output,
            args.group,
            args.transactional_id,
            max_batch=args.max_batch,
            stop_when_idle_s=args.stop_when_idle,
            pause_in_transaction_s=args.pause_in_transaction,
            on_transaction=progress,
        )
    )
    print(f"processed {total} records", flush=True)


if __name__ == "__main__":
    main()
