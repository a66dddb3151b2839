"""ShareConsumer options: names, defaults and validation (Java share-consumer names, snake_case).

Connection options (client_id, request_timeout_ms, security...) are split off by kafkaio.config.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkaio.errors import KafkaConfigError
from kafkaio.serde.base import FieldCodec

ACK_MODES = ("implicit", "explicit")

SHARE_CONSUMER_OPTIONS = frozenset(
    {
        "acknowledgement_mode",
        "key_deserializer",
        "value_deserializer",
        "max_poll_records",
        "fetch_max_wait_ms",
        "fetch_min_bytes",
        "fetch_max_bytes",
        "retry_backoff_ms",
        "retry_backoff_max_ms",
        "metadata_max_age_ms",
        "client_rack",
        "default_api_timeout_ms",
        "on_acknowledgement",
    }
)


@dataclass(frozen=True, slots=True)
class ShareConsumerConfig:
    acknowledgement_mode: str = "implicit"
    # plain or async callables (bytes | None -> value), or kafkaio.serde.Deserializer objects
    key_deserializer: Any = None
    value_deserializer: Any = None
    max_poll_records: int = 500
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 52_428_800
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    metadata_max_age_ms: int = 300_000
    client_rack: str | None = None
    default_api_timeout_ms: int = 60_000
    # called on the application side with each AckOutcome (partition, offsets, error)
    on_acknowledgement: Callable[[Any], Any] | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ShareConsumerConfig:
        config = cls(**options)
        if config.acknowledgement_mode not in ACK_MODES:
            raise KafkaConfigError(
                f"acknowledgement_mode is {config.acknowledgement_mode!r}; use 'implicit' "
                "(records of a poll are accepted by the next poll) or 'explicit' (acknowledge "
                "every record yourself)"
            )
        for name in ("key_deserializer", "value_deserializer"):
            if getattr(config, name) is not None:
                FieldCodec(getattr(config, name), name.split("_")[0], deserializer=True)
        for name in (
            "max_poll_records",
            "fetch_min_bytes",
            "fetch_max_bytes",
            "default_api_timeout_ms",
        ):
            value = getattr(config, name)
            if not isinstance(value, int) or value < 1:
                raise KafkaConfigError(f"{name} is {value!r}; use a positive integer")
        for name in ("fetch_max_wait_ms", "retry_backoff_ms", "retry_backoff_max_ms"):
            value = getattr(config, name)
            if not isinstance(value, int) or value < 0:
                raise KafkaConfigError(f"{name} is {value!r}; use 0 or a positive integer")
        return config
