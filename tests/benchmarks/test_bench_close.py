"""The close benchmark's harness: which member's close times it keeps, the medians and
ranges it reports, and one run of each client (the Java client's through the oracle)
against Apache Kafka. No timing is asserted: only that every member read the topic and
was timed."""

from __future__ import annotations

import uuid

import pytest

from benchmarks import bench_close, clients
from benchmarks.common import create_topic, fill
from kafkaio.testing.broker_info import BrokerInfo
from kafkaio.testing.java import JavaClients


def test_the_untimed_first_member_is_left_out_and_a_and_b_kept() -> None:
    assert bench_close.MEMBERS == (0, 0, bench_close.IDLE_POLLS)
    assert bench_close._metrics([9.0, 0.5, 0.2]) == {"close_s": 0.5, "idle_close_s": 0.2}
    with pytest.raises(RuntimeError, match="2 close times"):
        bench_close._metrics([0.5, 0.2])


def test_a_row_holds_the_medians_and_ranges_of_its_runs() -> None:
    runs = [
        {"close_s": 0.5, "idle_close_s": 0.2},
        {"close_s": 0.1, "idle_close_s": 0.3},
        {"close_s": 0.4, "idle_close_s": 0.1},
    ]
    row = bench_close.summary(clients.KAFKAIO, runs)
    assert row.suite == "close" and row.client == clients.KAFKAIO and row.runs == runs
    assert row.metrics == {
        "close_s": 0.4,
        "close_s_min": 0.1,
        "close_s_max": 0.5,
        "idle_close_s": 0.2,
        "idle_close_s_min": 0.1,
        "idle_close_s_max": 0.3,
    }


def test_every_library_says_what_it_does_with_its_fetch_session() -> None:
    text = bench_close.fetch_sessions(tuple(bench_close.CLIENTS))
    for library in (clients.KAFKAIO, clients.AIOKAFKA, clients.CONFLUENT, clients.JAVA):
        assert f"- {library}: " in text
    assert text.count("\n") == 3  # one line per library, not per client


def test_on_tansu_the_java_and_consumer_protocol_rows_are_left_out_with_a_note() -> None:
    from benchmarks.report import NOTES

    names = bench_close.available(tuple(bench_close.CLIENTS), None)
    assert clients.KAFKAIO in names and clients.CONFLUENT in names
    left_out = (bench_close.JAVA_CLASSIC, bench_close.JAVA_CONSUMER, bench_close.KAFKAIO_CONSUMER)
    for name in left_out:
        assert name not in names
        assert any(text.startswith(name) for text in NOTES), name


@pytest.fixture(scope="module")
def filled_topic(apache_kafka: BrokerInfo) -> str:
    topic = f"smoke-close-{uuid.uuid4().hex[:8]}"
    create_topic(apache_kafka.bootstrap, topic, 1)
    fill(apache_kafka.bootstrap, topic, "none", bench_close.RECORDS, 100, 1)
    return topic


@pytest.mark.integration
@pytest.mark.parametrize(
    "client",
    [clients.KAFKAIO, bench_close.KAFKAIO_CONSUMER, clients.AIOKAFKA, clients.CONFLUENT],
)
def test_each_python_client_reads_the_topic_and_times_a_and_b(
    apache_kafka: BrokerInfo, filled_topic: str, client: str
) -> None:
    # a member that did not read every record raises: these figures come from full reads
    metrics = bench_close.measure_close(client, apache_kafka.bootstrap, filled_topic)
    assert set(metrics) == {"close_s", "idle_close_s"}
    assert all(value > 0 for value in metrics.values())


@pytest.mark.integration
@pytest.mark.parametrize("protocol", [clients.CLASSIC, clients.CONSUMER_PROTOCOL])
def test_the_java_oracle_times_one_close_per_member(
    apache_kafka: BrokerInfo, java_clients: JavaClients, filled_topic: str, protocol: str
) -> None:
    seconds = java_clients.close_times(
        apache_kafka.bootstrap,
        filled_topic,
        f"smoke-close-{uuid.uuid4().hex[:8]}",
        bench_close.RECORDS,
        [0, 2],
        protocol=protocol,
    )
    assert len(seconds) == 2 and all(s > 0 for s in seconds)
