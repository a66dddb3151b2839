"""The kafkaio command line against Tansu: produce then consume in every output format,
topic and group commands with --json, exit codes and messages, progress on a terminal."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from kafkaio.cli import main
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


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the CLI in this process; returns (exit code, stdout, stderr)."""
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def topic(tansu_broker: BrokerInfo, unique_topic: str, capsys: pytest.CaptureFixture[str]) -> str:
    code, _, err = cli(
        capsys, "-b", tansu_broker.bootstrap, "topics", "create", unique_topic, "-p", "2"
    )
    assert code == 0, err
    return unique_topic


def test_produce_then_consume_in_every_format(
    tansu_broker: BrokerInfo, topic: str, capsys: pytest.CaptureFixture[str]
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
        tansu_broker.bootstrap,
        stdin="\n".join(lines).encode() + b"\n",
    )
    assert produced.returncode == 0, produced.stderr
    assert produced.stdout == ""  # piped: quiet
    assert f"produced 20 records to {topic}" in produced.stderr
    b = ("-b", tansu_broker.bootstrap)

    code, out, err = cli(capsys, *b, "consume", topic, "--from-beginning", "-e", "-K", "=")
    assert code == 0, err
    assert sorted(out.splitlines()) == sorted(f"key{i}=value {i}" for i in range(20))

    code, out, _ = cli(capsys, *b, "consume", topic, "--from-beginning", "-e", "--format", "json")
    records = [json.loads(line) for line in out.splitlines()]
    assert sorted((r["key"], r["value"]) for r in records) == sorted(
        (f"key{i}", f"value {i}") for i in range(20)
    )
    assert all(r["topic"] == topic and r["headers"] == {"source": "cli"} for r in records)
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
    tansu_broker: BrokerInfo, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    data = b'{"key": "a", "value": {"n": 1}}\n{"value": "plain", "headers": {"h": "1"}}\n'
    produced = run(
        "produce", topic, "--format", "json", "-p", "1", "-b", tansu_broker.bootstrap, stdin=data
    )
    assert produced.returncode == 0, produced.stderr
    code, out, _ = cli(
        capsys,
        "-b",
        tansu_broker.bootstrap,
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
        ("a", '{"n": 1}', {}),
        (None, "plain", {"h": "1"}),
    ]


def test_topics_commands_with_json(
    tansu_broker: BrokerInfo, unique_topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    b = ("-b", tansu_broker.bootstrap)
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


def test_groups_commands_with_json(
    tansu_broker: BrokerInfo, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    b = ("-b", tansu_broker.bootstrap)
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


def test_cluster_json(tansu_broker: BrokerInfo, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "cluster", "--json", "-b", tansu_broker.bootstrap)
    described = json.loads(out)
    port = int(tansu_broker.bootstrap.rsplit(":", 1)[1])
    assert code == 0 and [b["port"] for b in described["brokers"]] == [port]
    assert described["cluster_id"]


def test_bootstrap_from_environment_and_bench(tansu_broker: BrokerInfo) -> None:
    done = run(
        "bench",
        "-n",
        "3000",
        "-s",
        "50",
        "--json",
        env={"KAFKAIO_BOOTSTRAP_SERVERS": tansu_broker.bootstrap},
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["records"] == 3000 and result["produce_records_per_s"] > 0
    assert result["consume_records_per_s"] > 0


def test_errors_exit_codes_and_messages(tansu_broker: BrokerInfo, unique_topic: str) -> None:
    bad = run("-b", "127.0.0.1:1", "--timeout-ms", "1500", "topics", "list")
    assert bad.returncode == 1
    assert "could not connect" in bad.stderr and "Traceback" not in bad.stderr
    debug = run("-b", "127.0.0.1:1", "--timeout-ms", "500", "--debug", "cluster")
    assert debug.returncode == 1 and "Traceback" in debug.stderr

    missing = run("consume", unique_topic, "-e", "-b", tansu_broker.bootstrap)
    assert missing.returncode == 1
    assert f"topic '{unique_topic}' does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr
    usage = run("groups", "reset-offsets", "g", "--topic", "t", "--to-offset", "x")
    assert usage.returncode == 2 and "invalid int value" in usage.stderr


def test_progress_bar_on_a_terminal_and_quiet_when_piped(
    tansu_broker: BrokerInfo, topic: str, tmp_path: os.PathLike[str]
) -> None:
    data = os.path.join(tmp_path, "lines.txt")
    with open(data, "w") as f:
        f.write("".join(f"line {i}\n" for i in range(5000)))
    command = shlex.join([*KAFKAIO, "-b", tansu_broker.bootstrap, "produce", topic, "-f", data])
    tty = subprocess.run(
        ["script", "-qec", command, "/dev/null"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    screen = tty.stdout.decode()  # bytes: text mode would turn the bar's \r into \n
    assert tty.returncode == 0, screen
    assert "\r[" in screen and "5,000/5,000" in screen and "msg/s" in screen
    piped = run("-b", tansu_broker.bootstrap, "produce", topic, "-f", data)
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
