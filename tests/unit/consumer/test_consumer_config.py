"""Consumer construction: options validated up front, unknown names rejected with a hint,
group options (subscribe needs a group id, assignment strategies by name or object)."""

from __future__ import annotations

import re

import pytest

from kafkaio import Admin, Consumer, Producer, TopicPartition
from kafkaio.consumer import ConsumerGroupMetadata
from kafkaio.errors import InvalidTopicError, KafkaConfigError, KafkaError


def test_defaults_follow_java_and_aiokafka() -> None:
    c = Consumer(bootstrap_servers="localhost:1").config
    assert (c.fetch_min_bytes, c.fetch_max_bytes, c.fetch_max_wait_ms) == (1, 52428800, 500)
    assert (c.max_partition_fetch_bytes, c.auto_offset_reset, c.isolation_level) == (
        1048576,
        "latest",
        "read_uncommitted",
    )
    assert (c.enable_auto_commit, c.auto_commit_interval_ms, c.session_timeout_ms) == (
        True,
        5000,
        45000,
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"auto_offset_reset": "smallest"}, "auto_offset_reset"),
        ({"isolation_level": "committed"}, "isolation_level"),
        ({"fetch_max_bytes": 0}, "fetch_max_bytes"),
        ({"max_poll_records": 0}, "max_poll_records"),
        ({"fetch_max_wait_ms": 40_000}, "request_timeout_ms"),
        ({"heartbeat_interval_ms": 50_000}, "session_timeout_ms"),
        ({"value_deserializer": "utf-8"}, "value_deserializer"),
        ({"fetch_max_wait": 100}, "did you mean 'fetch_max_wait_ms'"),
        ({"request_timeout_ms": 0}, "request_timeout_ms"),
    ],
)
def test_invalid_options_raise_at_construction(options: dict[str, object], message: str) -> None:
    with pytest.raises(KafkaConfigError, match=message):
        Consumer(bootstrap_servers="localhost:1", **options)


def test_subscribe_needs_a_group_id() -> None:
    with pytest.raises(KafkaConfigError, match="needs a group_id"):
        Consumer("topic", bootstrap_servers="localhost:1")
    consumer = Consumer(bootstrap_servers="localhost:1")
    with pytest.raises(KafkaConfigError, match="needs a group_id"):
        consumer.subscribe(["topic"])


def test_subscribe_with_a_group_sets_topics_or_pattern() -> None:
    consumer = Consumer("a", "b", bootstrap_servers="localhost:1", group_id="g")
    assert consumer.subscription() == {"a", "b"}
    consumer.subscribe("c")  # a single name is one topic, not its letters
    assert consumer.subscription() == {"c"}
    with pytest.raises(KafkaError, match="cannot be mixed"):
        consumer.assign([TopicPartition("c", 0)])
    with pytest.raises(KafkaConfigError, match="not both"):
        consumer.subscribe(["a"], pattern="a.*")
    with pytest.raises(KafkaConfigError, match="needs topics or a pattern"):
        consumer.subscribe([])
    other = Consumer(bootstrap_servers="localhost:1", group_id="g")
    with pytest.raises(KafkaConfigError, match="invalid"):
        other.subscribe(pattern="(")
    with pytest.raises(KafkaConfigError, match="RebalanceListener"):
        other.subscribe(["a"], listener=object())  # type: ignore[arg-type]


def test_assignment_strategy_accepts_names_objects_and_classes() -> None:
    from kafkaio.consumer import RangeAssignor, RoundRobinAssignor, StickyAssignor

    config = Consumer(
        bootstrap_servers="localhost:1",
        group_id="g",
        partition_assignment_strategy=["sticky", RoundRobinAssignor(), RangeAssignor],
    ).config
    made = config.assignors()
    assert [type(a) for a in made] == [StickyAssignor, RoundRobinAssignor, RangeAssignor]
    assert [type(a) for a in Consumer(bootstrap_servers="x:1").config.assignors()] == [
        RangeAssignor
    ]
    single = Consumer(bootstrap_servers="x:1", partition_assignment_strategy="roundrobin")
    assert [a.name for a in single.config.assignors()] == ["roundrobin"]
    with pytest.raises(KafkaConfigError, match="unknown partition assignment strategy"):
        Consumer(bootstrap_servers="x:1", partition_assignment_strategy=["fair"])
    with pytest.raises(KafkaConfigError, match="neither a known name"):
        Consumer(bootstrap_servers="x:1", partition_assignment_strategy=[42])


async def test_group_calls_need_a_group_id() -> None:
    consumer = Consumer(bootstrap_servers="localhost:1")
    with pytest.raises(KafkaConfigError, match="needs a group_id"):
        consumer.group_metadata()
    metadata = Consumer(bootstrap_servers="x:1", group_id="g", group_instance_id="i1")
    assert metadata.group_metadata() == ConsumerGroupMetadata("g", -1, "", "i1")


def test_sync_calls_work_before_start() -> None:
    consumer = Consumer(bootstrap_servers="localhost:1")
    tps = [TopicPartition("a", 0), TopicPartition("a", 1)]
    consumer.assign(tps)
    assert consumer.assignment() == set(tps)
    consumer.pause(tps[0])
    assert consumer.paused() == {tps[0]}
    consumer.seek(tps[1], 5)
    assert consumer.highwater(tps[1]) is None and consumer.lag(tps[1]) is None
    with pytest.raises(KafkaConfigError):
        consumer.seek(tps[1], -1)


async def test_calls_needing_the_network_task_fail_before_start() -> None:
    consumer = Consumer(bootstrap_servers="localhost:1")
    with pytest.raises(KafkaError, match="not started"):
        await consumer.getmany()



@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"max_records": 0}, "max_records must be None or an int >= 1, got 0"),
        ({"max_records": -1}, "max_records must be None or an int >= 1, got -1"),
        ({"max_records": 2.5}, "max_records must be None or an int >= 1"),
        ({"max_records": "3"}, "max_records must be None or an int >= 1"),
        ({"max_records": True}, "max_records must be None or an int >= 1"),
        ({"timeout_ms": -5}, "timeout_ms must be a number >= 0, got -5"),
        ({"timeout_ms": "100"}, "timeout_ms must be a number >= 0"),
        ({"timeout_ms": float("nan")}, "timeout_ms must be a number >= 0"),
    ],
    ids=repr,
)
async def test_getmany_refuses_a_record_limit_or_wait_it_cannot_honour(
    arguments: dict[str, object], message: str
) -> None:
    # max_records=0 (or less) returned {} on every call, even with records fetched, so a
    # poll loop spun without a record and without an error; a str raised a bare TypeError
    consumer = Consumer(bootstrap_servers="localhost:1")
    with pytest.raises(KafkaConfigError, match=re.escape(f"getmany() {message}")):
        await consumer.getmany(**arguments)  # type: ignore[arg-type]


async def test_calls_that_choose_what_to_consume_fail_after_close() -> None:
    consumer = Consumer(bootstrap_servers="localhost:1", group_id="g")
    tp = TopicPartition("a", 0)
    consumer.assign([tp])
    await consumer.close()
    calls = {
        "assign()": lambda: consumer.assign([tp]),
        "subscribe()": lambda: consumer.subscribe(["a"]),
        "seek()": lambda: consumer.seek(tp, 1),
        "pause()": lambda: consumer.pause(tp),
        "resume()": lambda: consumer.resume(tp),
    }
    for name, call in calls.items():
        with pytest.raises(KafkaError, match=rf"{name[:-2]}\(\): the consumer is closed"):
            call()
    with pytest.raises(KafkaError, match="closed"):
        await consumer.getmany()


BOOLEAN_OPTIONS = (
    "enable_auto_commit",
    "check_crcs",
    "exclude_internal_topics",
    "allow_auto_create_topics",
    "ssl_check_hostname",
    "metrics_enabled",
)


@pytest.mark.parametrize("value", ["false", "true", 0, 1, None])
@pytest.mark.parametrize("option", BOOLEAN_OPTIONS)
def test_every_boolean_option_refuses_a_non_bool(option: str, value: object) -> None:
    # enable_auto_commit="false" turned auto-commit ON (a non-empty str is truthy)
    with pytest.raises(KafkaConfigError, match=f"{option} must be True or False"):
        Consumer(bootstrap_servers="localhost:1", group_id="g", **{option: value})


@pytest.mark.parametrize("value", ["yes", 1])
def test_producer_boolean_options_refuse_a_non_bool(value: object) -> None:
    for option in ("enable_idempotence", "ssl_check_hostname", "metrics_enabled"):
        with pytest.raises(KafkaConfigError, match=f"{option} must be True or False"):
            Producer("localhost:1", **{option: value})


@pytest.mark.parametrize(
    "topics", [["a/b"], ["x" * 300], [""], ["ok", ".."], "with space"], ids=repr
)
def test_subscribe_refuses_an_illegal_topic_name(topics: object) -> None:
    # getmany returned {} forever, with no error (Java's poll raises InvalidTopicException)
    consumer = Consumer(bootstrap_servers="localhost:1", group_id="g")
    with pytest.raises(InvalidTopicError, match="is illegal"):
        consumer.subscribe(topics)  # type: ignore[arg-type]
    with pytest.raises(InvalidTopicError, match="is illegal"):
        Consumer(*([topics] if isinstance(topics, str) else topics), group_id="g")  # type: ignore[arg-type]
    assert consumer.subscription() == set()


@pytest.mark.parametrize(
    ("partition", "error"),
    [
        (TopicPartition("a/b", 0), InvalidTopicError),
        (TopicPartition("t", "0"), KafkaConfigError),  # type: ignore[arg-type]
        (("t", -1), KafkaConfigError),
        (("t", 1.0), KafkaConfigError),
    ],
)
def test_assign_refuses_illegal_partitions(partition: object, error: type[Exception]) -> None:
    consumer = Consumer(bootstrap_servers="localhost:1")
    with pytest.raises(error):
        consumer.assign([partition])  # type: ignore[list-item]
    assert consumer.assignment() == set()


@pytest.mark.parametrize("servers", [None, 9092, ["a:1", None]])
def test_clients_refuse_bootstrap_servers_of_the_wrong_type_at_construction(
    servers: object,
) -> None:
    # bootstrap_servers=None failed at start() with "'NoneType' object is not iterable"
    for make in (
        lambda: Consumer(bootstrap_servers=servers),  # type: ignore[arg-type]
        lambda: Producer(servers),  # type: ignore[arg-type]
        lambda: Admin(servers),  # type: ignore[arg-type]
    ):
        with pytest.raises(KafkaConfigError, match="bootstrap"):
            make()
