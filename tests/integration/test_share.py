"""Share groups (KIP-932) end to end: ShareConsumer against Apache Kafka and librdkafka's
mock cluster.

Most tests run on both (``share_broker``): a private in-process mock cluster whose
share-group knobs (auto offset reset, lock duration, manual assignment) are set through
librdkafka's C API, and the session's Apache Kafka, where the same settings are group
configs (share.auto.offset.reset, share.record.lock.duration.ms) and its own assignor
shares a partition among the members. Names are unique per test on Apache Kafka.
"""

from __future__ import annotations

import ctypes
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from typing import Any

import anyio
import pytest

import kafkaio
from kafkaio.admin import AlterConfigOp, ConfigResource
from kafkaio.errors import KafkaConfigError, ShareSessionNotFoundError
from kafkaio.share import (
    AcknowledgeType,
    AckOutcome,
    AcquisitionLockTimeoutError,
    ShareConsumer,
    ShareSessionResetError,
)
from kafkaio.testing import BrokerInfo
from kafkaio.testing._rdkafka_mock import RdKafkaMockCluster

pytestmark = pytest.mark.integration

SHARE_FETCH = 78
EARLIEST = 1


async def _produce_numbered(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    """Records b"0", b"1", ... spread round-robin over the partitions, in batches of about
    80 records: a share group hands out whole batches where it can, so the tests that
    split a partition between consumers need many more batches than consumers (with the
    default 16 KiB, which grow up to 64 KiB while they wait to be sent, 10,000 of these
    records make a few batches, and one consumer could take all of a partition's)."""
    async with kafkaio.Producer(bootstrap, linger_ms=5, batch_size=1024) as producer:
        for i in range(count):
            await producer.enqueue(topic, b"%d" % i, partition=i % partitions)
        await producer.flush()


class ShareMock:
    """An in-process mock cluster plus the share-group knobs the shared fixtures lack."""

    name = "mock"

    def __init__(self) -> None:
        self.cluster = RdKafkaMockCluster(3)
        self.bootstrap = self.cluster.bootstrap
        self._lib = self.cluster._lib
        self._knob("rd_kafka_mock_sharegroup_set_auto_offset_reset", EARLIEST)
        self._knob("rd_kafka_mock_sharegroup_set_heartbeat_interval", 200)

    def _knob(self, name: str, value: int) -> None:
        fn = self.cluster._function(name)
        fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_int], None
        fn(self.cluster._mc, value)

    def unique(self, stem: str) -> str:
        return stem  # a private cluster: fixed names are fine

    async def prepare_group(self, group: str, *, lock_duration_ms: int | None = None) -> None:
        """Earliest auto offset reset (set for every group at start), lock duration."""
        if lock_duration_ms is not None:
            self._knob("rd_kafka_mock_sharegroup_set_record_lock_duration", lock_duration_ms)

    def member_ids(self, group: str) -> list[str] | None:
        fn = self.cluster._function("rd_kafka_mock_sharegroup_get_member_ids")
        fn.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p)),
            ctypes.POINTER(ctypes.c_size_t),
        ]
        fn.restype = ctypes.c_int
        ids = ctypes.POINTER(ctypes.c_char_p)()
        count = ctypes.c_size_t()
        fn(self.cluster._mc, group.encode(), ctypes.byref(ids), ctypes.byref(count))
        return [ids[i].decode() for i in range(count.value)]  # (a few bytes leak: a test)

    def assign_to_all(self, group: str, consumers: list[ShareConsumer], topic: str) -> None:
        """Give every member partition 0 (KIP-932 allows it; the mock's own assignor gives
        each partition to one member only)."""
        members = self.member_ids(group)
        assert sorted(members or []) == sorted(c.member_id for c in consumers)
        assert members is not None
        partition = 0
        lib = self._lib
        lib.rd_kafka_topic_partition_list_new.restype = ctypes.c_void_p
        lib.rd_kafka_topic_partition_list_new.argtypes = [ctypes.c_int]
        lib.rd_kafka_topic_partition_list_add.restype = ctypes.c_void_p
        lib.rd_kafka_topic_partition_list_add.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_int32,
        ]
        lists = []
        for _ in members:
            plist = lib.rd_kafka_topic_partition_list_new(1)
            lib.rd_kafka_topic_partition_list_add(plist, topic.encode(), partition)
            lists.append(plist)
        fn = self.cluster._function("rd_kafka_mock_sharegroup_target_assignment")
        fn.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_char_p),
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_size_t,
        ]
        fn.restype = None
        ids = (ctypes.c_char_p * len(members))(*(m.encode() for m in members))
        plists = (ctypes.c_void_p * len(lists))(*lists)
        fn(self.cluster._mc, group.encode(), ids, plists, len(members))

    async def produce(self, topic: str, count: int, partitions: int = 1) -> None:
        self.cluster.create_topic(topic, partitions)
        await _produce_numbered(self.bootstrap, topic, count, partitions)


class ShareKafka:
    """The session's Apache Kafka: the mock's knobs are group configs here."""

    name = "kafka"

    def __init__(self, broker: BrokerInfo) -> None:
        self.broker = broker
        self.bootstrap = broker.bootstrap

    def unique(self, stem: str) -> str:
        return f"{stem}-{uuid.uuid4().hex[:8]}"

    async def prepare_group(self, group: str, *, lock_duration_ms: int | None = None) -> None:
        """share.auto.offset.reset=earliest (the default, latest, would skip what the test
        produced first) and the record lock duration, as group configs."""
        ops = [AlterConfigOp("share.auto.offset.reset", "earliest")]
        if lock_duration_ms is not None:
            ops.append(AlterConfigOp("share.record.lock.duration.ms", str(lock_duration_ms)))
        resource = ConfigResource.group(group)
        async with kafkaio.Admin(self.bootstrap) as admin:
            assert await admin.incremental_alter_configs({resource: ops}) == {resource: None}

    def member_ids(self, group: str) -> list[str] | None:
        return None  # ShareGroupDescribe v1 is not in kafkaio's Admin

    def assign_to_all(self, group: str, consumers: list[ShareConsumer], topic: str) -> None:
        pass  # Apache Kafka's simple assignor shares the partition among the members

    async def produce(self, topic: str, count: int, partitions: int = 1) -> None:
        await self.broker.create_topic(topic, partitions)
        await _produce_numbered(self.bootstrap, topic, count, partitions)


ShareBroker = ShareMock | ShareKafka


@pytest.fixture
def share_mock() -> Iterator[ShareMock]:
    mock = ShareMock()
    try:
        yield mock
    finally:
        mock.cluster.destroy()


@pytest.fixture(params=["mock", "kafka"])
async def share_broker(request: pytest.FixtureRequest) -> AsyncIterator[ShareBroker]:
    """A private mock cluster, or the session's Apache Kafka (skipped when unavailable)."""
    if request.param == "kafka":
        broker: BrokerInfo = request.getfixturevalue("apache_kafka")
        broker.skip_unless("share_groups")
        yield ShareKafka(broker)
        return
    mock = ShareMock()
    try:
        yield mock
    finally:
        mock.cluster.destroy()


async def _topic_and_group(
    broker: ShareBroker, stem: str, count: int, *, lock_duration_ms: int | None = None
) -> tuple[str, str]:
    """A topic holding ``count`` records and a share group ready to read it from the start."""
    topic, group = broker.unique(stem), broker.unique(f"{stem}-group")
    await broker.prepare_group(group, lock_duration_ms=lock_duration_ms)
    await broker.produce(topic, count)
    return topic, group


async def _wait_for_assignment(*consumers: ShareConsumer, size: int = 1) -> None:
    while any(len(c.assignment()) < size for c in consumers):
        await anyio.sleep(0.02)


# -- on the test-plugin brokers (skips on Tansu, which has no share-group APIs) ---------------


async def test_share_consumer_on_plugin_brokers(
    kafka_broker: BrokerInfo, unique_topic: str
) -> None:
    kafka_broker.skip_unless("share_groups")
    await kafka_broker.create_topic(unique_topic, 1)
    with anyio.fail_after(30):
        async with ShareConsumer(
            unique_topic, bootstrap_servers=kafka_broker.bootstrap, group_id=unique_topic
        ) as consumer:
            await _wait_for_assignment(consumer)
            with pytest.raises(KafkaConfigError, match="max_records must be None or an int >= 1"):
                await consumer.poll(max_records=0)
            # share.auto.offset.reset is "latest": the first fetch starts the share partition
            # at the end, so records count only once a fetch round trip has completed
            assert await consumer.poll(timeout_ms=1500) == []
            async with kafkaio.Producer(kafka_broker.bootstrap) as producer:
                for i in range(50):
                    await producer.enqueue(unique_topic, b"%d" % i, partition=0)
                await producer.flush()
            values: list[bytes] = []
            while len(values) < 50:
                batch = await consumer.poll(timeout_ms=2000)
                assert batch, f"no records after {len(values)}"
                assert all(r.delivery_count == 1 for r in batch)
                values += [r.value for r in batch]
            assert values == [b"%d" % i for i in range(50)]


# -- the private mock cluster ---------------------------------------------------------------


async def test_three_consumers_split_one_partition(share_broker: ShareBroker) -> None:
    total = 10_000
    topic, group = await _topic_and_group(share_broker, "jobs", total)
    outcomes: list[AckOutcome] = []
    received: dict[str, list[Any]] = {}
    with anyio.fail_after(60):
        async with AsyncExitStack() as stack:
            consumers = [
                await stack.enter_async_context(
                    ShareConsumer(
                        topic,
                        bootstrap_servers=share_broker.bootstrap,
                        group_id=group,
                        max_poll_records=100,
                        on_acknowledgement=outcomes.append,
                    )
                )
                for _ in range(3)
            ]
            while any(c.member_epoch <= 0 for c in consumers):
                await anyio.sleep(0.02)
            share_broker.assign_to_all(group, consumers, topic)
            await _wait_for_assignment(*consumers)
            done = anyio.Event()

            async def work(consumer: ShareConsumer) -> None:
                got = received.setdefault(consumer.member_id, [])
                while not done.is_set():
                    got += await consumer.poll(timeout_ms=200)
                    await anyio.sleep(0)  # let the others fetch while this one "works"
                    if sum(len(r) for r in received.values()) >= total:
                        done.set()

            async with anyio.create_task_group() as tg:
                for c in consumers:
                    tg.start_soon(work, c)
            # implicit mode: commit accepts the last poll. Commit all before closing any:
            # the mock drops every member's share sessions on a broker when one client's
            # connection to it closes, which would release the others' unsent acks.
            for c in consumers:
                assert set((await c.commit()).values()) <= {None}
        # leaving the stack closed them: share sessions closed (epoch -1), group left
    offsets = Counter(r.offset for got in received.values() for r in got)
    assert len(offsets) == total and set(offsets.values()) == {1}, "a record came twice"
    assert all(r.delivery_count == 1 for got in received.values() for r in got)
    shares = sorted(len(got) for got in received.values())
    assert len(shares) == 3 and shares[0] > 0, f"one consumer got nothing: {shares}"
    acked = Counter(o for out in outcomes if out.error is None for o in out.offsets)
    assert [out for out in outcomes if out.error is not None] == []
    assert len(acked) == total and set(acked.values()) == {1}, "an ack was lost or repeated"
    assert share_broker.member_ids(group) in ([], None)


async def test_release_redelivers_and_reject_does_not(share_broker: ShareBroker) -> None:
    topic, group = await _topic_and_group(share_broker, "tasks", 20)
    seen: list[tuple[int, int]] = []
    with anyio.fail_after(30):
        async with ShareConsumer(
            topic,
            bootstrap_servers=share_broker.bootstrap,
            group_id=group,
            acknowledgement_mode="explicit",
        ) as consumer:
            while True:
                batch = await consumer.poll(timeout_ms=1500)
                if not batch:
                    break
                for record in batch:
                    seen.append((record.offset, record.delivery_count))
                    if record.offset < 5 and record.delivery_count == 1:
                        await record.release()
                    elif record.offset < 10:
                        await record.reject()
                    else:
                        await record.ack()
            assert await consumer.commit() == {}
    first = [o for o, d in seen if d == 1]
    again = sorted(o for o, d in seen if d == 2)
    assert sorted(first) == list(range(20))
    assert again == [0, 1, 2, 3, 4]  # released: back with delivery count 2; rejected: never
    assert max(d for _, d in seen) == 2


async def test_explicit_mode_requires_every_record_acknowledged(
    share_broker: ShareBroker,
) -> None:
    topic, group = await _topic_and_group(share_broker, "strict", 3)
    with anyio.fail_after(20):
        async with ShareConsumer(
            topic,
            bootstrap_servers=share_broker.bootstrap,
            group_id=group,
            acknowledgement_mode="explicit",
        ) as consumer:
            batch = await consumer.poll(timeout_ms=3000)
            assert len(batch) == 3
            await consumer.acknowledge(batch[:2], AcknowledgeType.ACCEPT)
            with pytest.raises(kafkaio.share.AcknowledgementError, match="not acknowledged"):
                await consumer.poll(timeout_ms=10)
            await batch[2].ack()
            with pytest.raises(kafkaio.share.AcknowledgementError, match="already acknowledged"):
                await batch[2].reject()
            result = await consumer.commit()
            assert result == {kafkaio.TopicPartition(topic, 0): None}


async def test_ack_after_lock_expiry_fails_and_record_comes_back(
    share_broker: ShareBroker,
) -> None:
    topic, group = await _topic_and_group(share_broker, "slow", 3, lock_duration_ms=1000)
    with anyio.fail_after(20):
        async with ShareConsumer(
            topic,
            bootstrap_servers=share_broker.bootstrap,
            group_id=group,
            acknowledgement_mode="explicit",
        ) as consumer:
            batch = await consumer.poll(timeout_ms=3000)
            assert [r.delivery_count for r in batch] == [1, 1, 1]
            assert consumer.acquisition_lock_timeout_ms == 1000
            await anyio.sleep(1.2)
            for record in batch:
                with pytest.raises(AcquisitionLockTimeoutError, match="lock expired"):
                    await record.ack()
            again: list[Any] = []
            while len(again) < 3:
                batch = await consumer.poll(timeout_ms=3000)
                await consumer.acknowledge(batch)
                again += batch
            assert sorted(r.offset for r in again) == [0, 1, 2]
            assert all(r.delivery_count >= 2 for r in again)
            assert await consumer.commit() == {kafkaio.TopicPartition(topic, 0): None}


async def test_share_session_lost_resets_epoch_and_redelivers(share_mock: ShareMock) -> None:
    await share_mock.produce("flaky", 10)
    outcomes: list[AckOutcome] = []
    seen: list[tuple[int, int]] = []
    with anyio.fail_after(20):
        async with ShareConsumer(
            "flaky",
            bootstrap_servers=share_mock.bootstrap,
            group_id="g",
            acknowledgement_mode="explicit",
            on_acknowledgement=outcomes.append,
        ) as consumer:
            first = await consumer.poll(timeout_ms=3000)
            assert len(first) == 10
            seen += [(r.offset, r.delivery_count) for r in first]
            await consumer.acknowledge(first)
            # the ShareFetch carrying these acks fails: the session is gone on the broker
            share_mock.cluster.push_request_errors(SHARE_FETCH, [ShareSessionNotFoundError.code])
            accepted: Counter[int] = Counter()
            while len(accepted) < 10:
                batch = await consumer.poll(timeout_ms=3000)
                seen += [(r.offset, r.delivery_count) for r in batch]
                await consumer.acknowledge(batch)
                await consumer.commit()
                accepted = Counter(off for o in outcomes if o.error is None for off in o.offsets)
            await consumer.commit()
    failed = [o for o in outcomes if o.error is not None]
    assert failed and all(isinstance(o.error, ShareSessionResetError) for o in failed)
    lost = {off for o in failed for off in o.offsets}
    assert lost == set(range(10))
    redelivered = {o for o, d in seen if d == 2}
    assert lost <= redelivered  # the new session (epoch 0 again) got them back
    accepted = Counter(off for o in outcomes if o.error is None for off in o.offsets)
    assert set(accepted) == set(range(10)) and set(accepted.values()) == {1}


async def test_close_sends_acks_and_leaves(share_broker: ShareBroker) -> None:
    topic, group = await _topic_and_group(share_broker, "handoff", 30)
    with anyio.fail_after(20):
        async with ShareConsumer(
            topic, bootstrap_servers=share_broker.bootstrap, group_id=group, max_poll_records=10
        ) as first:
            taken = await first.poll(timeout_ms=3000)
            assert share_broker.member_ids(group) in ([first.member_id], None)
        # implicit mode: close accepted what the last poll returned, then left the group
        assert share_broker.member_ids(group) in ([], None)
        async with ShareConsumer(
            topic, bootstrap_servers=share_broker.bootstrap, group_id=group
        ) as second:
            rest: list[Any] = []
            while len(taken) + len(rest) < 30:
                batch = await second.poll(timeout_ms=3000)
                assert batch
                rest += batch
    assert {r.offset for r in taken}.isdisjoint(r.offset for r in rest)
    assert sorted(r.offset for r in taken + rest) == list(range(30))


async def test_async_for_accepts_only_the_records_it_handed_out(
    share_broker: ShareBroker,
) -> None:
    topic, group = await _topic_and_group(share_broker, "stream", 20)
    with anyio.fail_after(20):
        seen: list[int] = []
        async with ShareConsumer(
            topic, bootstrap_servers=share_broker.bootstrap, group_id=group, max_poll_records=10
        ) as consumer:
            async for record in consumer:
                seen.append(record.offset)
                if len(seen) == 13:  # one whole poll of 10, then 3 of the next poll
                    break
        # close accepted the 13 handed out; the 7 never seen went back with the session
        async with ShareConsumer(
            topic, bootstrap_servers=share_broker.bootstrap, group_id=group
        ) as other:
            rest: list[Any] = []
            while len(rest) < 7:
                batch = await other.poll(timeout_ms=3000)
                assert batch
                rest += batch
    assert sorted(seen + [r.offset for r in rest]) == list(range(20))
    assert all(r.delivery_count == 2 for r in rest)  # acquired once before, never acked


async def test_poll_after_leaving_async_for_accepts_what_it_handed_out(
    share_broker: ShareBroker,
) -> None:
    topic, group = await _topic_and_group(share_broker, "mixed", 20)
    with anyio.fail_after(30):
        async with ShareConsumer(
            topic, bootstrap_servers=share_broker.bootstrap, group_id=group, max_poll_records=10
        ) as consumer:
            seen: list[int] = []
            async for record in consumer:
                seen.append(record.offset)
                if len(seen) == 3:
                    break
            rest = await consumer.poll(timeout_ms=3000)  # the 7 the loop fetched, not shown
            assert sorted(r.offset for r in rest) == sorted(set(range(10)) - set(seen))
            more: list[Any] = []
            while len(more) < 10:
                more += await consumer.poll(timeout_ms=3000)
            await consumer.commit()
        async with ShareConsumer(
            topic, bootstrap_servers=share_broker.bootstrap, group_id=group
        ) as other:
            left = await other.poll(timeout_ms=1500)
    # every record was accepted once (before, the 3 shown by the loop and later polls'
    # records stayed unacknowledged and came back)
    assert sorted(seen + [r.offset for r in rest + more]) == list(range(20))
    assert left == []


async def test_async_and_context_deserializers(share_mock: ShareMock) -> None:
    """Share consumers take the same deserializer shapes as Consumer: async functions and
    kafkaio.serde.Deserializer objects, awaited in the caller's task."""
    from kafkaio.serde import Deserializer, SerializationContext

    class Located(Deserializer[str]):
        async def deserialize(self, data: bytes | None, ctx: SerializationContext) -> str:
            return f"{ctx.topic}/{ctx.partition}@{ctx.offset}"

    async def tens(data: bytes | None) -> int:
        assert data is not None
        return int(data) * 10

    await share_mock.produce("typed", 3)
    with anyio.fail_after(20):
        async with ShareConsumer(
            "typed",
            bootstrap_servers=share_mock.bootstrap,
            group_id="typed",
            key_deserializer=Located(),
            value_deserializer=tens,
        ) as consumer:
            got: list[Any] = []
            while len(got) < 3:
                got += await consumer.poll(timeout_ms=1000)
    assert sorted(r.key for r in got) == ["typed/0@0", "typed/0@1", "typed/0@2"]
    assert sorted(r.value for r in got) == [0, 10, 20]
