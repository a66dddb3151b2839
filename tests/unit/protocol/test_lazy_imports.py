"""kafkaio and its protocol messages load on first use: importing the package or the producer
does not load fifty APIs' codecs (import time and heap), and every name still resolves."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kafkaio.protocol import messages

LOADED = (
    "import sys; {stmt}; "
    "print(sorted(m.rsplit('.', 1)[1] for m in sys.modules "
    "if m.startswith('kafkaio.protocol.messages.')))"
)


def loaded_after(stmt: str) -> list[str]:
    """The protocol message modules a fresh interpreter has loaded after `stmt`."""
    out = subprocess.run(
        [sys.executable, "-c", LOADED.format(stmt=stmt)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return list(eval(out))  # noqa: S307 - our own printed list


def test_importing_kafkaio_loads_no_client_and_no_message_module() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, kafkaio; print(sorted(m for m in sys.modules if m.startswith('kafkaio.')))",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert out.strip() == "[]"


def test_the_producer_loads_only_the_apis_it_speaks() -> None:
    loaded = loaded_after("from kafkaio import Producer")
    assert "produce" in loaded and "metadata" in loaded and "init_producer_id" in loaded
    assert "fetch" not in loaded and "join_group" not in loaded and "share_fetch" not in loaded
    assert len(loaded) < len({m for m in messages._MODULES.values()}) // 3


@pytest.mark.parametrize("name", ["Producer", "Consumer", "Admin", "ShareConsumer", "NewTopic"])
def test_top_level_names_resolve(name: str) -> None:
    import kafkaio

    assert getattr(kafkaio, name).__name__ == name
    assert name in kafkaio.__all__ and name in dir(kafkaio)


def test_every_message_name_and_api_key_resolves() -> None:
    for name in messages.__all__:
        if name != "REQUESTS":
            assert getattr(messages, name).__name__ == name
    for api_key in list(messages._API_KEYS):
        request, response = messages.REQUESTS[api_key]
        assert request.API_KEY == api_key == response.API_KEY
        assert (
            messages.REQUESTS.get(api_key) == (request, response) and api_key in messages.REQUESTS
        )
    assert messages.REQUESTS.get(9999) is None and 9999 not in messages.REQUESTS
    with pytest.raises(KeyError):
        messages.REQUESTS[9999]
    with pytest.raises(AttributeError, match="NoSuchRequest"):
        messages.NoSuchRequest  # noqa: B018
