"""Fixtures for the unit tests: the anyio backends to run scenarios on (network layer, driver)."""

from __future__ import annotations

import importlib.util

import pytest

BACKENDS = ["asyncio"] + (["trio"] if importlib.util.find_spec("trio") else [])


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each test taking this runs once per installed anyio backend (asyncio, trio)."""
    return str(request.param)
