"""`kafkaio consume`'s loop without a broker: -c passes the remaining count to getmany,
-e stops only at the high watermarks of a non-empty assignment, exit commits use printed
positions, and the start options seek only partitions the group has no commit for."""

from __future__ import annotations

import argparse
import io
from typing import Any, cast

from kafkaio.cli.app import Context
from kafkaio.cli.consume import Session, parse_offset
from kafkaio.cli.output import record_formatter
from kafkaio.consumer import Consumer, ConsumerRecord, OffsetAndTimestamp
from kafkaio.errors import KafkaTimeoutError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.structs import OffsetAndMetadata

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
Record = ConsumerRecord[bytes | None, bytes | None]


def _rec(tp: TopicPartition, offset: int) -> Record:
    value = f"{tp.partition}@{offset}".encode()
    return ConsumerRecord(tp.topic, tp.partition, offset, 0, 0, None, value, (), None, -1, 3)


class FakeConsumer:
    """Hands out scripted polls (each a dict of records, honouring max_records) and keeps
    positions, high watermarks and commits like the real Consumer's public API."""

    def __init__(self, polls: list[dict[TopicPartition, list[Record]]]) -> None:
        self.polls = polls
        self.max_records: list[int | None] = []
        self.assigned: set[TopicPartition] = set()
        self.positions: dict[TopicPartition, int] = {}
        self.high: dict[TopicPartition, int] = {}
        self.commits: list[dict[TopicPartition, int]] = []
        self.group_commits: dict[TopicPartition, int] = {}
        self.seeks: dict[TopicPartition, int] = {}
        self.ends: dict[TopicPartition, int] = {}
        self.beginnings: dict[TopicPartition, int] = {}
        self.on_poll: list[Any] = []

    async def getmany(self, *, timeout_ms: float, max_records: int | None) -> dict[Any, Any]:
        self.max_records.append(max_records)
        if self.on_poll:
            self.on_poll.pop(0)(self)
        if not self.polls:
            return {}
        batch, left = {}, max_records if max_records is not None else 1 << 30
        for tp, records in self.polls.pop(0).items():
            taken = records[:left]
            left -= len(taken)
            if taken:
                batch[tp] = taken
                self.positions[tp] = taken[-1].offset + 1
        return batch

    def assignment(self) -> set[TopicPartition]:
        return set(self.assigned)

    def highwater(self, tp: TopicPartition) -> int | None:
        return self.high.get(tp)

    async def position(self, tp: TopicPartition, *, timeout_ms: float | None = None) -> int:
        if tp not in self.positions:
            raise KafkaTimeoutError(f"no position for {tp}")
        return self.positions[tp]

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.commits.append(dict(offsets))

    async def committed(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        offset = self.group_commits.get(tp)
        return None if offset is None else OffsetAndMetadata(offset)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks[tp] = offset

    async def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.ends[tp] for tp in tps}

    async def beginning_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.beginnings[tp] for tp in tps}

    async def offsets_for_times(
        self, times: dict[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return {
            tp: OffsetAndTimestamp(ts // 1000, ts) if tp == T0 else None for tp, ts in times.items()
        }

    async def seek_to_end(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self.seeks[tp] = self.ends[tp]


def _session(fake: FakeConsumer, **options: Any) -> tuple[Session, io.StringIO]:
    defaults = {
        "count": None,
        "exit": False,
        "group": None,
        "offset": None,
        "timestamp": None,
        "from_beginning": False,
    }
    if isinstance(options.get("offset"), int):  # -o N, as argparse parses it
        options["offset"] = parse_offset(str(options["offset"]))
    args = argparse.Namespace(**{**defaults, **options})
    out = io.StringIO()
    ctx = Context(args, out, io.StringIO())
    return Session(ctx, cast(Consumer, fake), record_formatter("raw")), out


async def test_count_limits_each_poll_to_what_is_left() -> None:
    fake = FakeConsumer(
        [{T0: [_rec(T0, 0), _rec(T0, 1)], T1: [_rec(T1, 0)]}, {T0: [_rec(T0, 2), _rec(T0, 3)]}]
    )
    session, out = _session(fake, count=4)
    await session.print_records()
    assert fake.max_records == [4, 1]  # the consumer never hands out more than gets printed
    assert out.getvalue().splitlines() == ["0@0", "0@1", "1@0", "0@2"]
    assert session.count == 4
    assert session.printed == {T0: 3, T1: 1}


async def test_exit_waits_for_an_assignment_and_every_high_watermark() -> None:
    fake = FakeConsumer([{}, {T0: [_rec(T0, 0)]}, {}, {T1: [_rec(T1, 4)]}])

    def assign(c: FakeConsumer) -> None:
        c.assigned = {T0, T1}
        c.positions[T1] = 4
        c.high = {T0: 1}  # T1 has had no fetch answer yet

    def t1_answers(c: FakeConsumer) -> None:
        c.high[T1] = 5

    # polls: 1 nothing assigned; 2 assign + record; 3 empty, T1 unknown; 4 T1 answers + record;
    # 5 empty and everything read -> stop
    fake.on_poll = [lambda c: None, assign, lambda c: None, t1_answers]
    session, out = _session(fake, exit=True)
    await session.print_records()
    assert out.getvalue().splitlines() == ["0@0", "1@4"]
    assert len(fake.max_records) == 5


async def test_exit_keeps_polling_while_a_partition_is_behind() -> None:
    fake = FakeConsumer([{}, {T0: [_rec(T0, 5)]}])
    fake.assigned, fake.positions, fake.high = {T0}, {T0: 5}, {T0: 6}
    session, out = _session(fake, exit=True)
    await session.print_records()
    assert out.getvalue() == "0@5\n" and len(fake.max_records) == 3


async def test_commit_uses_printed_positions_then_only_changes() -> None:
    fake = FakeConsumer([{T0: [_rec(T0, 10), _rec(T0, 11)]}])
    fake.assigned = {T0, T1, TopicPartition("t", 2)}
    fake.positions = {T1: 7}  # nothing printed from T1; partition 2 has no position yet
    session, _ = _session(fake, count=2, group="g")
    await session.print_records()
    fake.positions[T0] = 40  # a position beyond what was printed is never committed
    await session.commit()
    assert fake.commits == [{T0: 12, T1: 7}]
    await session.commit()
    assert fake.commits == [{T0: 12, T1: 7}]  # nothing new
    session.forget([T0])
    await session.commit([T0])
    assert fake.commits[-1] == {T0: 40}  # forgotten: back to the consumer's position


async def test_start_options_seek_only_partitions_without_a_commit() -> None:
    fake = FakeConsumer([])
    fake.group_commits = {T0: 3}
    fake.ends, fake.beginnings = {T0: 10, T1: 10}, {T0: 0, T1: 8}
    session, _ = _session(fake, group="g", offset=-5)
    await session.choose_start([T0, T1])
    assert fake.seeks == {T1: 8}  # max(end - 5, log start); T0 keeps its committed offset

    fake = FakeConsumer([])
    fake.ends = {T0: 10, T1: 10}
    session, _ = _session(fake, timestamp=5000)
    await session.choose_start([T0, T1])
    assert fake.seeks == {T0: 5, T1: 10}  # no record that late in T1: its end

    fake = FakeConsumer([])
    session, _ = _session(fake, offset=4)
    await session.choose_start([T0, T1])
    assert fake.seeks == {T0: 4, T1: 4}
    fake = FakeConsumer([])
    session, _ = _session(fake)  # --from-beginning / default: the consumer's reset policy
    await session.choose_start([T0, T1])
    assert fake.seeks == {}
