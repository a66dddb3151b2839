"""Golden bytes cross-checked against kio, an independent implementation of the protocol.

kio parses the bytes kafkaio encodes and writes them back: the two must be identical, for every
message and version kio knows. kio is a test oracle only (not a runtime dependency).
"""

from __future__ import annotations

import importlib
import io
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkaio.protocol import messages as m
from tests.unit.protocol.strategies import instance

kio_serial = pytest.importorskip("kio.serial", reason="kio (test oracle) is not installed")


def _snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()


def _kio_class(cls: type, version: int) -> Any:
    api = re.sub(r"(Request|Response)$", "", cls.__name__)
    kind = "request" if cls.__name__.endswith("Request") else "response"
    try:
        mod = importlib.import_module(f"kio.schema.{_snake(api)}.v{version}.{kind}")
    except ImportError:
        return None
    return getattr(mod, cls.__name__, None)


m.load_all()  # REQUESTS fills on first use: every pair, whatever ran before this module
CLASSES = [c for pair in m.REQUESTS.values() for c in pair]
CASES = [
    (cls, v)
    for cls in CLASSES
    for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)
    if _kio_class(cls, v) is not None
]


def _kio_acceptable(obj: Any) -> Any:
    """kio is stricter than the wire format: it maps error codes to an enum and rejects
    negative timestamps. Bring drawn values into what it accepts."""
    for attr, *_ in type(obj).FIELD_SPECS:
        value = getattr(obj, attr)
        if attr.endswith("error_code"):
            setattr(obj, attr, abs(value) % 50)
        elif ("time_ms" in attr or "timestamp" in attr) and isinstance(value, int):
            setattr(obj, attr, abs(value) % 2**31)  # kio rejects negative timestamps
        elif isinstance(value, list):
            for item in value:
                if hasattr(item, "FIELD_SPECS"):
                    _kio_acceptable(item)
        elif hasattr(value, "FIELD_SPECS"):
            _kio_acceptable(value)
    return obj


def test_kio_covers_a_representative_set() -> None:
    names = {c.__name__ for c, _ in CASES}
    assert {"FetchResponse", "ProduceRequest", "MetadataResponse", "JoinGroupRequest"} <= names
    assert len(CASES) > 300


@pytest.mark.parametrize(("cls", "version"), CASES, ids=[f"{c.__name__}-v{v}" for c, v in CASES])
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kio_reads_and_rewrites_our_bytes(cls: type, version: int, data: st.DataObject) -> None:
    msg = _kio_acceptable(data.draw(instance(cls, cls, version)))
    wire = msg.encode(version)
    kio_cls = _kio_class(cls, version)
    parsed, consumed = kio_serial.entity_reader(kio_cls)(wire, 0)
    assert consumed == len(wire)
    out = io.BytesIO()
    kio_serial.entity_writer(kio_cls)(out, parsed)
    assert out.getvalue() == wire
