"""The CLI's pure parts: input parsing, partition checks, output formats, settings files,
and exit codes / messages for usage errors (no broker needed)."""

from __future__ import annotations

import base64
import json
import ssl
from pathlib import Path
from typing import Any

import pytest

from kafkaio.cli import main
from kafkaio.cli.clients import until_shown
from kafkaio.cli.output import record_formatter
from kafkaio.cli.produce import check_partitions, parse_headers, parse_lines
from kafkaio.cli.settings import (
    BOOTSTRAP_ENV,
    client_options,
    read_properties,
    resolve_bootstrap,
    ssl_context,
)
from kafkaio.consumer import ConsumerRecord
from kafkaio.errors import KafkaConfigError, KafkaTimeoutError
from kafkaio.metadata.cluster import PartitionInfo, TopicInfo


def test_lines_with_key_separator_and_headers() -> None:
    records = parse_lines(
        b"k1:v1\nno-key\r\nk2:a:b\n", fmt="lines", key_separator=":", headers=[("h", b"1")]
    )
    assert [(r.line, r.key, r.value, r.partition) for r in records] == [
        (1, b"k1", b"v1", None),
        (2, None, b"no-key", None),
        (3, b"k2", b"a:b", None),
    ]
    assert all(r.headers == [("h", b"1")] for r in records)


def test_json_lines_input() -> None:
    data = (
        b'{"key": "k", "value": {"x": 1}, "headers": {"a": "b"}, "partition": 2, '
        b'"timestamp": 1700000000000}\n\n"plain"\n'
    )
    r1, r2 = parse_lines(data, fmt="json", key_separator=None, headers=[])
    assert (r1.line, r1.partition, r1.key, json.loads(r1.value or b""), r1.headers) == (
        1,
        2,
        b"k",
        {"x": 1},
        [("a", b"b")],
    )
    assert r1.timestamp == 1700000000000
    # a JSON string is the value; the blank line 2 is skipped but still counted
    assert (r2.line, r2.partition, r2.key, r2.value, r2.timestamp) == (
        3,
        None,
        None,
        b"plain",
        None,
    )
    with pytest.raises(KafkaConfigError, match="line 1 is not JSON"):
        parse_lines(b"{oops\n", fmt="json", key_separator=None, headers=[])
    with pytest.raises(KafkaConfigError, match="line 2: partition must be an integer"):
        parse_lines(b'{}\n{"partition": true}\n', fmt="json", key_separator=None, headers=[])


def test_empty_key_separator_is_refused() -> None:
    with pytest.raises(KafkaConfigError, match="must not be empty"):
        parse_lines(b"k:v\n", fmt="lines", key_separator="", headers=[])


def test_headers_need_key_value() -> None:
    assert parse_headers(["a=1", "b="]) == [("a", b"1"), ("b", b"")]
    with pytest.raises(KafkaConfigError, match="KEY=VALUE"):
        parse_headers(["nope"])


def test_partition_checks_before_sending() -> None:
    records = parse_lines(
        b'{"value": "a", "partition": 1}\n{"value": "b"}\n',
        fmt="json",
        key_separator=None,
        headers=[],
    )
    check_partitions(records, None, "t", 2)  # partitions 0-1: fine
    with pytest.raises(KafkaConfigError, match=r"partition 1 does not exist: topic 't' has 1"):
        check_partitions(records, None, "t", 1)
    with pytest.raises(KafkaConfigError, match="partition 5 does not exist"):
        check_partitions(records, 5, "t", 2)  # -p overrides the records' own partitions
    check_partitions(records, 0, "t", 1)
    with pytest.raises(KafkaConfigError, match="partition -1 does not exist"):
        check_partitions(records, -1, "t", 3)


def _record() -> ConsumerRecord[bytes | None, bytes | None]:
    return ConsumerRecord("t", 1, 7, 1234, 0, b"k", b"v\xff", [("h", b"x")], None, 1, 2)


def test_output_formats() -> None:
    r = _record()
    assert record_formatter("raw")(r) == b"v\xff"  # bytes as they are (as kcat)
    assert record_formatter("raw", None, "=")(r) == b"k=v\xff"
    as_json = json.loads(record_formatter("json")(r))
    assert as_json == {
        "topic": "t",
        "partition": 1,
        "offset": 7,
        "timestamp": 1234,
        "key": "k",
        "value": {"base64": base64.b64encode(b"v\xff").decode()},  # not UTF-8: lossless
        "headers": [["h", "x"]],
    }
    assert record_formatter("template")(r) == b"t/1@7 k v\xff"
    assert record_formatter("raw", "{offset}|{headers}")(r) == b"7|h=x"
    null = ConsumerRecord("t", 0, 3, 0, 0, None, None, (), None, -1, -1)
    assert record_formatter("raw", None, "=")(null) == b"="
    assert json.loads(record_formatter("json")(null))["value"] is None
    with pytest.raises(KafkaConfigError, match="bad --template"):
        record_formatter("template", "{nope}")


def test_json_output_keeps_every_header_in_order_and_utf8_text_as_is() -> None:
    headers = [("trace", b"a"), ("trace", b"b"), ("bin", b"\x80"), ("none", None)]
    r = ConsumerRecord("t", 0, 0, 0, 0, "clé".encode(), "välue ✓".encode(), headers, None, -1, 1)
    line = record_formatter("json")(r)
    assert "välue ✓".encode() in line  # UTF-8 text unchanged (not \u-escaped)
    as_json = json.loads(line)
    assert (as_json["key"], as_json["value"]) == ("clé", "välue ✓")
    assert as_json["headers"] == [
        ["trace", "a"],
        ["trace", "b"],
        ["bin", {"base64": "gA=="}],
        ["none", None],
    ]
    assert record_formatter("raw", None, ":")(r) == "clé:välue ✓".encode()


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


def test_properties_use_java_separators_and_errors_never_show_a_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "sasl.plain.password: S3CRET" (a valid Java separator) was refused and echoed verbatim
    path = tmp_path / "client.properties"
    path.write_text(
        "security.protocol: SASL_SSL\nsasl.mechanism PLAIN\nsasl.plain.username = alice\n"
        "sasl.plain.password: S3CRET\n"
    )
    assert client_options(read_properties(str(path)))["sasl_plain_password"] == "S3CRET"
    path.write_text("sasl.plain.passwrod: S3CRET\n")  # a misspelt key: named, value not shown
    assert main(["-b", "x:1", "--config", str(path), "topics", "list"]) == 2
    err = capsys.readouterr().err
    assert "sasl_plain_passwrod" in err and "S3CRET" not in err
    path.write_text("sasl.plain.password=S3CRET \\\n  continued\n")
    with pytest.raises(KafkaConfigError, match="continuation") as info:
        read_properties(str(path))
    assert "S3CRET" not in str(info.value)


@pytest.mark.parametrize("value", ["on", "enabled", "y", "TRUE", "maybe", ""])
def test_ssl_check_hostname_is_a_strict_boolean(value: str) -> None:
    # "on", "enabled" or "y" turned hostname verification off: only 1/true/yes kept it on
    import certifi  # noqa: PLC0415

    props = {"ssl_cafile": certifi.where(), "ssl_check_hostname": value}
    if value.lower() in ("on", "true"):
        options = client_options(props)
        assert options["ssl_check_hostname"] is True
        assert options["ssl_context"].check_hostname is True
        return
    with pytest.raises(KafkaConfigError, match="ssl_check_hostname must be true or false"):
        client_options(props)
    with pytest.raises(KafkaConfigError, match="ssl_check_hostname must be true or false"):
        ssl_context(props)


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
        (["-b", "x:1", "produce", "t", "-K", ""], "-K/--key-separator must not be empty"),
        # an illegal name was looked up on the broker and reported as a topic that does not
        # exist, with the advice to create it (`kafkaio topics create bad topic`)
        (["-b", "x:1", "produce", "bad topic"], "topic name 'bad topic' is illegal"),
        (["-b", "x:1", "consume", "ok", "a/b", "-e"], "topic name 'a/b' is illegal"),
        (["-b", "x:1", "consume", "x" * 250], "it is 250 characters long"),
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


def test_kcat_offsets_and_dash_x_settings_parse() -> None:
    import argparse

    from kafkaio.cli.consume import Start, parse_offset
    from kafkaio.cli.settings import split_settings

    assert parse_offset("beginning") == Start("beginning")
    assert parse_offset("END") == Start("end")
    assert parse_offset("stored") == Start("stored")
    assert parse_offset("42") == Start("offset", 42)
    assert parse_offset("-3") == Start("relative", -3)
    assert parse_offset("s@1700000000000") == Start("timestamp", 1700000000000)
    for bad in ("s@x", "yesterday", "e@5"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_offset(bad)
    connection, own = split_settings(
        ["linger.ms=20", "client.id=x", "enable-idempotence=false", "acks=all", "ratio=0.5",
         "ssl_context=none"]
    )
    assert connection == {"client_id": "x", "ssl_context": None}
    assert own == {"linger_ms": 20, "enable_idempotence": False, "acks": "all", "ratio": 0.5}
    with pytest.raises(KafkaConfigError, match="expected KEY=VALUE"):
        split_settings(["linger.ms"])


def test_json_input_base64_values_are_the_bytes_they_encode() -> None:
    line = json.dumps(
        {
            "key": {"base64": base64.b64encode(b"\xff\x00").decode()},
            "value": {"base64": base64.b64encode(b"\x80bin").decode()},
            "headers": [["h", {"base64": base64.b64encode(b"\xfe").decode()}], ["t", "ok"]],
        }
    ).encode()
    (record,) = parse_lines(line + b"\n", fmt="json", key_separator=None, headers=[])
    assert (record.key, record.value) == (b"\xff\x00", b"\x80bin")
    assert record.headers == [("h", b"\xfe"), ("t", b"ok")]
    (other,) = parse_lines(b'{"value": {"base64": "x", "more": 1}}\n', fmt="json",
                           key_separator=None, headers=[])
    assert json.loads(other.value or b"") == {"base64": "x", "more": 1}  # not the bytes form
    with pytest.raises(KafkaConfigError, match="not valid base64"):
        parse_lines(b'{"value": {"base64": "%%%"}}\n', fmt="json", key_separator=None, headers=[])


class _ListingLater:
    """An Admin whose metadata shows a topic from the `shows_from`-th describe on, as Apache
    Kafka's brokers do a moment after CreateTopics (or, with `created=False`, stop showing
    it after DeleteTopics) has answered."""

    def __init__(self, shows_from: int, *, created: bool = True) -> None:
        self.calls = 0
        self.shows_from = shows_from
        self.created = created

    async def describe_topics(self, names: list[str]) -> dict[str, TopicInfo]:
        self.calls += 1
        listed = (self.calls >= self.shows_from) == self.created
        if not listed:
            return {n: TopicInfo(n, None, False, (), error=3) for n in names}
        partition = PartitionInfo(names[0], 0, leader=1, leader_epoch=0)
        return {n: TopicInfo(n, None, False, (partition,)) for n in names}


@pytest.mark.parametrize("created", [True, False])
async def test_topic_commands_wait_until_the_brokers_show_the_change(created: bool) -> None:
    admin: Any = _ListingLater(3, created=created)
    await until_shown(admin, "t", created=created, timeout_ms=5000)
    assert admin.calls == 3  # not before the metadata showed it


async def test_a_change_the_brokers_never_show_is_a_timeout() -> None:
    admin: Any = _ListingLater(10**9)
    with pytest.raises(KafkaTimeoutError, match=r"'t' was created, but .* within 100 ms"):
        await until_shown(admin, "t", created=True, timeout_ms=100)
