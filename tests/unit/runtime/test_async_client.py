"""``async with`` on every client: start on entry, close on exit, the body's error first."""

from __future__ import annotations

import logging

import pytest

from kafkaio import Admin, Consumer, Producer, ShareConsumer
from kafkaio.runtime.shell import AsyncClient


class Recorder(AsyncClient):
    def __init__(self, close_error: Exception | None = None) -> None:
        self.calls: list[str] = []
        self.close_error = close_error

    async def start(self) -> None:
        self.calls.append("start")

    async def close(self, timeout_ms: float | None = None) -> None:
        self.calls.append("close")
        if self.close_error is not None:
            raise self.close_error


@pytest.mark.parametrize("client", [Producer, Consumer, ShareConsumer, Admin])
def test_every_client_is_an_async_client(client: type) -> None:
    assert issubclass(client, AsyncClient)


async def test_enter_starts_and_exit_closes() -> None:
    client = Recorder()
    async with client as entered:
        assert entered is client
        assert client.calls == ["start"]
    assert client.calls == ["start", "close"]


async def test_close_error_is_raised_when_the_body_succeeded() -> None:
    client = Recorder(close_error=RuntimeError("listener failed"))
    with pytest.raises(RuntimeError, match="listener failed"):
        async with client:
            pass


async def test_body_error_wins_over_close_error(caplog: pytest.LogCaptureFixture) -> None:
    client = Recorder(close_error=RuntimeError("listener failed"))
    with caplog.at_level(logging.WARNING, logger="kafkaio.runtime"):
        with pytest.raises(ValueError, match="bad record"):
            async with client:
                raise ValueError("bad record")
    assert client.calls == ["start", "close"]
    assert "closing Recorder after ValueError('bad record')" in caplog.text
    assert "listener failed" in caplog.text
