"""The clients' keyword options as TypedDicts, for IDEs and type checkers.

``Producer(bootstrap, **options: Unpack[ProducerOptions])`` lets an editor complete option
names and check their types; at run time the clients still refuse an unknown name with the
closest known one (``KafkaConfigError: Producer has no option 'linger'; did you mean
'linger_ms'?``). ``tests/unit/test_options.py`` keeps these in step with what the clients
accept. Meanings and defaults: docs/reference/configuration.md.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypedDict

TokenProvider = Callable[[], "str | Awaitable[str]"]


class ConnectionOptions(TypedDict, total=False):
    """Options every client takes: connections, timeouts and security."""

    client_id: str | None
    request_timeout_ms: int
    connect_timeout_ms: int
    connections_max_idle_ms: int
    reconnect_backoff_ms: int
    reconnect_backoff_max_ms: int
    max_in_flight_requests_per_connection: int
    max_response_size: int
    receive_buffer_bytes: int | None
    send_buffer_bytes: int | None
    security_protocol: str
    ssl_context: ssl.SSLContext | None
    ssl_check_hostname: bool
    sasl_mechanism: str
    sasl_plain_username: str | None
    sasl_plain_password: str | None
    sasl_oauth_token_provider: TokenProvider | None
    sasl_scram_max_iterations: int


class ProducerOptions(ConnectionOptions, total=False):
    """``Producer`` options (the Java client's names in snake_case)."""

    acks: int | str
    linger_ms: float
    batch_size: int
    buffer_memory: int
    compression_type: str | None
    max_request_size: int
    delivery_timeout_ms: float
    retry_backoff_ms: float
    retry_backoff_max_ms: float
    enable_idempotence: bool | None
    partitioner: str | Callable[[bytes | None, Sequence[int], Sequence[int]], int] | None
    metadata_max_age_ms: float
    max_block_ms: float
    # a function or `async def` (value -> bytes), or a kafkaio.serde.Serializer
    key_serializer: Any
    value_serializer: Any
    interceptors: Sequence[Any]
    transactional_id: str | None
    transaction_timeout_ms: int


class ConsumerOptions(ConnectionOptions, total=False):
    """``Consumer`` options besides ``bootstrap_servers``, ``group_id`` and
    ``metrics_enabled`` (the Java client's names in snake_case)."""

    # a function or `async def` (bytes | None -> value), or a kafkaio.serde.Deserializer
    key_deserializer: Any
    value_deserializer: Any
    fetch_min_bytes: int
    fetch_max_bytes: int
    fetch_max_wait_ms: int
    max_partition_fetch_bytes: int
    fetch_buffer_max_bytes: int | None
    max_poll_records: int | None
    auto_offset_reset: str
    isolation_level: str
    check_crcs: bool
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    metadata_max_age_ms: int
    default_api_timeout_ms: int
    client_rack: str | None
    exclude_internal_topics: bool
    allow_auto_create_topics: bool
    enable_auto_commit: bool
    auto_commit_interval_ms: int
    session_timeout_ms: int
    heartbeat_interval_ms: int
    max_poll_interval_ms: int
    rebalance_timeout_ms: int | None
    partition_assignment_strategy: Sequence[Any] | str
    group_instance_id: str | None
    group_protocol: str
    group_remote_assignor: str | None
    interceptors: Sequence[Any]


class ShareConsumerOptions(ConnectionOptions, total=False):
    """``ShareConsumer`` options besides ``bootstrap_servers``, ``group_id`` and
    ``metrics_enabled``."""

    acknowledgement_mode: str
    key_deserializer: Any
    value_deserializer: Any
    max_poll_records: int
    fetch_max_wait_ms: int
    fetch_min_bytes: int
    fetch_max_bytes: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    metadata_max_age_ms: int
    client_rack: str | None
    default_api_timeout_ms: int
    on_acknowledgement: Callable[[Any], Any] | None


class AdminOptions(ConnectionOptions, total=False):
    """``Admin`` options."""

    default_api_timeout_ms: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
