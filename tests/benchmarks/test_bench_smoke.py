"""Smoke tests of the benchmark harness: the gap arithmetic of the rebalance suite, one
small produce cell that must give a row (msg/s, CPU, peak RSS) for every client, and the
latency recorder with and without a consumer, the order the clients take turns in, and the
latency suite's broker on a core of its own."""

from __future__ import annotations

import os
import uuid

import pytest

from benchmarks import bench_latency, bench_produce, ceiling, clients
from benchmarks.bench_rebalance import CASES, PARTITIONS, Timeline
from benchmarks.common import BenchBroker, in_turn, payload, pin_broker
from benchmarks.isolate import Metrics, run_isolated
from kafkaio.testing.broker_info import BrokerInfo


def test_longest_gap_counts_from_the_last_receive_before_the_window() -> None:
    timeline = Timeline()
    for t in (0.0, 0.1, 0.2):
        for p in range(PARTITIONS):
            timeline.seen_by("A")(p, 1, t)
    timeline.seen_by("B")(0, 1, 1.5)  # only partition 0 resumes before the window ends
    for p in range(PARTITIONS):
        timeline.seen_by("B")(p, 1, 2.0)
    assert timeline.longest_gap(0.5, 3.0) == pytest.approx(1.3)  # 0.2 -> 1.5
    assert timeline.partition_gap(0.5, 3.0) == pytest.approx(1.8)  # 0.2 -> 2.0
    assert timeline.flowing({"B"}, 1.9)
    assert not timeline.flowing({"A", "B"}, 1.9)


def test_the_timeline_knows_when_a_partition_last_moved() -> None:
    timeline = Timeline()
    timeline.seen_by("A")(0, 1, 1.0)
    timeline.seen_by("A")(0, 1, 2.0)
    timeline.seen_by("B")(1, 1, 2.5)
    assert timeline.owner_changed == 2.5  # partition 1 reached its first member
    timeline.seen_by("B")(1, 1, 3.0)
    assert timeline.owner_changed == 2.5  # the same owners: nothing moved
    timeline.seen_by("B")(0, 1, 4.0)
    assert timeline.owner_changed == 4.0 and timeline.owners == {0: "B", 1: "B"}


def test_every_client_of_the_api_is_a_rebalance_member() -> None:
    # the issue asks for rebalance pauses of every client, confluent-kafka's asyncio API too
    assert set(clients.PEERS) <= set(clients.MEMBERS)
    assert {client for _, client, _ in CASES} == set(clients.PEERS)


@pytest.mark.integration
def test_one_produce_cell_measures_every_client_in_its_own_process() -> None:
    case = bench_produce.Case(100, "none", "1", 2000, 1, enqueue_row=True)
    rows = bench_produce.suite([case])
    expected = clients.available(bench_produce.CLIENTS)
    assert [r.client for r in rows] == list(expected)
    assert clients.KAFKAIO in expected and clients.KAFKA_PYTHON in expected
    assert clients.CEILING in expected  # the broker ceiling rows of every case
    assert clients.ORDERED_CEILING in expected
    for row in rows:
        assert row.case == "100 B, none, acks=1"
        assert row.metrics["records"] == 2000
        assert row.metrics["msg_per_s"] > 0
        assert row.metrics["cpu_us_per_msg"] > 0
        assert 10 < row.metrics["peak_rss_mib"] < 2000  # a whole Python process, in MiB


@pytest.mark.parametrize(("size", "codec", "records"), [(100, "none", 1000), (1024, "lz4", 40)])
def test_ceiling_plan_fills_batches_by_uncompressed_bytes(
    size: int, codec: str, records: int
) -> None:
    from kafkaio.records import iter_batches

    spec = clients.ProduceSpec(size, codec, "1", records)
    plan = ceiling.plan(spec)
    batch = next(iter(iter_batches(plan.full_batch)))
    values = [r.value for r in batch]
    assert len(values) == plan.per_batch and len(set(values)) == min(plan.per_batch, 1024)
    assert {len(v or b"") for v in values} == {size}
    assert batch.producer_id == -1  # plain batches: the broker checks no sequence
    # full by uncompressed bytes: a 61-byte header and 7-12 bytes of overhead per record
    # (varints), and one more record would not fit, however small the batch compresses to
    assert 61 + plan.per_batch * (size + 7) <= spec.batch_size
    assert spec.batch_size < 61 + (plan.per_batch + 1) * (size + 12)
    assert plan.full * plan.per_batch + plan.rest == records
    if plan.rest:
        assert plan.rest_batch is not None
        assert next(iter(iter_batches(plan.rest_batch))).record_count == plan.rest


@pytest.mark.integration
def test_the_mock_cluster_broker_runs_a_consume_cell_on_what_it_kept() -> None:
    # `--broker mock`: librdkafka's mock cluster drops a partition's oldest records, so a
    # consume cell reads what it kept (a note says how many) instead of waiting forever
    from benchmarks import bench_consume
    from benchmarks.common import MOCK, BenchBroker, fill, readable
    from benchmarks.report import NOTES
    from kafkaio.testing._probe import api_versions, parse_bootstrap
    from kafkaio.testing.mockcluster import GROUP_API_MAX

    with BenchBroker(MOCK) as broker:
        assert broker.pid is not None and "mock cluster" in broker.describe()
        # only the group API versions the mock parses, as the test plugin's mock cluster
        versions = api_versions(*parse_bootstrap(broker.bootstrap)[0])
        assert {key: versions[key][1] for key in GROUP_API_MAX} == GROUP_API_MAX
        topic = broker.new_topic("smoke", 2)
        fill(broker.bootstrap, topic, "none", 120_000, 100, 2)
        kept = readable(broker, topic, 2, 120_000)
    assert 0 < kept < 120_000  # it trimmed (otherwise this test shows nothing)
    assert any(f"{kept:,} were left" in text for text in NOTES)
    assert clients.KAFKA_PYTHON not in clients.available(clients.PEERS, MOCK)
    rows = bench_consume.suite(2000, {"none": 1}, MOCK)
    kafkaio = next(r for r in rows if r.client == clients.KAFKAIO)
    assert kafkaio.metrics["msg_per_s"] > 0


def test_consume_figures_are_the_steady_state_with_start_up_and_close_apart() -> None:
    from benchmarks.isolate import Phases

    phases = Phases()
    # created at 0 s, first record at 2 s, the 1,001st (last) at 3 s, closed at 3.5 s
    phases.marks = {
        "created": (100.0, 10.0),
        "first": (102.0, 10.5),
        "last": (103.0, 11.0),
        "closed": (103.5, 11.2),
    }
    metrics = phases.metrics(1001, 100)
    assert metrics["msg_per_s"] == pytest.approx(1000.0)  # 1,000 records after the first, 1 s
    assert metrics["cpu_us_per_msg"] == pytest.approx(500.0)  # 0.5 s of CPU for them
    assert metrics["startup_s"] == pytest.approx(2.0)
    assert metrics["close_s"] == pytest.approx(0.5)
    assert metrics["whole_msg_per_s"] == pytest.approx(1001 / 3.5)
    phases.marks.pop("last")
    with pytest.raises(RuntimeError, match="never marked 'last'"):
        phases.metrics(1001, 100)


@pytest.mark.integration
def test_every_consumer_reports_its_start_up_and_close_apart() -> None:
    from benchmarks import bench_consume

    rows = bench_consume.suite(20_000, {"none": 1})
    assert {r.client for r in rows} == set(clients.available(bench_consume.CLIENTS))
    for row in rows:
        m = row.metrics
        assert m["startup_s"] > 0 and m["close_s"] >= 0, row.client
        # the whole run includes start-up and close, so it is slower than the steady state
        assert m["whole_msg_per_s"] < m["msg_per_s"], row.client


def test_without_a_consumer_a_latency_run_is_ready_at_the_first_ack_done_at_the_last() -> None:
    rec = clients.LatencyRecorder(payload(100), 3, consume=False)
    for seq in range(3):
        rec.value(seq)
    assert not rec.ready.is_set() and not rec.done()
    rec.acked(0)
    assert rec.ready.is_set()
    rec.acked(1)
    assert not rec.done()
    rec.acked(2)
    assert rec.done()
    summary = rec.summary(0)
    assert summary["ack_samples"] == 3 and summary["ack_missing"] == 0
    assert not any(key.startswith("e2e_") for key in summary)


def test_with_a_consumer_the_latency_run_waits_for_every_record_to_come_back() -> None:
    rec = clients.LatencyRecorder(payload(100), 2)
    values = [rec.value(seq) for seq in range(2)]
    rec.acked(0)
    rec.acked(1)
    assert not rec.ready.is_set() and not rec.done()  # acks alone do not end the run
    rec.consumed(values[0], 0)
    assert rec.ready.is_set() and not rec.done()
    rec.consumed(values[1], 0)
    assert rec.done()
    assert {"ack_samples", "e2e_samples"} <= set(rec.summary(0))


@pytest.mark.integration
def test_the_producer_alone_latency_run_acknowledges_every_record() -> None:
    with BenchBroker() as broker:
        topic = broker.new_topic("smoke-latency")
        metrics = clients.measure_latency(
            clients.KAFKAIO, broker.bootstrap, topic, 500, 0.4, 100, 10, 10, broker.pid, False
        )
    assert metrics["ack_samples"] == 200 and metrics["ack_missing"] == 0
    assert 0 < metrics["ack_p50_ms"] <= metrics["ack_p99_ms"] <= metrics["ack_max_ms"]
    assert "e2e_samples" not in metrics


def test_the_clients_take_turns_in_reverse_order_every_second_run() -> None:
    names = ("kafkaio", "aiokafka", "confluent-kafka (sync)")
    orders = [tuple(in_turn(names, run)) for run in range(3)]
    assert orders == [names, names[::-1], names]


def test_the_latency_suite_refuses_a_client_it_does_not_know(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:
        bench_latency.main(["--clients", "kafkaio,kafka-go"])
    assert exc.value.code == 2
    assert "unknown ['kafka-go']" in capsys.readouterr().err


def _own_cores() -> Metrics:
    return {f"core_{core}": 1.0 for core in os.sched_getaffinity(0)}


@pytest.mark.integration
@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="pinning needs CPU affinity and at least two cores",
)
def test_the_broker_gets_a_core_of_its_own_and_the_clients_the_others() -> None:
    cores = sorted(os.sched_getaffinity(0))
    with BenchBroker() as broker:
        assert broker.pid is not None
        clients_cores = pin_broker(broker.pid)
        threads = os.listdir(f"/proc/{broker.pid}/task")
        assert len(threads) > 1  # Tansu's runtime threads, not only its main thread
        for thread in threads:
            assert os.sched_getaffinity(int(thread)) == {cores[-1]}
    assert clients_cores == frozenset(cores[:-1])
    child = run_isolated(_own_cores, cpus=clients_cores)
    assert {key for key in child if key.startswith("core_")} == {f"core_{c}" for c in cores[:-1]}
    assert pin_broker(None) is None  # an external cluster: nothing to pin


@pytest.mark.integration
def test_group_mode_reads_every_record_as_the_only_member_of_a_new_group() -> None:
    from benchmarks import bench_consume

    only = (clients.KAFKAIO, clients.CONFLUENT)
    rows = bench_consume.suite(5000, {"none": 1}, modes=("group",), only=only)
    assert {(r.case, r.client) for r in rows} == {("100 B, none, group", c) for c in only}
    assert all(r.metrics["msg_per_s"] > 0 for r in rows)


def test_the_java_row_is_measured_on_apache_kafka_only() -> None:
    from benchmarks.report import NOTES

    assert clients.available((clients.JAVA,), None) == ()
    assert any("measured on Apache Kafka" in text for text in NOTES)


def test_scale_records_cycle_through_every_topic_and_key() -> None:
    from benchmarks import bench_scale

    targets = bench_scale._targets(["a", "b", "c"], keyed=True)
    # every (topic, key) pair once per cycle: 3 topics x 1,024 keys, gcd 1
    assert len(targets) == 3 * bench_scale.KEYS == len(set(targets))
    assert bench_scale._targets(["a", "b"], keyed=False) == [("a", None), ("b", None)]
    sizes = bench_scale.points("sizes", 200_000)
    # about 100 MB per point, at most N records, at least 100
    assert [p.records for p in sizes] == [200_000, 200_000, 100_000, 10_000, 1_000, 100]
    assert all(p.keyed and p.consume for p in bench_scale.points("partitions", 10))


def test_a_group_is_stable_once_each_partition_has_one_owner_that_received_a_record() -> None:
    from benchmarks.bench_group_size import GroupView
    from benchmarks.clients import MemberSpec

    view = GroupView(4)
    a, b = (view.spec(m, MemberSpec()) for m in ("a", "b"))
    seen_a, seen_b = view.seen_by("a"), view.seen_by("b")
    assert a.moved is not None and b.moved is not None
    a.moved("assigned", {0, 1, 2, 3}, 1.0)
    seen_a(0, 1, 0.5)  # before a owned anything: not counted
    for p in range(4):
        seen_a(p, 1, 2.0 + p)
    assert view.stable_since(["a"]) == 5.0  # the last partition's first record
    assert view.stable_since(["a", "b"]) is None  # b has no share yet
    b.moved("assigned", {2, 3}, 6.0)
    assert view.stable_since(["a", "b"]) is None  # 2 and 3 owned twice
    a.moved("revoked", {2, 3}, 6.5)
    assert view.revoked == 2
    assert view.stable_since(["a", "b"]) is None  # b has not fetched 2 and 3 yet
    seen_b(2, 1, 7.0)
    seen_b(3, 1, 7.5)
    assert view.stable_since(["a", "b"]) == 7.5
    b.moved("lost", {3}, 8.0)
    assert view.stable_since(["a", "b"]) is None  # partition 3 has no owner


@pytest.mark.integration
@pytest.mark.parametrize(
    ("client", "protocol", "strategy"),
    [
        (clients.KAFKAIO, clients.CLASSIC, "cooperative-sticky"),
        (clients.KAFKAIO, clients.CONSUMER_PROTOCOL, ""),
        (clients.AIOKAFKA, clients.CLASSIC, "range"),
        (clients.CONFLUENT, clients.CONSUMER_PROTOCOL, ""),
    ],
)
def test_a_group_forms_and_takes_in_a_new_member(
    apache_kafka: BrokerInfo, client: str, protocol: str, strategy: str
) -> None:
    from benchmarks import bench_group_size
    from benchmarks.common import create_topic

    topic = f"smoke-group-size-{uuid.uuid4().hex[:8]}"
    create_topic(apache_kafka.bootstrap, topic, bench_group_size.PARTITIONS)
    metrics = bench_group_size.measure_group(
        client, protocol, strategy, 2, apache_kafka.bootstrap, topic
    )
    assert metrics["formation_s"] > 0 and metrics["join_s"] > 0
    if strategy == "range":  # eager: both members gave up everything
        assert metrics["moved"] == bench_group_size.PARTITIONS
    else:  # incremental: 50 + 50 became 34 + 33 + 33, one way or the other
        assert metrics["moved"] in (33, 34)


@pytest.mark.integration
def test_every_client_refreshes_the_whole_clusters_metadata(apache_kafka: BrokerInfo) -> None:
    from benchmarks import bench_metadata
    from benchmarks.common import create_topic

    topic = f"smoke-metadata-{uuid.uuid4().hex[:8]}"
    create_topic(apache_kafka.bootstrap, topic, bench_metadata.TOPIC_PARTITIONS)
    for client in bench_metadata.CLIENTS:
        metrics = bench_metadata.measure_metadata(
            client, apache_kafka.bootstrap, bench_metadata.TOPIC_PARTITIONS
        )
        assert metrics["wall_ms"] > 0 and metrics["cpu_ms"] >= 0, client
