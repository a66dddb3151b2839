"""kafkaio.options: the TypedDicts IDEs and type checkers see for the clients' keyword
options match what the clients accept at run time, and a type checker flags a typo."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, get_type_hints

import pytest

from kafkaio import Admin, Consumer, Producer
from kafkaio.admin.core import ADMIN_OPTIONS
from kafkaio.config import CONNECTION_OPTIONS
from kafkaio.consumer.config import CONSUMER_OPTIONS
from kafkaio.errors import KafkaConfigError
from kafkaio.options import (
    AdminOptions,
    ConnectionOptions,
    ConsumerOptions,
    ProducerOptions,
    ShareConsumerOptions,
)
from kafkaio.producer.config import PRODUCER_OPTIONS
from kafkaio.share.config import SHARE_CONSUMER_OPTIONS


@pytest.mark.parametrize(
    ("typed", "accepted"),
    [
        (ConnectionOptions, CONNECTION_OPTIONS),
        (ProducerOptions, CONNECTION_OPTIONS | set(PRODUCER_OPTIONS)),
        (ConsumerOptions, CONNECTION_OPTIONS | (set(CONSUMER_OPTIONS) - {"group_id"})),
        (ShareConsumerOptions, CONNECTION_OPTIONS | SHARE_CONSUMER_OPTIONS),
        (AdminOptions, CONNECTION_OPTIONS | set(ADMIN_OPTIONS)),
    ],
)
def test_typed_options_are_the_options_the_clients_accept(typed: type, accepted: set[str]) -> None:
    assert set(get_type_hints(typed)) == set(accepted)


def test_a_typo_is_still_refused_at_run_time_with_the_closest_name() -> None:
    with pytest.raises(KafkaConfigError, match="did you mean 'linger_ms'"):
        Producer("127.0.0.1:1", lingr_ms=5)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("option", "hint"),
    [
        # the closest name misled: consumer_timeout_ms is not connect_timeout_ms
        ("consumer_timeout_ms", "pass timeout_ms to getmany() instead"),
        ("retries", "delivery_timeout_ms bounds a record's retries"),
        ("api_version", "negotiates each API's version"),
        ("loop", "uses the running event loop"),
        ("sasl_kerberos_service_name", "GSSAPI (Kerberos) is not supported"),
        ("ssl_cafile", "ssl_context=ssl.create_default_context(cafile=...)"),
        ("linger.ms", "options use snake_case: linger_ms=..."),
        ("enable.auto.commit", "options use snake_case: enable_auto_commit=..."),
        ("bootstrap.servers", "the client's bootstrap_servers argument"),
    ],
)
def test_another_client_s_option_is_refused_saying_what_to_do_instead(
    option: str, hint: str
) -> None:
    options: dict[str, Any] = {option: 1}

    def make(client: str) -> object:
        if client == "Producer":
            return Producer("127.0.0.1:1", **options)
        if client == "Consumer":
            return Consumer(bootstrap_servers="127.0.0.1:1", group_id="g", **options)
        return Admin("127.0.0.1:1", **options)

    only = {"enable.auto.commit": ["Consumer"], "linger.ms": ["Producer"]}
    clients = only.get(option, ["Producer", "Consumer", "Admin"])
    for client in clients:
        with pytest.raises(KafkaConfigError) as info:
            make(client)
        assert str(info.value).startswith(f"{client} has no option {option!r}")
        assert hint in str(info.value)


def test_a_type_checker_flags_unknown_and_mistyped_options(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy is not installed")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        "from kafkaio import Admin, Consumer, Producer\n"
        'Producer("b:9092", linger_ms=5, acks="all", lingr_ms=5)\n'
        'Producer("b:9092", linger_ms="soon")\n'
        'Consumer("t", bootstrap_servers="b:9092", group_id="g", fetch_max_wait=5)\n'
        'Admin("b:9092", default_api_timeout_ms=1000, client_id="x")\n'
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(snippet),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = result.stdout
    assert ':2: error: Unexpected keyword argument "lingr_ms"' in out, out
    assert 'did you mean "linger_ms"' in out
    assert ':3: error: Argument "linger_ms" to "Producer" has incompatible type "str"' in out
    assert ':4: error: Unexpected keyword argument "fetch_max_wait"' in out
    assert ":5:" not in out  # the Admin call is right
