"""Every message, every version: decode(encode(x)) == x, and encoding is deterministic."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkaio.errors import KafkaProtocolError
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


@pytest.mark.parametrize("version", [0, 5, 9, 12])
@pytest.mark.parametrize("length", [0, 1, 31, 32, 33, 200])
def test_fixed_type_arrays_of_any_length_round_trip(version: int, length: int) -> None:
    """Short arrays of a fixed-size type decode through prebuilt structs, long ones through a
    format built for their length: both give the values, and a truncated one is an error."""
    part = m.MetadataResponse.MetadataResponsePartition
    values = [(i * 7919) % 2**31 - 2**30 for i in range(length)]
    msg = m.MetadataResponse(
        topics=[
            m.MetadataResponse.MetadataResponseTopic(
                name="t",
                partitions=[part(partition_index=0, replica_nodes=values, isr_nodes=values[:3])],
            )
        ]
    )
    wire = msg.encode(version)
    back = m.MetadataResponse.decode(wire, version)
    assert back.topics[0].partitions[0].replica_nodes == values
    assert back.topics[0].partitions[0].isr_nodes == values[:3]
    assert back == msg
    if length:  # cut one byte short of the array's end
        end = wire.index(struct.pack(f">{length}i", *values)) + 4 * length
        with pytest.raises(KafkaProtocolError):
            m.MetadataResponse.decode(wire[: end - 1], version)
