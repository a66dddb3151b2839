"""Every message, every version: decode(encode(x)) == x, and encoding is deterministic."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkaio.protocol import messages as m
from tests.unit.protocol.strategies import instance

CLASSES = [c for pair in m.REQUESTS.values() for c in pair] + [
    m.ConsumerProtocolSubscription,
    m.ConsumerProtocolAssignment,
]
CASES = [(cls, v) for cls in CLASSES for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)]


@pytest.mark.parametrize(("cls", "version"), CASES, ids=[f"{c.__name__}-v{v}" for c, v in CASES])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip(cls: type, version: int, data: st.DataObject) -> None:
    msg = data.draw(instance(cls, cls, version))
    wire = msg.encode(version)
    back = cls.decode(wire, version)
    assert back == msg
    assert back.encode(version) == wire


def test_every_client_api_is_generated() -> None:
    needed = {
        0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26,
        28, 29, 30, 31, 32, 33, 36, 37, 42, 44, 47, 60, 68,
    }
    assert needed <= set(m.REQUESTS)
