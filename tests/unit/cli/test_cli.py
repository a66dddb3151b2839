"""The CLI's pure parts: input parsing, partitioning, output formats, settings files, and
exit codes / messages for usage errors (no broker needed)."""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import pytest

from kafkaio.cli import main
from kafkaio.cli.consume import formatter
from kafkaio.cli.produce import assign_partitions, parse_headers, parse_lines
from kafkaio.cli.settings import BOOTSTRAP_ENV, client_options, read_properties, resolve_bootstrap
from kafkaio.errors import KafkaConfigError
from kafkaio.producer.murmur2 import partition_for_key
from kafkaio.records import Record


def test_lines_with_key_separator_and_headers() -> None:
    records = parse_lines(
        b"k1:v1\nno-key\r\nk2:a:b\n", fmt="lines", key_separator=":", headers=[("h", b"1")]
    )
    assert [(r.key, r.value) for _, r in records] == [
        (b"k1", b"v1"),
        (None, b"no-key"),
        (b"k2", b"a:b"),
    ]
    assert all(r.headers == [("h", b"1")] for _, r in records)


def test_json_lines_input() -> None:
    data = b'{"key": "k", "value": {"x": 1}, "headers": {"a": "b"}, "partition": 2}\n\n"plain"\n'
    (p1, r1), (p2, r2) = parse_lines(data, fmt="json", key_separator=None, headers=[])
    assert (p1, r1.key, json.loads(r1.value or b""), r1.headers) == (
        2,
        b"k",
        {"x": 1},
        [("a", b"b")],
    )
    assert (p2, r2.key, r2.value) == (None, None, b"plain")  # a JSON string is the value
    with pytest.raises(KafkaConfigError, match="line 1 is not JSON"):
        parse_lines(b"{oops\n", fmt="json", key_separator=None, headers=[])


def test_headers_need_key_value() -> None:
    assert parse_headers(["a=1", "b="]) == [("a", b"1"), ("b", b"")]
    with pytest.raises(KafkaConfigError, match="KEY=VALUE"):
        parse_headers(["nope"])


def test_partitioning_fixed_explicit_keyed_and_round_robin() -> None:
    records = parse_lines(b"a:1\nb:2\n", fmt="lines", key_separator=":", headers=[])
    by_key = assign_partitions(records, 5, None)
    assert sum(len(v) for v in by_key.values()) == 2
    for p, items in by_key.items():
        assert all(partition_for_key(r.key or b"", 5) == p for r in items)
    assert list(assign_partitions(records, 5, 3)) == [3]
    unkeyed = parse_lines(b"x\n" * 2500, fmt="lines", key_separator=None, headers=[])
    spread = assign_partitions(unkeyed, 2, None)
    assert {p: len(v) for p, v in spread.items()} == {0: 1500, 1: 1000}


def _record() -> Record:
    return Record(7, 1234, b"k", b"v\xff", [("h", b"x")])


def test_output_formats() -> None:
    r = _record()
    assert formatter("raw", None, None)("t", 1, r) == "v\\xff"
    assert formatter("raw", None, "=")("t", 1, r) == "k=v\\xff"
    as_json = json.loads(formatter("json", None, None)("t", 1, r))
    assert as_json == {
        "topic": "t",
        "partition": 1,
        "offset": 7,
        "timestamp": 1234,
        "key": "k",
        "value": "v\\xff",
        "headers": {"h": "x"},
    }
    assert formatter("template", None, None)("t", 1, r) == "t/1@7 k v\\xff"
    assert formatter("raw", "{offset}|{headers}", None)("t", 1, r) == "7|h=x"
    with pytest.raises(KafkaConfigError, match="bad --template"):
        formatter("template", "{nope}", None)


def test_properties_file_and_tls(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "# comment\nsecurity.protocol=SASL_PLAINTEXT\nsasl_mechanism = PLAIN\n"
        "sasl.plain.username=alice\nsasl_plain_password=secret\nrequest_timeout_ms=5000\n"
    )
    options = client_options(read_properties(str(path)))
    assert options == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "secret",
        "request_timeout_ms": 5000,
    }
    with pytest.raises(KafkaConfigError, match="unknown config key 'colour'"):
        client_options({"colour": "red"})
    with pytest.raises(KafkaConfigError, match="cannot set up TLS"):
        client_options({"ssl_cafile": str(tmp_path / "missing.pem")})
    import certifi  # noqa: PLC0415 - a CA bundle that exists everywhere pip does

    tls = client_options({"ssl_cafile": certifi.where(), "ssl_check_hostname": "false"})
    assert isinstance(tls["ssl_context"], ssl.SSLContext)
    assert tls["security_protocol"] == "SSL" and tls["ssl_context"].check_hostname is False


def test_bootstrap_from_flag_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BOOTSTRAP_ENV, "env:1")
    assert resolve_bootstrap(None) == "env:1"
    assert resolve_bootstrap("flag:2") == "flag:2"
    monkeypatch.delenv(BOOTSTRAP_ENV)
    with pytest.raises(KafkaConfigError, match=BOOTSTRAP_ENV):
        resolve_bootstrap(None)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["consume"], "required: topic"),
        (["groups", "reset-offsets", "g", "--all-topics"], "one of the arguments --to-earliest"),
        (["topics", "list", "--bootstrap"], "expected one argument"),
        (["produce", "t", "--acks", "2"], "invalid choice: '2'"),
        (["nosuch"], "invalid choice: 'nosuch'"),
    ],
)
def test_usage_errors_exit_2_without_traceback(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_missing_bootstrap_and_config_are_usage_errors(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(BOOTSTRAP_ENV, raising=False)
    assert main(["topics", "list"]) == 2
    assert "no bootstrap servers" in capsys.readouterr().err
    assert main(["-b", "x:1", "--config", str(tmp_path / "nope"), "topics", "list"]) == 2
    err = capsys.readouterr().err
    assert "cannot read config file" in err and "Traceback" not in err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("produce", "consume", "topics", "groups", "cluster", "broker", "bench"):
        assert command in out
