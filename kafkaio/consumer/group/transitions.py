"""The shared part of the membership managers' one transition function: check a state change
against the manager's table, log it, and tell the metrics hook."""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Collection, Mapping
from typing import TypeVar

from kafkaio.errors import KafkaError

log = logging.getLogger("kafkaio.consumer.group")

S = TypeVar("S", bound=enum.Enum)


def check_transition(
    group_id: str,
    table: Mapping[S, Collection[S]],
    current: S,
    to: S,
    reason: str,
    error: type[KafkaError],
    on_transition: Callable[[str, str], None] | None,
) -> None:
    """Raise `error` if `table` does not allow `current` -> `to`; otherwise log the change and
    call `on_transition(old value, new value)`. The caller then sets its state to `to`."""
    if to not in table[current]:
        raise error(
            f"group {group_id!r}: membership cannot go from {current.value} to "
            f"{to.value} ({reason}); this is a kafkaio bug, please report it"
        )
    log.debug("group %r: %s -> %s (%s)", group_id, current.value, to.value, reason)
    if on_transition is not None:  # metrics: rebalance timing
        on_transition(current.value, to.value)
