"""tools/gen_errors.py: kafkaio/errors.py's broker error classes come from Kafka's error
table (the Java client's Errors enum), with kafkaio's advice added."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from kafkaio import errors
from kafkaio.testing.apache import find_java, jars_cached, java_major_version, kafka_home

ROOT = Path(__file__).resolve().parents[2]
if not (ROOT / "tools" / "gen_errors.py").is_file() or not (ROOT / "kafkaio" / "errors.py").is_file():
    pytest.skip(
        "the generator checks kafkaio/errors.py of a source checkout (these tests run "
        "outside one, against an installed wheel)",
        allow_module_level=True,
    )


def _load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_errors", ROOT / "tools" / "gen_errors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_errors"] = module  # dataclasses look their module up while built
    spec.loader.exec_module(module)
    return module


gen = _load_tool()

TABLE = [
    "7\tREQUEST_TIMED_OUT\ttrue\tfalse\tThe request timed out.",
    "3\tUNKNOWN_TOPIC_OR_PARTITION\ttrue\ttrue\tThis server does not host this topic-partition.",
    "13\tNETWORK_EXCEPTION\ttrue\tfalse\tThe server disconnected before a response was received.",
    "56\tKAFKA_STORAGE_ERROR\ttrue\ttrue\tDisk error when trying to access log file on the disk.",
    "200\tSOMETHING_NEW\tfalse\tfalse\tA code this test makes up, with a \"quoted\" word.",
]


def _classes(block: str) -> dict[str, type[errors.BrokerResponseError]]:
    namespace = dict(vars(errors))
    exec(compile(block, "<generated>", "exec"), namespace)
    table = namespace["_CODE_CLASSES"]
    return {cls.__name__: cls for cls in table}


def _render(table: list[gen.ErrorCode]) -> str:
    names = {e.name for e in table}
    return gen.render(table, "9.9.9", {k: v for k, v in gen.EXTRAS.items() if k in names})


def test_classes_take_codes_names_flags_and_messages_from_the_table() -> None:
    table = gen.parse_table(TABLE)
    assert [e.code for e in table] == [3, 7, 13, 56, 200]  # in code order
    classes = _classes(_render(table))
    assert list(classes) == [
        "UnknownTopicOrPartitionError",
        "RequestTimedOutError",
        "NetworkError",  # a trailing EXCEPTION / ERROR word is dropped
        "KafkaStorageError",
        "SomethingNewError",
    ]
    new = classes["SomethingNewError"]
    assert (new.code, new.name, new.retriable, new.invalid_metadata) == (
        200,
        "SOMETHING_NEW",
        False,
        False,
    )
    assert new.description == 'A code this test makes up, with a "quoted" word.'
    unknown = classes["UnknownTopicOrPartitionError"]
    assert unknown.retriable and unknown.invalid_metadata
    # kafkaio's advice follows Kafka's message; EXTRAS adds a second base class
    assert unknown.description == (
        "This server does not host this topic-partition. Refresh metadata and retry; create "
        "the topic if it does not exist."
    )
    timed_out = classes["RequestTimedOutError"]
    assert issubclass(timed_out, errors.KafkaTimeoutError) and timed_out.retriable
    with pytest.raises(errors.KafkaTimeoutError, match=r"REQUEST_TIMED_OUT \(error 7\)"):
        raise timed_out()


def test_only_the_generated_part_is_replaced() -> None:
    block = _render(gen.parse_table(TABLE))
    current = gen.ERRORS_PY.read_text(encoding="utf-8")
    head, _, rest = current.partition(gen.BEGIN)
    tail = rest[rest.index("\n", rest.index(gen.END)) + 1 :]
    assert gen.splice(current, block) == head + block + tail


def test_extras_for_a_code_the_table_lacks_are_refused() -> None:
    table = gen.parse_table(TABLE)
    with pytest.raises(SystemExit, match="EXTRAS names codes.*NOT_A_CODE"):
        gen.render(table, "9.9.9", {"NOT_A_CODE": gen.Extra(advice="Retry.")})


def _java_reason() -> str | None:
    java = find_java()
    if java is None or (java_major_version(java) or 0) < 17:
        return "Java 17+ is needed to read Kafka's error table from kafka-clients"
    if not jars_cached():
        return f"the Apache Kafka jars are not cached in {kafka_home() / 'libs'} (make kafka-jars)"
    return None


@pytest.mark.skipif(_java_reason() is not None, reason=str(_java_reason()))
def test_errors_py_is_what_the_generator_makes_from_kafkas_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert gen.main(["--check"]) == 0, capsys.readouterr().out
