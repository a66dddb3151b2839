"""ConsumerConfig: the consumer's own options (Java/aiokafka names), validated when built.

Connection and security options are split off by kafkaio.config.split_connection_options.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from kafkaio.consumer.group.assignors import ConsumerPartitionAssignor, assignor_for_name
from kafkaio.consumer.interceptors import check_interceptors
from kafkaio.consumer.record import identity
from kafkaio.consumer.subscription import OffsetResetStrategy
from kafkaio.errors import KafkaConfigError
from kafkaio.serde.base import FieldCodec
from kafkaio.validate import check_bool

ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}
GROUP_PROTOCOLS = ("classic", "consumer")


@dataclass(slots=True)
class ConsumerConfig:
    """Fetching, offsets and (stored for the group managers) group options.

    Times are milliseconds. ``max_poll_records`` (500, Java's default) caps what one
    getmany() returns; None returns whatever is buffered (which can be the whole prefetch:
    very large lists cost more in garbage collection than they save in calls), but from
    each fetched chunk at most as many records as its bytes could hold uncompressed (one
    per 7 bytes): a compressed batch of millions of tiny records comes out over several
    calls. ``fetch_buffer_max_bytes`` caps the bytes of fetched-but-unconsumed data
    (prefetch); None means 2 x fetch_max_bytes.
    """

    group_id: str | None = None
    # plain or async callables (bytes | None -> value), or kafkaio.serde.Deserializer objects
    key_deserializer: Any = identity
    value_deserializer: Any = identity
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 52_428_800
    fetch_max_wait_ms: int = 500
    max_partition_fetch_bytes: int = 1_048_576
    fetch_buffer_max_bytes: int | None = None
    max_poll_records: int | None = 500
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"
    check_crcs: bool = True
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    metadata_max_age_ms: int = 300_000
    default_api_timeout_ms: int = 60_000
    client_rack: str | None = None
    exclude_internal_topics: bool = True
    allow_auto_create_topics: bool = False
    # group options: stored here, used by the group managers
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300_000
    rebalance_timeout_ms: int | None = None
    # names ("range", "roundrobin", "sticky", "cooperative-sticky"), assignor objects or
    # classes; () = range. Classic protocol only.
    partition_assignment_strategy: Sequence[Any] | str = ()
    group_instance_id: str | None = None
    # "classic" (JoinGroup/SyncGroup) or "consumer" (KIP-848 ConsumerGroupHeartbeat)
    group_protocol: str = "classic"
    # KIP-848: the server-side assignor ("uniform", "range"); None lets the broker choose
    group_remote_assignor: str | None = None
    # objects with on_consume(records), on_commit(offsets) and/or close() (interceptors.py)
    interceptors: Sequence[Any] = ()

    def __post_init__(self) -> None:
        for name, minimum in (
            ("fetch_min_bytes", 0),
            ("fetch_max_bytes", 1),
            ("fetch_max_wait_ms", 0),
            ("max_partition_fetch_bytes", 1),
            ("retry_backoff_ms", 0),
            ("retry_backoff_max_ms", 0),
            ("metadata_max_age_ms", 0),
            ("default_api_timeout_ms", 1),
            ("auto_commit_interval_ms", 1),
            ("session_timeout_ms", 1),
            ("heartbeat_interval_ms", 1),
            ("max_poll_interval_ms", 1),
        ):
            _check_int(name, getattr(self, name), minimum)
        for name in ("max_poll_records", "fetch_buffer_max_bytes", "rebalance_timeout_ms"):
            if getattr(self, name) is not None:
                _check_int(name, getattr(self, name), 1)
        for name in (
            "check_crcs",
            "exclude_internal_topics",
            "allow_auto_create_topics",
            "enable_auto_commit",
        ):
            check_bool(name, getattr(self, name))
        self.interceptors = check_interceptors(self.interceptors)
        OffsetResetStrategy.parse(self.auto_offset_reset)
        if self.isolation_level not in ISOLATION_LEVELS:
            raise KafkaConfigError(
                f"isolation_level is {self.isolation_level!r}; use 'read_uncommitted' or "
                "'read_committed'"
            )
        for name in ("key_deserializer", "value_deserializer"):
            FieldCodec(getattr(self, name), name.split("_")[0], deserializer=True)
        if self.group_id is not None and (not isinstance(self.group_id, str) or not self.group_id):
            raise KafkaConfigError(
                f"group_id must be a non-empty str or None, got {self.group_id!r}"
            )
        self.partition_assignment_strategy = _check_strategies(self.partition_assignment_strategy)
        if self.group_instance_id is not None and (
            not isinstance(self.group_instance_id, str) or not self.group_instance_id
        ):
            raise KafkaConfigError(
                f"group_instance_id must be a non-empty str or None, got {self.group_instance_id!r}"
            )
        if self.group_protocol not in GROUP_PROTOCOLS:
            raise KafkaConfigError(
                f"group_protocol is {self.group_protocol!r}; use 'classic' (JoinGroup/SyncGroup) "
                "or 'consumer' (KIP-848, needs a broker with ConsumerGroupHeartbeat)"
            )
        if self.group_protocol == "consumer" and self.partition_assignment_strategy:
            raise KafkaConfigError(
                "partition_assignment_strategy applies to group_protocol='classic' only; with "
                "'consumer' the broker assigns: choose its assignor with group_remote_assignor"
            )
        if self.group_remote_assignor is not None and (
            self.group_protocol != "consumer"
            or not isinstance(self.group_remote_assignor, str)
            or not self.group_remote_assignor
        ):
            raise KafkaConfigError(
                f"group_remote_assignor ({self.group_remote_assignor!r}) needs "
                "group_protocol='consumer' and a non-empty assignor name such as 'uniform'"
            )
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise KafkaConfigError(
                f"heartbeat_interval_ms ({self.heartbeat_interval_ms}) must be lower than "
                f"session_timeout_ms ({self.session_timeout_ms})"
            )

    def assignors(self) -> list[ConsumerPartitionAssignor]:
        """New assignor objects for ``partition_assignment_strategy`` (range by default)."""
        out: list[ConsumerPartitionAssignor] = []
        for item in self.partition_assignment_strategy or ("range",):
            if isinstance(item, str):
                out.append(assignor_for_name(item))
            elif isinstance(item, type):
                out.append(item())
            else:
                out.append(item)
        return out

    @property
    def reset_strategy(self) -> OffsetResetStrategy:
        return OffsetResetStrategy.parse(self.auto_offset_reset)

    @property
    def isolation(self) -> int:
        """The wire value: 0 read_uncommitted, 1 read_committed."""
        return ISOLATION_LEVELS[self.isolation_level]

    @property
    def buffer_max_bytes(self) -> int:
        if self.fetch_buffer_max_bytes is not None:
            return self.fetch_buffer_max_bytes
        return 2 * self.fetch_max_bytes


CONSUMER_OPTIONS = frozenset(f.name for f in fields(ConsumerConfig))


def _check_strategies(value: Sequence[Any] | str) -> tuple[Any, ...]:
    items = (value,) if isinstance(value, str) or not isinstance(value, Sequence) else value
    for item in items:
        if isinstance(item, str):
            assignor_for_name(item)  # raises KafkaConfigError naming the known ones
            continue
        name = getattr(item, "name", None)
        if not isinstance(name, str) or not name or not callable(getattr(item, "assign", None)):
            raise KafkaConfigError(
                f"partition_assignment_strategy entry {item!r} is neither a known name "
                "('range', 'roundrobin', 'sticky', 'cooperative-sticky') nor a ConsumerPartitionAssignor (an object "
                "or class with a `name` and an `assign` method)"
            )
    return tuple(items)


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise KafkaConfigError(f"{name} is {value!r}; use an int >= {minimum}")
