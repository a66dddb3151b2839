"""Hostile response frames: every response class at every version, mutated valid frames.

Bit flips, truncations, spliced bytes and length/count fields patched to huge or negative
values must end in a value or a KafkaError subclass, within a time and allocation bound.
"""

from __future__ import annotations

import contextlib
import random
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkaio.protocol import messages as m
from kafkaio.protocol.frames import decode_response, is_flexible
from tests.unit.fuzz._harness import (
    PATCH_I32,
    FuzzStats,
    bounded_decode,
    mutate,
    random_instance,
    response_cases,
    response_frame,
    traced,
)
from tests.unit.protocol.strategies import instance

m.load_all()  # message modules load lazily: not while allocations are being measured

CASES = response_cases()
API_KEYS = sorted({key for key, _cls, _v in CASES})
MESSAGES_PER_VERSION = 3
MUTATIONS_PER_MESSAGE = 12

_traced = contextlib.contextmanager(traced)


def sweep(api_key: int, seed: int = 0) -> FuzzStats:
    """Mutated frames of every version of one response class; returns what happened."""
    stats = FuzzStats()
    rnd = random.Random(f"{seed}-{api_key}")
    cls = m.REQUESTS[api_key][1]
    for version in range(cls.MIN_VERSION, cls.MAX_VERSION + 1):
        for _ in range(MESSAGES_PER_VERSION):
            message = random_instance(rnd, cls, cls, version)
            frame = response_frame(api_key, cls, version, message)
            assert decode_response(api_key, version, frame) == message  # the seed is valid
            for _ in range(MUTATIONS_PER_MESSAGE):
                bad = mutate(rnd, frame)
                bounded_decode(
                    lambda v=version, b=bad: decode_response(api_key, v, b),
                    stats,
                    f"{cls.__name__} v{version} frame={bad.hex()}",
                )
    return stats


@pytest.mark.parametrize("api_key", API_KEYS, ids=[m.REQUESTS[k][1].__name__ for k in API_KEYS])
def test_mutated_frames_of_every_version(api_key: int) -> None:
    with _traced():
        stats = sweep(api_key)
    assert stats.crashes == []
    assert stats.rejected > 0  # the mutations reached the decoder's error paths


def patch_every_position(api_key: int, cls: type, version: int) -> FuzzStats:
    """A huge or negative int32 written at every offset of one valid frame."""
    stats = FuzzStats()
    rnd = random.Random(f"pos-{api_key}-{version}")
    message = random_instance(rnd, cls, cls, version)
    frame = response_frame(api_key, cls, version, message)
    for pos in range(4, len(frame)):
        for value in (0x7FFFFFFF, -1, PATCH_I32[pos % len(PATCH_I32)]):
            raw = bytearray(frame)
            raw[pos : pos + 4] = struct.pack(">i", value)
            bad = bytes(raw)
            bounded_decode(
                lambda b=bad: decode_response(api_key, version, b),
                stats,
                f"{cls.__name__} v{version}",
            )
    return stats


@pytest.mark.parametrize("api_key", API_KEYS, ids=[m.REQUESTS[k][1].__name__ for k in API_KEYS])
def test_length_fields_patched_at_every_offset(api_key: int) -> None:
    cls = m.REQUESTS[api_key][1]
    crashes: list[str] = []
    for version in range(cls.MIN_VERSION, cls.MAX_VERSION + 1):
        crashes += patch_every_position(api_key, cls, version).crashes
    assert crashes == []


def test_big_frame_allocation_is_bounded_by_its_size() -> None:
    """A 1 MB Fetch response whose array counts claim 2**31 entries allocates little."""
    body = bytearray(struct.pack(">i", 7))
    body += struct.pack(">ihi", 0, 0, 0)  # v7+: throttle, error, session id
    body += struct.pack(">i", 0x7FFFFFFF)  # responses: 2**31-1 topics
    body += b"\x00" * (1024 * 1024)  # every topic: empty name, then a count of 0 partitions
    stats = FuzzStats()
    with _traced():
        bounded_decode(lambda: decode_response(1, 7, bytes(body)), stats, "fetch v7")
    assert stats.crashes == [] and stats.rejected == 1


def _case_index() -> st.SearchStrategy[int]:
    return st.integers(0, len(CASES) - 1)


MUTATION = st.tuples(
    st.sampled_from(["flip", "cut", "i32", "i16", "varint", "insert", "delete"]),
    st.integers(0, 10_000),
    st.integers(-(2**31), 2**31 - 1),
)


def apply(body: bytes, op: str, pos: int, value: int) -> bytes:
    if not body:
        return body
    pos %= len(body)
    raw = bytearray(body)
    if op == "flip":
        raw[pos] ^= 1 << (value % 8)
    elif op == "cut":
        del raw[pos:]
    elif op == "i32":
        raw[pos : pos + 4] = struct.pack(">i", value)
    elif op == "i16":
        raw[pos : pos + 2] = struct.pack(">h", value % 65536 - 32768)
    elif op == "varint":
        raw[pos : pos + 5] = bytes([0x80 | (value & 0x7F)] * 4 + [(value >> 7) & 0x0F])
    elif op == "insert":
        raw[pos:pos] = value.to_bytes(4, "big", signed=True)
    else:
        del raw[pos : pos + 1 + value % 8]
    return bytes(raw)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_case_index(), data=st.data(), ops=st.lists(MUTATION, min_size=1, max_size=3))
def test_hypothesis_mutations(case: int, data: st.DataObject, ops: list[Any]) -> None:
    api_key, cls, version = CASES[case]
    message = data.draw(instance(cls, cls, version))
    frame = response_frame(api_key, cls, version, message)
    header = 5 if api_key != 18 and is_flexible(cls, version) else 4
    body = frame[header:]
    for op in ops:
        body = apply(body, *op)
    stats = FuzzStats()
    bounded_decode(lambda: decode_response(api_key, version, frame[:header] + body), stats, "hyp")
    assert stats.crashes == []
