"""Typed arguments and results of the Admin config calls (DescribeConfigs and
IncrementalAlterConfigs): resources, entries, their sources and alter operations."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kafkaio.errors import KafkaError


class ConfigResourceType(enum.IntEnum):
    """What a config belongs to (Kafka's ConfigResource.Type codes)."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(enum.IntEnum):
    """Where a config value comes from (DescribeConfigs v1+ config_source)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8

    @classmethod
    def parse(cls, code: int) -> ConfigSource:
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN


class AlterConfigOpType(enum.IntEnum):
    """IncrementalAlterConfigs operations: SET a value, DELETE (back to the default),
    APPEND to / SUBTRACT from a list-valued config."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class ConfigResource:
    """A topic, broker (name: its id as a string; "" for the cluster default) or group."""

    type: ConfigResourceType
    name: str

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        return cls(ConfigResourceType.TOPIC, name)

    @classmethod
    def broker(cls, broker_id: int | str) -> ConfigResource:
        return cls(ConfigResourceType.BROKER, str(broker_id))

    @classmethod
    def group(cls, group_id: str) -> ConfigResource:
        return cls(ConfigResourceType.GROUP, group_id)


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config of a resource; `value` is None for sensitive or unset values."""

    name: str
    value: str | None
    source: ConfigSource = ConfigSource.UNKNOWN
    is_read_only: bool = False
    is_sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()
    config_type: int = 0
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


@dataclass(frozen=True, slots=True)
class ConfigDescription:
    """A resource's configs by name, or the error that kept the broker from describing it."""

    resource: ConfigResource
    error: KafkaError | None
    entries: dict[str, ConfigEntry] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    """One change for IncrementalAlterConfigs; `value` is ignored by DELETE."""

    name: str
    value: str | None = None
    op: AlterConfigOpType = AlterConfigOpType.SET
