"""GroupDescription.found: whether a coordinator's answer describes a group it knows."""

from __future__ import annotations

from kafkaio.admin.group_types import GroupDescription
from kafkaio.errors import GroupIdNotFoundError


def test_a_described_group_is_found() -> None:
    assert GroupDescription("g", None, state="Stable").found
    assert GroupDescription("g", None, state="Empty").found


def test_a_dead_group_or_an_error_is_not_found() -> None:
    # brokers before KIP-1043 describe an unknown group as Dead; Kafka 4 answers an error
    assert not GroupDescription("g", None, state="Dead").found
    assert not GroupDescription("g", GroupIdNotFoundError("no such group")).found
