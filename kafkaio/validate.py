"""Checks of application arguments shared by the clients: booleans and topic names.

Bad input is refused at the call with an error naming the option or the topic, before
anything reaches a broker (a topic name is checked as Java's ``Topic.validate`` does).
"""

from __future__ import annotations

import re
from functools import lru_cache

from kafkaio.errors import InvalidTopicError, KafkaConfigError

__all__ = [
    "MAX_TOPIC_LENGTH",
    "check_bool",
    "check_topic",
    "check_partition",
    "check_max_records",
    "check_wait_ms",
]

#: The longest topic name Kafka accepts (a partition directory name must fit in 255 bytes).
MAX_TOPIC_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def check_bool(name: str, value: object) -> None:
    """Refuse anything but True or False for option `name` (a string such as "false" is
    truthy: it would turn the option on)."""
    if not isinstance(value, bool):
        raise KafkaConfigError(f"{name} must be True or False, got {value!r}")


def check_topic(name: object) -> str:
    """Return `name` if it is a legal topic name; else raise InvalidTopicError (an illegal
    str) or KafkaConfigError (not a str)."""
    if not isinstance(name, str):
        raise KafkaConfigError(f"a topic name must be a str, got {name!r}")
    return _check_topic(name)


@lru_cache(maxsize=4096)
def _check_topic(name: str) -> str:
    if not name:
        problem = "it is empty"
    elif name in (".", ".."):
        problem = "'.' and '..' are not allowed"
    elif len(name) > MAX_TOPIC_LENGTH:
        problem = f"it is {len(name)} characters long, more than the {MAX_TOPIC_LENGTH} allowed"
    elif _LEGAL.fullmatch(name) is None:
        problem = "it may contain only ASCII letters, digits, '.', '_' and '-'"
    else:
        return name
    shown = name if len(name) <= 60 else name[:57] + "..."
    raise InvalidTopicError(f"topic name {shown!r} is illegal: {problem}", topic=shown)


def check_partition(partition: object, what: str = "partition") -> int:
    """Return `partition` if it is an int >= 0 (not a bool); else raise KafkaConfigError."""
    if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
        raise KafkaConfigError(f"{what} must be an int >= 0, got {partition!r}")
    return partition


def check_max_records(max_records: object, call: str) -> None:
    """Refuse a record limit that is not None or an int >= 1 (0 or less made ``getmany``
    return {} every time, so a poll loop never got a record and never said why)."""
    if max_records is not None and (
        isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 1
    ):
        raise KafkaConfigError(
            f"{call} max_records must be None or an int >= 1, got {max_records!r}"
        )


def check_wait_ms(timeout_ms: object, call: str) -> None:
    """Refuse a wait that is not a number of milliseconds >= 0 (as Java's ``poll`` refuses a
    negative Duration)."""
    if (
        isinstance(timeout_ms, bool)
        or not isinstance(timeout_ms, (int, float))
        or not timeout_ms >= 0
    ):
        raise KafkaConfigError(f"{call} timeout_ms must be a number >= 0, got {timeout_ms!r}")
