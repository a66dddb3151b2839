"""The kafkaio command line against Apache Kafka (the first test on Tansu too, the broker
of `make demo` and `kafkaio broker`): produce then consume in every output format,
keyed records on their murmur2 partitions, undeliverable records reported, consume as a
group member (commits what it printed, the next run continues, Ctrl-C commits and exits
130), topic and group commands with --json, exit codes and messages, progress on a
terminal."""

from __future__ import annotations

import base64
import json
import os
import selectors
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from kafkaio import Admin
from kafkaio.cli import main
from kafkaio.producer.murmur2 import partition_for_key
from kafkaio.testing.broker_info import BrokerInfo

pytestmark = pytest.mark.integration

KAFKAIO = [sys.executable, "-m", "kafkaio"]


def run(
    *args: str, stdin: bytes = b"", env: dict[str, str] | None = None, timeout: float = 40
) -> subprocess.CompletedProcess[str]:
    """Run `python -m kafkaio ARGS` in a subprocess (stdout and stderr are pipes)."""
    return subprocess.run(
        [*KAFKAIO, *args],
        input=stdin.decode(),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


def run_bytes(
    *args: str, stdin: bytes = b"", timeout: float = 40
) -> subprocess.CompletedProcess[bytes]:
    """`run`, with stdin, stdout and stderr as bytes."""
    return subprocess.run(
        [*KAFKAIO, *args], input=stdin, capture_output=True, timeout=timeout, check=False
    )


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the CLI in this process; returns (exit code, stdout, stderr)."""
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def topic(broker: BrokerInfo, unique_topic: str, capsys: pytest.CaptureFixture[str]) -> str:
    code, _, err = cli(capsys, "-b", broker.bootstrap, "topics", "create", unique_topic, "-p", "2")
    assert code == 0, err
    return unique_topic


@pytest.mark.parametrize("broker", ["kafka", "tansu"], indirect=True)
def test_produce_then_consume_in_every_format(
    broker: BrokerInfo, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [f"key{i}:value {i}" for i in range(20)]
    produced = run(
        "produce",
        topic,
        "-K",
        ":",
        "-H",
        "source=cli",
        "-z",
        "lz4",
        "-b",
        broker.bootstrap,
        stdin="\n".join(lines).encode() + b"\n",
    )
    assert produced.returncode == 0, produced.stderr
    assert produced.stdout == ""  # piped: quiet
    assert f"produced 20 records to {topic}" in produced.stderr
    b = ("-b", broker.bootstrap)

    code, out, err = cli(capsys, *b, "consume", topic, "--from-beginning", "-e", "-K", "=")
    assert code == 0, err
    assert sorted(out.splitlines()) == sorted(f"key{i}=value {i}" for i in range(20))

    code, out, _ = cli(capsys, *b, "consume", topic, "--from-beginning", "-e", "--format", "json")
    records = [json.loads(line) for line in out.splitlines()]
    assert sorted((r["key"], r["value"]) for r in records) == sorted(
        (f"key{i}", f"value {i}") for i in range(20)
    )
    assert all(r["topic"] == topic and r["headers"] == [["source", "cli"]] for r in records)
    assert {r["partition"] for r in records} == {0, 1}  # keys spread over both partitions

    template = "{partition}|{offset}|{key}|{value}|{headers}"
    code, out, _ = cli(
        capsys, *b, "consume", topic, "--from-beginning", "-c", "5", "--template", template
    )
    assert code == 0 and len(out.splitlines()) == 5
    for line in out.splitlines():
        partition, offset, key, value, headers = line.split("|")
        assert value == "value " + key.removeprefix("key") and headers == "source=cli"
        assert partition in ("0", "1") and int(offset) >= 0

    code, out, _ = cli(capsys, *b, "consume", topic, "-p", "0", "--offset", "1", "-e")
    by_partition = [r for r in records if r["partition"] == 0]
    assert out.splitlines() == [r["value"] for r in by_partition[1:]]


def test_json_lines_input_and_partition(
    broker: BrokerInfo, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    data = b'{"key": "a", "value": {"n": 1}}\n{"value": "plain", "headers": {"h": "1"}}\n'
    produced = run(
        "produce", topic, "--format", "json", "-p", "1", "-b", broker.bootstrap, stdin=data
    )
    assert produced.returncode == 0, produced.stderr
    code, out, _ = cli(
        capsys,
        "-b",
        broker.bootstrap,
        "consume",
        topic,
        "-p",
        "1",
        "--from-beginning",
        "-e",
        "--format",
        "json",
    )
    got = [json.loads(line) for line in out.splitlines()]
    assert [(r["key"], r["value"], r["headers"]) for r in got] == [
        ("a", '{"n": 1}', []),
        (None, "plain", [["h", "1"]]),
    ]


def test_binary_keys_and_values_round_trip(
    broker: BrokerInfo, topic: str, tmp_path: os.PathLike[str]
) -> None:
    """As kcat: raw and template output carry the bytes as they are; JSON carries non-UTF-8
    bytes as {"base64": ...} and UTF-8 text as text."""
    b = ("-b", broker.bootstrap)
    value = b"\xff\xfe\x00\x01binary\x80"
    path = os.path.join(tmp_path, "in.bin")
    with open(path, "wb") as f:
        f.write(b"k\xc3:" + value + b"\n" + "ключ:текст ✓\n".encode())
    produced = run_bytes(*b, "produce", topic, "-p", "0", "-K", ":", "-f", path)
    assert produced.returncode == 0, produced.stderr
    consume = (*b, "consume", topic, "--from-beginning", "-e")
    done = run_bytes(*consume)
    assert done.returncode == 0, done.stderr
    assert done.stdout == value + b"\n" + "текст ✓\n".encode()
    done = run_bytes(*consume, "-K", "=")
    assert done.stdout == b"k\xc3=" + value + b"\n" + "ключ=текст ✓\n".encode()
    done = run_bytes(*consume, "--template", "{offset} {key}|{value}")
    assert done.stdout == b"0 k\xc3|" + value + b"\n" + "1 ключ|текст ✓\n".encode()
    done = run_bytes(*consume, "--format", "json")
    first, second = (json.loads(line) for line in done.stdout.splitlines())
    assert base64.b64decode(first["value"]["base64"]) == value
    assert base64.b64decode(first["key"]["base64"]) == b"k\xc3"
    assert (second["key"], second["value"]) == ("ключ", "текст ✓")


def test_json_output_keeps_repeated_header_keys(broker: BrokerInfo, topic: str) -> None:
    """Headers are an ordered list whose keys may repeat (kcat -J prints them all)."""
    b = ("-b", broker.bootstrap)
    headers = ("-H", "trace=a", "-H", "trace=b", "-H", "other=c")
    produced = run(*b, "produce", topic, "-p", "0", *headers, stdin=b"hello\n")
    assert produced.returncode == 0, produced.stderr
    consumed = run(*b, "consume", topic, "-p", "0", "--from-beginning", "-e", "--format", "json")
    assert consumed.returncode == 0, consumed.stderr
    record = json.loads(consumed.stdout)
    assert record["headers"] == [["trace", "a"], ["trace", "b"], ["other", "c"]]
    # the list form is what `produce --format json` reads back
    again = run(*b, "produce", topic, "--format", "json", stdin=consumed.stdout.encode())
    assert again.returncode == 0, again.stderr
    consumed = run(*b, "consume", topic, "-p", "0", "-o", "1", "-e", "--format", "json")
    assert json.loads(consumed.stdout)["headers"] == record["headers"]


def _json_records(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def _committed(bootstrap: str, group: str) -> dict[int, int | None]:
    """The group's committed offsets by partition, read with the Admin client."""

    async def fetch() -> dict[int, int | None]:
        with anyio.fail_after(20):
            async with Admin(bootstrap) as admin:
                offsets = await admin.list_group_offsets(group)
        return {tp.partition: c.offset for tp, c in offsets.items()}

    return anyio.run(fetch)


def test_keyed_lines_land_on_murmur2_partitions(
    broker: BrokerInfo, unique_topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    b = ("-b", broker.bootstrap)
    assert cli(capsys, *b, "topics", "create", unique_topic, "-p", "3")[0] == 0
    lines = "".join(f"user-{i}:event {i}\n" for i in range(60)).encode()
    produced = run("produce", unique_topic, "-K", ":", *b, stdin=lines)
    assert produced.returncode == 0, produced.stderr
    assert f"produced 60 records to {unique_topic} (3 of 3 partitions)" in produced.stderr
    code, out, err = cli(
        capsys, *b, "consume", unique_topic, "--from-beginning", "-e", "--format", "json"
    )
    assert code == 0, err
    records = _json_records(out)
    assert sorted(r["value"] for r in records) == sorted(f"event {i}" for i in range(60))
    for r in records:  # the Java client's partition for the key
        assert r["partition"] == partition_for_key(r["key"].encode(), 3), r
    for partition in range(3):  # and in the order the lines came, within a partition
        values = [int(r["value"].split()[1]) for r in records if r["partition"] == partition]
        assert values == sorted(values)


def test_produce_reports_records_it_could_not_deliver(
    broker: BrokerInfo,
    topic: str,
    tmp_path: os.PathLike[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = os.path.join(tmp_path, "in.txt")
    with open(path, "wb") as f:  # line 2 is over max_request_size (1 MiB)
        f.write(b"small 1\n" + b"x" * (1024 * 1024 + 10) + b"\nsmall 3\n")
    b = ("-b", broker.bootstrap)
    code, _, err = cli(capsys, *b, "produce", topic, "-p", "0", "-f", path)
    assert code == 1, err
    assert f"produced 2 records to {topic}" in err and "1 of 3 NOT delivered" in err
    assert "input line 2:" in err and "max_request_size" in err
    assert "input line 1" not in err and "input line 3" not in err
    code, out, _ = cli(capsys, *b, "consume", topic, "-p", "0", "--from-beginning", "-e")
    assert out.splitlines() == ["small 1", "small 3"]


def test_produce_counts_records_the_broker_rejects(
    isolated_mock_cluster: BrokerInfo, unique_topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = isolated_mock_cluster.cluster
    assert cluster is not None
    cluster.create_topic(unique_topic, 1)
    cluster.push_request_errors(0, [87] * 20)  # Produce: INVALID_RECORD, not retriable
    lines = "".join(f"r{i}\n" for i in range(10)).encode()
    env = {"KAFKAIO_BOOTSTRAP_SERVERS": isolated_mock_cluster.bootstrap}
    produced = run("produce", unique_topic, stdin=lines, env=env)
    assert produced.returncode == 1, produced.stderr
    assert "produced 0 records" in produced.stderr
    assert "10 of 10 NOT delivered" in produced.stderr and "INVALID_RECORD" in produced.stderr
    assert produced.stderr.count("input line ") == 10  # every record accounted for


def test_consume_as_group_commits_what_it_printed_and_the_next_run_continues(
    broker: BrokerInfo, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    b = ("-b", broker.bootstrap)
    group = topic + "-members"
    lines = "".join(f"k{i}:v{i}\n" for i in range(30)).encode()
    assert run("produce", topic, "-K", ":", *b, stdin=lines).returncode == 0
    code, out, _ = cli(capsys, *b, "consume", topic, "--from-beginning", "-e", "--format", "json")
    every = {(r["partition"], r["offset"]) for r in _json_records(out)}
    per_partition = Counter(p for p, _ in every)
    assert len(every) == 30 and set(per_partition) == {0, 1}

    code, out, err = cli(
        capsys,
        *b,
        "consume",
        topic,
        "-g",
        group,
        "--from-beginning",
        "-c",
        "11",
        "--format",
        "json",
    )
    assert code == 0, err
    first = [(r["partition"], r["offset"]) for r in _json_records(out)]
    assert len(first) == 11
    expected = {p: 1 + max((o for q, o in first if q == p), default=-1) for p in (0, 1)}
    assert _committed(broker.bootstrap, group) == expected  # exactly what was printed

    code, out, err = cli(capsys, *b, "consume", topic, "-g", group, "-e", "--format", "json")
    assert code == 0, err
    second = [(r["partition"], r["offset"]) for r in _json_records(out)]
    assert len(first) + len(second) == 30  # no duplicate...
    assert set(first) | set(second) == every  # ...and no gap
    assert _committed(broker.bootstrap, group) == dict(per_partition)


def _read_lines(process: subprocess.Popen[bytes], count: int, timeout: float) -> list[bytes]:
    """`count` lines of the process's stdout, failing after `timeout` seconds."""
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    data = b""
    deadline = time.monotonic() + timeout
    while data.count(b"\n") < count:
        left = deadline - time.monotonic()
        assert left > 0, f"only {len(data.splitlines())} of {count} lines within {timeout} s"
        if selector.select(left):
            chunk = os.read(process.stdout.fileno(), 65536)
            assert chunk, "stdout closed early"
            data += chunk
    return data.splitlines()


def test_ctrl_c_commits_what_was_printed_and_exits_130(broker: BrokerInfo, topic: str) -> None:
    b = ("-b", broker.bootstrap)
    group = topic + "-interrupted"
    lines = "".join(f"k{i}:v{i}\n" for i in range(12)).encode()
    assert run("produce", topic, "-K", ":", *b, stdin=lines).returncode == 0
    process = subprocess.Popen(
        [
            *KAFKAIO,
            *b,
            "consume",
            topic,
            "-g",
            group,
            "--from-beginning",
            "--format",
            "json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        printed = [json.loads(line) for line in _read_lines(process, 12, 30)]
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert process.returncode == 130, err
    assert b"interrupted" in err and b"Traceback" not in err
    counts = Counter(r["partition"] for r in printed)
    assert _committed(broker.bootstrap, group) == {p: counts.get(p, 0) for p in (0, 1)}


def test_ctrl_c_while_produce_waits_for_stdin_produces_what_was_read_and_exits_130(
    broker: BrokerInfo, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """As kcat -P: Ctrl-C stops reading an open stdin; the lines read are still produced."""
    b = ("-b", broker.bootstrap)
    process = subprocess.Popen(
        [*KAFKAIO, *b, "produce", topic, "-p", "1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stdin is not None
        process.stdin.write(b"a\nb\nunfinished")
        process.stdin.flush()
        time.sleep(3)  # the interpreter is up and waits for more input
        process.send_signal(signal.SIGINT)
        try:
            code = process.wait(15)
        except subprocess.TimeoutExpired:
            pytest.fail("`kafkaio produce` ignored Ctrl-C while reading stdin")
        assert process.stderr is not None
        err = process.stderr.read().decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
    assert code == 130, err
    assert f"produced 2 records to {topic}" in err and "interrupted" in err, err
    assert "Traceback" not in err and "Fatal" not in err, err
    code, out, _ = cli(capsys, *b, "consume", topic, "-p", "1", "--from-beginning", "-e")
    assert out.splitlines() == ["a", "b"]  # the unfinished last line is not produced


def test_topics_commands_with_json(
    broker: BrokerInfo, unique_topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    b = ("-b", broker.bootstrap)
    code, _, err = cli(
        capsys, *b, "topics", "create", unique_topic, "-p", "3", "-c", "retention.ms=60000"
    )
    assert code == 0 and f"created topic {unique_topic}" in err
    code, _, err = cli(capsys, *b, "topics", "create", unique_topic)
    assert code == 1 and "TOPIC_ALREADY_EXISTS" in err and "Traceback" not in err
    assert cli(capsys, *b, "topics", "create", unique_topic, "--if-not-exists")[0] == 0

    code, out, _ = cli(capsys, *b, "topics", "list", "--json")
    assert code == 0 and unique_topic in json.loads(out)
    code, out, _ = cli(capsys, *b, "topics", "describe", unique_topic, "--configs", "--json")
    described = json.loads(out)[unique_topic]
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    assert described["configs"]["retention.ms"] == "60000"
    assert described["topic_id"]

    code, out, err = cli(capsys, *b, "topics", "describe", unique_topic + "-nope")
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err and "Traceback" not in err
    code, out, _ = cli(capsys, *b, "topics", "delete", unique_topic, "--json")
    assert code == 0 and json.loads(out) == {unique_topic: {"error": None}}
    code, out, _ = cli(capsys, *b, "topics", "list", "--json")
    assert unique_topic not in json.loads(out)


def test_the_next_command_sees_a_topic_created_or_deleted(
    broker: BrokerInfo, unique_topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Apache Kafka's brokers show a new or deleted topic a moment after CreateTopics or
    DeleteTopics has answered: `topics create` and `topics delete` return once they do."""
    b = ("-b", broker.bootstrap)
    for n in range(8):
        name = f"{unique_topic}-{n}"
        assert cli(capsys, *b, "topics", "create", name, "-p", "2")[0] == 0
        code, out, err = cli(capsys, *b, "topics", "describe", name, "--json")
        assert code == 0, err
        assert [p["partition"] for p in json.loads(out)[name]["partitions"]] == [0, 1]
        assert cli(capsys, *b, "topics", "delete", name)[0] == 0
        code, out, _ = cli(capsys, *b, "topics", "list", "--json")
        assert code == 0 and name not in json.loads(out)


def test_groups_commands_with_json(
    broker: BrokerInfo, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    b = ("-b", broker.bootstrap)
    group = topic + "-g"
    assert run("produce", topic, "-p", "0", *b, stdin=b"a\nb\nc\nd\n").returncode == 0
    # Consuming with a group commits the positions reached.
    code, out, _ = cli(capsys, *b, "consume", topic, "-g", group, "--from-beginning", "-c", "3")
    assert code == 0 and out.splitlines() == ["a", "b", "c"]

    code, out, _ = cli(capsys, *b, "groups", "lag", group, "--json")
    lag = json.loads(out)
    committed = {p["partition"]: p["committed"] for p in lag["partitions"]}
    assert committed[0] == 3
    for p in lag["partitions"]:
        assert p["lag"] == max(p["end_offset"] - p["committed"], 0)
        assert p["topic"] == topic

    code, out, _ = cli(capsys, *b, "groups", "list", "--json")
    assert group in [g["group_id"] for g in json.loads(out)]
    code, out, _ = cli(capsys, *b, "groups", "describe", group, "--json")
    assert json.loads(out)[group]["error"] is None

    reset = ("groups", "reset-offsets", group, "--topic", f"{topic}:0", "--to-earliest")
    code, out, err = cli(capsys, *b, *reset, "--json")
    plan = json.loads(out)
    assert plan["executed"] is False and plan["plan"][0]["current"] == 3
    assert plan["plan"][0]["new"] == 0
    code, out, _ = cli(capsys, *b, "groups", "lag", group, "--json")
    assert {p["partition"]: p["committed"] for p in json.loads(out)["partitions"]}[0] == 3

    code, out, _ = cli(capsys, *b, *reset, "--execute", "--json")
    assert code == 0 and json.loads(out)["plan"][0]["error"] is None
    code, out, _ = cli(capsys, *b, "consume", topic, "-g", group, "-c", "2")
    assert out.splitlines() == ["a", "b"]  # starts again from the reset offset

    code, out, _ = cli(capsys, *b, "groups", "delete", group, "--json")
    assert code == 0 and json.loads(out) == {group: {"error": None}}


def test_groups_lag_of_a_group_that_does_not_exist(
    broker: BrokerInfo, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """OffsetFetch answers an unknown group with no partitions, as it answers a group with no
    committed offsets: `groups lag` tells them apart (it printed an empty table, exit 0)."""
    b = ("-b", broker.bootstrap)
    code, out, err = cli(capsys, *b, "groups", "lag", topic + "-no-such-group")
    assert code == 1 and out == ""
    assert f"group '{topic}-no-such-group' does not exist" in err


def test_cluster_json(broker: BrokerInfo, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "cluster", "--json", "-b", broker.bootstrap)
    described = json.loads(out)
    port = int(broker.bootstrap.rsplit(":", 1)[1])
    assert code == 0 and [b["port"] for b in described["brokers"]] == [port]
    assert described["cluster_id"]


def test_bootstrap_from_environment_and_bench(broker: BrokerInfo) -> None:
    done = run(
        "bench",
        "-n",
        "3000",
        "-s",
        "50",
        "--json",
        env={"KAFKAIO_BOOTSTRAP_SERVERS": broker.bootstrap},
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["records"] == 3000 and result["produce_records_per_s"] > 0
    assert result["consume_records_per_s"] > 0


def test_errors_exit_codes_and_messages(broker: BrokerInfo, unique_topic: str) -> None:
    bad = run("-b", "127.0.0.1:1", "--timeout-ms", "1500", "topics", "list")
    assert bad.returncode == 1
    assert "could not connect" in bad.stderr and "Traceback" not in bad.stderr
    debug = run("-b", "127.0.0.1:1", "--timeout-ms", "500", "--debug", "cluster")
    assert debug.returncode == 1 and "Traceback" in debug.stderr

    missing = run("consume", unique_topic, "-e", "-b", broker.bootstrap)
    assert missing.returncode == 1
    assert f"topic '{unique_topic}' does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr
    usage = run("groups", "reset-offsets", "g", "--topic", "t", "--to-offset", "x")
    assert usage.returncode == 2 and "invalid int value" in usage.stderr


def test_empty_key_separator_is_a_usage_error(broker: BrokerInfo, topic: str) -> None:
    done = run("-b", broker.bootstrap, "produce", topic, "-K", "", stdin=b"k:v\n")
    assert done.returncode == 2, done.stderr
    assert done.stderr == "kafkaio: error: -K/--key-separator must not be empty\n"


@pytest.mark.parametrize("command", [("consume", "t", "-e"), ("topics", "list")])
def test_unreachable_broker_error_is_one_line_without_debug(command: tuple[str, ...]) -> None:
    """Client logs (retry warnings) only with --debug; otherwise the error is one line."""
    done = run("-b", "127.0.0.1:1", "--timeout-ms", "1500", *command)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafkaio: error:"), lines
    debug = run("-b", "127.0.0.1:1", "--timeout-ms", "1500", "--debug", *command)
    assert debug.returncode == 1 and "WARNING:kafkaio" in debug.stderr, debug.stderr


def test_progress_bar_on_a_terminal_and_quiet_when_piped(
    broker: BrokerInfo, topic: str, tmp_path: os.PathLike[str]
) -> None:
    data = os.path.join(tmp_path, "lines.txt")
    with open(data, "w") as f:
        f.write("".join(f"line {i}\n" for i in range(5000)))
    command = shlex.join([*KAFKAIO, "-b", broker.bootstrap, "produce", topic, "-f", data])
    tty = subprocess.run(
        ["script", "-qec", command, "/dev/null"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    screen = tty.stdout.decode()  # bytes: text mode would turn the bar's \r into \n
    assert tty.returncode == 0, screen
    assert "\r[" in screen and "5,000/5,000" in screen and "msg/s" in screen
    piped = run("-b", broker.bootstrap, "produce", topic, "-f", data)
    assert piped.returncode == 0 and piped.stdout == ""
    assert "produced 5000 records" in piped.stderr


@pytest.fixture
def broker_process() -> Iterator[tuple[subprocess.Popen[str], str]]:
    process = subprocess.Popen(
        [*KAFKAIO, "broker"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        bootstrap = process.stdout.readline().strip()
        yield process, bootstrap
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def test_broker_command_runs_until_interrupted(
    broker_process: tuple[subprocess.Popen[str], str],
) -> None:
    process, bootstrap = broker_process
    assert bootstrap.startswith("127.0.0.1:")
    described = run("cluster", "--json", "-b", bootstrap)
    assert described.returncode == 0, described.stderr
    assert json.loads(described.stdout)["brokers"][0]["port"] == int(bootstrap.split(":")[1])
    process.send_signal(signal.SIGINT)
    assert process.wait(15) == 0
    assert process.stderr is not None and "broker stopped" in process.stderr.read()
