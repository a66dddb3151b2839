"""Generate docs/reference/configuration.md from the clients' config classes.

Types and defaults come from the dataclasses; meanings and Java/aiokafka names from OPTIONS.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "reference" / "configuration.md"

if str(ROOT) not in sys.path:  # run as `python tools/gen_config_docs.py` from anywhere
    sys.path.insert(0, str(ROOT))

from kafkaio.admin.core import ADMIN_OPTIONS  # noqa: E402
from kafkaio.consumer.config import ConsumerConfig  # noqa: E402
from kafkaio.net.config import ConnectionConfig  # noqa: E402
from kafkaio.producer.config import PRODUCER_OPTIONS, ProducerConfig  # noqa: E402
from kafkaio.share.config import SHARE_CONSUMER_OPTIONS, ShareConsumerConfig  # noqa: E402

NONE = "—"  # no equivalent
MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class OptionDoc:
    """What the config classes cannot say about an option."""

    meaning: str
    java: str = NONE
    aiokafka: str = NONE
    type: str | None = None  # shown instead of the field's annotation (what you may pass)
    default: str | None = None  # shown instead of the field's default...
    default_for: Any = None  # ...while the field's default is this value (checked)


# Options documented once and shared by every client that has them.
COMMON: dict[str, OptionDoc] = {
    "retry_backoff_ms": OptionDoc(
        "First delay before retrying a failed request; doubles (with jitter) per attempt up "
        "to `retry_backoff_max_ms`.",
        "`retry.backoff.ms`",
        "`retry_backoff_ms`",
    ),
    "retry_backoff_max_ms": OptionDoc(
        "Upper bound of the exponential retry backoff.",
        "`retry.backoff.max.ms`",
    ),
    "metadata_max_age_ms": OptionDoc(
        "Refresh cluster metadata at least this often, even without errors (new partitions "
        "and leaders are noticed within this time).",
        "`metadata.max.age.ms`",
        "`metadata_max_age_ms`",
    ),
    "default_api_timeout_ms": OptionDoc(
        "Deadline of calls that accept `timeout_ms=` when none is given (e.g. `commit()`, "
        "`position()`, `end_offsets()`), and of `start()`.",
        "`default.api.timeout.ms`",
    ),
    "client_rack": OptionDoc(
        "The rack (availability zone) of this client: sent to the group and to brokers so "
        "that rack-aware assignors and follower fetching can use it.",
        "`client.rack`",
        "`client_rack`",
    ),
    "fetch_min_bytes": OptionDoc(
        "The broker answers a fetch once it has at least this many bytes (or "
        "`fetch_max_wait_ms` passed).",
        "`fetch.min.bytes`",
        "`fetch_min_bytes`",
    ),
    "fetch_max_bytes": OptionDoc(
        "Upper bound of the data one fetch response may carry (the broker still returns one "
        "batch larger than this so that progress is possible).",
        "`fetch.max.bytes`",
        "`fetch_max_bytes`",
    ),
    "fetch_max_wait_ms": OptionDoc(
        "How long the broker may hold a fetch waiting for `fetch_min_bytes`. Must be lower "
        "than `request_timeout_ms`.",
        "`fetch.max.wait.ms`",
        "`fetch_max_wait_ms`",
    ),
    "key_deserializer": OptionDoc(
        "Turns each record's key bytes (or None) into the `key` you get: a function, an "
        "`async def` function (awaited in your task) or a `kafkaio.serde.Deserializer` (see "
        "[Serialization](../serialization.md)). The default keeps bytes.",
        "`key.deserializer`",
        "`key_deserializer`",
        default="bytes as is",
        type="Callable[[bytes | None], Any] | Deserializer",
    ),
    "value_deserializer": OptionDoc(
        "Turns each record's value bytes (or None) into the `value` you get: a function, an "
        "`async def` function (awaited in your task) or a `kafkaio.serde.Deserializer` (see "
        "[Serialization](../serialization.md)). The default keeps bytes.",
        "`value.deserializer`",
        "`value_deserializer`",
        default="bytes as is",
        type="Callable[[bytes | None], Any] | Deserializer",
    ),
}

CONNECTION: dict[str, OptionDoc] = {
    "client_id": OptionDoc(
        "Sent in every request header: brokers use it in logs, metrics and quotas. Each "
        "client sets its own default.",
        "`client.id`",
        "`client_id`",
        default='`"kafkaio-producer"`, `"kafkaio-consumer"`, `"kafkaio-admin"`, '
        '`"kafkaio-share-consumer"`',
    ),
    "request_timeout_ms": OptionDoc(
        "How long to wait for the answer to one request before failing it as "
        "`KafkaTimeoutError` (the operation may retry).",
        "`request.timeout.ms`",
        "`request_timeout_ms` (default 40000)",
    ),
    "connect_timeout_ms": OptionDoc(
        "Bound of a connection's whole setup: TCP connect, TLS handshake, ApiVersions and "
        "SASL authentication.",
        "`socket.connection.setup.timeout.ms`",
    ),
    "connections_max_idle_ms": OptionDoc(
        "Close connections unused for this long.",
        "`connections.max.idle.ms`",
        "`connections_max_idle_ms`",
    ),
    "reconnect_backoff_ms": OptionDoc(
        "First wait before reconnecting to a broker whose connection failed; grows "
        "exponentially with jitter.",
        "`reconnect.backoff.ms`",
    ),
    "reconnect_backoff_max_ms": OptionDoc(
        "Upper bound of the reconnect backoff.",
        "`reconnect.backoff.max.ms`",
    ),
    "max_in_flight_requests_per_connection": OptionDoc(
        "Requests sent on one connection before their answers arrive (pipelining). A "
        "producer may then have several full batches of a partition in flight; without "
        "idempotence a retry can reorder them (set 1 to keep order). Idempotent and "
        "transactional producers need at most 5.",
        "`max.in.flight.requests.per.connection`",
    ),
    "max_response_size": OptionDoc(
        "Largest response frame accepted; a larger one fails the connection (protects "
        "memory from a broken or hostile peer).",
        NONE + " (librdkafka `receive.message.max.bytes`)",
    ),
    "receive_buffer_bytes": OptionDoc(
        "The socket's `SO_RCVBUF`; None leaves the operating system's default.",
        "`receive.buffer.bytes`",
    ),
    "send_buffer_bytes": OptionDoc(
        "The socket's `SO_SNDBUF`; None leaves the operating system's default.",
        "`send.buffer.bytes`",
    ),
    "security_protocol": OptionDoc(
        "`PLAINTEXT`, `SSL` (TLS), `SASL_PLAINTEXT` or `SASL_SSL` (SASL over TLS).",
        "`security.protocol`",
        "`security_protocol`",
    ),
    "ssl_context": OptionDoc(
        "The TLS settings (CA, client certificate, ciphers). None with `SSL`/`SASL_SSL`: a "
        "default context that verifies the broker against the system CAs. Only valid with "
        "`SSL`/`SASL_SSL`.",
        "`ssl.truststore.*`, `ssl.keystore.*`",
        "`ssl_context`",
    ),
    "ssl_check_hostname": OptionDoc(
        "Verify that the broker's certificate names the host connected to. Applies to the "
        "default context only; a context you pass is used as is.",
        '`ssl.endpoint.identification.algorithm` (`"https"` / `""`)',
        "`check_hostname` of `create_ssl_context()`",
    ),
    "sasl_mechanism": OptionDoc(
        "`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512` or `OAUTHBEARER` (with `SASL_PLAINTEXT` "
        "or `SASL_SSL`).",
        "`sasl.mechanism`",
        "`sasl_mechanism`",
    ),
    "sasl_plain_username": OptionDoc(
        "User name for PLAIN and SCRAM.",
        "`username` in `sasl.jaas.config`",
        "`sasl_plain_username`",
    ),
    "sasl_plain_password": OptionDoc(
        "Password for PLAIN and SCRAM (never shown by `repr()`).",
        "`password` in `sasl.jaas.config`",
        "`sasl_plain_password`",
    ),
    "sasl_oauth_token_provider": OptionDoc(
        "For OAUTHBEARER: a function, sync or async, returning the bearer token; called for "
        "every new connection.",
        "`sasl.login.callback.handler.class`",
        "`sasl_oauth_token_provider` (an object with `async token()`)",
        type="Callable[[], str | Awaitable[str]] | None",
    ),
    "sasl_scram_max_iterations": OptionDoc(
        "Most PBKDF2 iterations a broker's SCRAM challenge may ask for; more fails the login "
        "with `SaslAuthenticationFailedError` (each iteration costs CPU time; Kafka stores "
        "credentials with 4096 to 16384).",
        "— (Kafka's ScramMechanism maximum, 16384)",
        "—",
    ),
}

PRODUCER: dict[str, OptionDoc] = {
    "acks": OptionDoc(
        "How many replicas must have the record before the broker acknowledges: `0` (no "
        'answer), `1` (the leader), `"all"` (every in-sync replica).',
        "`acks`",
        "`acks` (default 1, or all with idempotence)",
        type='0 | 1 | "all"',
        default='`"all"`',
        default_for=-1,
    ),
    "linger_ms": OptionDoc(
        "Wait up to this long for more records before sending a batch that is not full "
        "(larger batches, fewer requests).",
        "`linger.ms`",
        "`linger_ms` (default 0)",
    ),
    "batch_size": OptionDoc(
        "Target size of one partition's record batch in bytes (a single larger record gets "
        "a batch of its own). With compression, the estimated *compressed* size, as in Java: "
        "well-compressing records travel many more per batch (at most `max_request_size` "
        "uncompressed); see [the producer guide](../producer.md#compressed-batches).",
        "`batch.size`",
        "`max_batch_size`",
    ),
    "buffer_memory": OptionDoc(
        "Bytes of records the producer may hold; when full, `send()`/`enqueue()` wait (up "
        "to `max_block_ms`).",
        "`buffer.memory`",
    ),
    "compression_type": OptionDoc(
        "Batch compression codec.",
        "`compression.type`",
        "`compression_type`",
        type='"none" | "gzip" | "snappy" | "lz4" | "zstd"',
    ),
    "max_request_size": OptionDoc(
        "Largest Produce request, and so the largest record, in bytes; larger records fail "
        "with `RecordTooLargeError` before anything is sent.",
        "`max.request.size`",
        "`max_request_size`",
    ),
    "delivery_timeout_ms": OptionDoc(
        "Upper bound from `enqueue()` to success or failure, retries included; a record "
        "still undelivered then fails with `KafkaTimeoutError`. At least `linger_ms + "
        "request_timeout_ms`.",
        "`delivery.timeout.ms`",
    ),
    "enable_idempotence": OptionDoc(
        'None: on when `acks="all"`, at most 5 requests are in flight and the broker '
        "supports it (else off, with a log line). True: required (an error otherwise). "
        "False: off.",
        "`enable.idempotence` (default true)",
        "`enable_idempotence` (default False)",
    ),
    "partitioner": OptionDoc(
        "Chooses the partition of records sent without `partition=`: `(key_bytes, "
        "all_partitions, available_partitions) -> partition`. Default: murmur2 of the key as "
        "the Java client, sticky for keyless records (KIP-794).",
        "`partitioner.class`",
        "`partitioner` (same signature)",
        type='Callable | "murmur2" | None',
    ),
    "max_block_ms": OptionDoc(
        "How long `send()`/`enqueue()` wait for buffer space or topic metadata, and "
        "transactional calls for their result, before `KafkaTimeoutError`.",
        "`max.block.ms`",
    ),
    "key_serializer": OptionDoc(
        "Turns the `key` you pass into bytes: a function, an `async def` function (awaited "
        "in `send`) or a `kafkaio.serde.Serializer` (see [Serialization](../serialization.md)); "
        "None: keys must be bytes or None.",
        "`key.serializer`",
        "`key_serializer`",
        type="Callable[[Any], bytes | None] | Serializer | None",
    ),
    "value_serializer": OptionDoc(
        "Turns the `value` you pass into bytes: a function, an `async def` function (awaited "
        "in `send`) or a `kafkaio.serde.Serializer` (see [Serialization](../serialization.md)); "
        "None: values must be bytes or None.",
        "`value.serializer`",
        "`value_serializer`",
        type="Callable[[Any], bytes | None] | Serializer | None",
    ),
    "interceptors": OptionDoc(
        "Objects with `on_send(record)` (may return a changed `ProducerRecord`), "
        "`on_acknowledgement(metadata, error)` and/or `close()`.",
        "`interceptor.classes`",
        type="Sequence[object]",
    ),
    "transactional_id": OptionDoc(
        "Makes the producer transactional (and idempotent); `start()` fences older producers "
        "with the same id. See [Transactions](../transactions.md).",
        "`transactional.id`",
        "`transactional_id`",
    ),
    "transaction_timeout_ms": OptionDoc(
        "The coordinator aborts a transaction left open longer than this.",
        "`transaction.timeout.ms`",
        "`transaction_timeout_ms`",
    ),
}
# ProducerConfig fields that are set from a connection option, not from their own name.
PRODUCER_FROM_CONNECTION = {
    "request_timeout_ms": "request_timeout_ms",
    "max_in_flight": "max_in_flight_requests_per_connection",
}

CONSUMER: dict[str, OptionDoc] = {
    "group_id": OptionDoc(
        "The consumer group. Needed for `subscribe()` and commits; with `assign()` it makes "
        "positions start at the group's committed offsets. None: no group.",
        "`group.id`",
        "`group_id`",
    ),
    "max_partition_fetch_bytes": OptionDoc(
        "Upper bound of the data one partition contributes to a fetch response.",
        "`max.partition.fetch.bytes`",
        "`max_partition_fetch_bytes`",
    ),
    "fetch_buffer_max_bytes": OptionDoc(
        "Bytes of fetched-but-not-yet-consumed data kept in memory (prefetch); fetching "
        "pauses above it. None: 2 x `fetch_max_bytes`.",
    ),
    "max_poll_records": OptionDoc(
        "Most records one `getmany()` returns (None: whatever is buffered, which can be the "
        "whole prefetch; huge lists cost more in garbage collection than they save; from "
        "each fetched chunk at most one record per 7 bytes of it, so compression cannot "
        "multiply the records of one call); `getone()` and `async for` collect at most "
        "min(this, 500) at a time.",
        "`max.poll.records`",
        "`max_poll_records`",
    ),
    "auto_offset_reset": OptionDoc(
        "Where to start when there is no committed offset or it is out of range: "
        '`"earliest"`, `"latest"` or `"none"` (raise `NoOffsetForPartitionError` / '
        "`OffsetOutOfRangeError`).",
        "`auto.offset.reset`",
        "`auto_offset_reset`",
    ),
    "isolation_level": OptionDoc(
        '`"read_committed"`: only records of committed transactions, up to the last stable '
        'offset. `"read_uncommitted"`: everything.',
        "`isolation.level`",
        "`isolation_level`",
    ),
    "check_crcs": OptionDoc(
        "Verify each record batch's CRC-32C (a mismatch raises `CorruptRecordError`).",
        "`check.crcs`",
        "`check_crcs`",
    ),
    "exclude_internal_topics": OptionDoc(
        "Pattern subscriptions never match internal topics (`__consumer_offsets`, ...).",
        "`exclude.internal.topics`",
        "`exclude_internal_topics`",
    ),
    "allow_auto_create_topics": OptionDoc(
        "Let metadata requests create subscribed topics that do not exist (when the broker "
        "allows it).",
        "`allow.auto.create.topics` (default true)",
    ),
    "enable_auto_commit": OptionDoc(
        "Commit the positions of handed-out records every `auto_commit_interval_ms`, before "
        "partitions are revoked and on `close()`.",
        "`enable.auto.commit`",
        "`enable_auto_commit`",
    ),
    "auto_commit_interval_ms": OptionDoc(
        "Period of auto-commits.",
        "`auto.commit.interval.ms`",
        "`auto_commit_interval_ms`",
    ),
    "session_timeout_ms": OptionDoc(
        "Classic protocol: a member without a heartbeat for this long is removed from the "
        "group (its partitions move).",
        "`session.timeout.ms`",
        "`session_timeout_ms` (default 10000)",
    ),
    "heartbeat_interval_ms": OptionDoc(
        "Classic protocol: time between heartbeats; lower than `session_timeout_ms` "
        "(usually a third of it).",
        "`heartbeat.interval.ms`",
        "`heartbeat_interval_ms`",
    ),
    "max_poll_interval_ms": OptionDoc(
        "Longest time between two polls (`getmany`, `getone`, iteration) before the member "
        "leaves the group and its partitions count as lost; it rejoins at the next poll.",
        "`max.poll.interval.ms`",
        "`max_poll_interval_ms`",
    ),
    "rebalance_timeout_ms": OptionDoc(
        "Time members get to rejoin (revoke and commit) during a rebalance. None: "
        "`max_poll_interval_ms`, as in Java.",
        "— (Java uses `max.poll.interval.ms`)",
        "`rebalance_timeout_ms`",
    ),
    "partition_assignment_strategy": OptionDoc(
        'Classic protocol: assignor names (`"range"`, `"roundrobin"`, `"sticky"`, '
        '`"cooperative-sticky"`), assignor objects or classes, in preference order. Empty: '
        "range. See [Rebalancing](../concepts/rebalancing.md).",
        "`partition.assignment.strategy`",
        "`partition_assignment_strategy` (classes; default round robin)",
        type="str | Sequence[str | ConsumerPartitionAssignor]",
        default="`()` (range)",
        default_for=(),
    ),
    "group_instance_id": OptionDoc(
        "Static membership (KIP-345): a restart with the same id within the session timeout "
        "keeps the assignment without a rebalance.",
        "`group.instance.id`",
        "`group_instance_id`",
    ),
    "group_protocol": OptionDoc(
        '`"classic"` (JoinGroup/SyncGroup, a member assigns) or `"consumer"` (KIP-848 '
        "ConsumerGroupHeartbeat, the broker assigns).",
        "`group.protocol`",
    ),
    "group_remote_assignor": OptionDoc(
        '`group_protocol="consumer"` only: the broker-side assignor (`"uniform"`, '
        '`"range"`); None lets the broker choose.',
        "`group.remote.assignor`",
    ),
    "interceptors": OptionDoc(
        "Objects with `on_consume(records)` (sees what a poll returns before the application "
        "and may return changed records), `on_commit(offsets)` (each successful commit) "
        "and/or `close()`, run in the application's task; errors are logged "
        "(`kafkaio.consumer.interceptors`).",
        "`interceptor.classes`",
        type="Sequence[object]",
    ),
}

SHARE_CONSUMER: dict[str, OptionDoc] = {
    "acknowledgement_mode": OptionDoc(
        '`"implicit"`: records a poll returned and you did not acknowledge are accepted when '
        'the next poll starts. `"explicit"`: acknowledge every record before the next poll.',
        "`share.acknowledgement.mode`",
    ),
    "max_poll_records": OptionDoc(
        "Most records one `poll()` returns.",
        "`max.poll.records`",
    ),
    "on_acknowledgement": OptionDoc(
        "Called on the application side with each `AckOutcome` (partition, offsets, error) "
        "once the broker answered an acknowledgement.",
        "`AcknowledgementCommitCallback`",
    ),
}

ADMIN_DEFAULTS = {
    "default_api_timeout_ms": 60_000,
    "retry_backoff_ms": 100,
    "retry_backoff_max_ms": 1000,
}
ADMIN: dict[str, OptionDoc] = {
    "default_api_timeout_ms": OptionDoc(
        "Deadline of each Admin call that is not given `timeout_ms=`; retriable errors are "
        "retried until then.",
        "`default.api.timeout.ms`",
    ),
}

INTRO = """\
---
hide:
  - toc
---

# Configuration reference

<!-- Generated by tools/gen_config_docs.py from the config classes; do not edit by hand.
     Regenerate with: python tools/gen_config_docs.py -->

Every client takes its options as keyword arguments with the Java client's names in
snake_case (`linger.ms` is `linger_ms`). Each client accepts the
[connection options](#connection-options) plus its own; an unknown name or a bad value raises
`KafkaConfigError` when the client is constructed, with a did-you-mean hint for typos:

```python
from kafkaio import Consumer, Producer

producer = Producer("broker:9092", acks="all", linger_ms=10, compression_type="zstd")
consumer = Consumer("orders", bootstrap_servers="broker:9092", group_id="billing",
                    auto_offset_reset="earliest", security_protocol="SASL_SSL",
                    sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="billing",
                    sasl_plain_password="secret")
```

The options are typed for editors and type checkers (`**options: Unpack[ProducerOptions]`,
TypedDicts in `kafkaio.options`): an IDE completes the names, and mypy or pyright flag
`Producer("b:9092", lingr_ms=5)` before it runs.

Times are milliseconds and sizes bytes. The last column names the equivalent setting of the
Apache Kafka Java client and of aiokafka 0.14 (with its default when it differs from
kafkaio's); "—" means that client has no such option.
"""

SECTIONS: list[tuple[str, str]] = [
    (
        "Connection options",
        "Accepted by `Producer`, `Consumer`, `ShareConsumer` and `Admin` (`ConnectionConfig` in "
        "`kafkaio/net/config.py`). See [Security](../how-to/security.md) for TLS and SASL.",
    ),
    (
        "Producer options",
        "`Producer(bootstrap_servers, **options)` (`ProducerConfig` in "
        "`kafkaio/producer/config.py`). `request_timeout_ms` and "
        "`max_in_flight_requests_per_connection` are connection options.",
    ),
    (
        "Consumer options",
        '`Consumer(*topics, bootstrap_servers="localhost:9092", group_id=None, **options)` '
        "(`ConsumerConfig` in `kafkaio/consumer/config.py`). The group options apply when "
        "`group_id` is set.",
    ),
    (
        "Share consumer options",
        "`ShareConsumer(*topics, bootstrap_servers, group_id, **options)` for share groups "
        "(KIP-932; `ShareConsumerConfig` in `kafkaio/share/config.py`).",
    ),
    (
        "Admin options",
        "`Admin(bootstrap_servers, **options)` (`kafkaio/admin/core.py`).",
    ),
]


def _doc(name: str, own: dict[str, OptionDoc], where: str) -> OptionDoc:
    doc = own.get(name) or COMMON.get(name)
    if doc is None:
        raise SystemExit(
            f"{where} option {name!r} has no documentation: add it to tools/gen_config_docs.py "
            "(OPTIONS tables), then regenerate"
        )
    return doc


def _default_text(field: dataclasses.Field[Any]) -> str:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "required"
    if isinstance(value, enum.Enum):
        return f'`"{value.name.lower()}"`'
    if callable(value):
        return f"`{getattr(value, '__name__', repr(value))}`"
    if isinstance(value, str):
        return f"`{json.dumps(value)}`"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, int) and value >= MIB and value % MIB == 0:
            return f"{value} ({value // MIB} MiB)"
        return f"{value:g}" if isinstance(value, float) else str(value)
    return f"`{value!r}`"


def _row(name: str, type_text: str, default: str, doc: OptionDoc) -> str:
    equivalents = f"{doc.java}<br>aiokafka: {doc.aiokafka}"
    return f"| `{name}`<br>`{type_text}` | {default} | {doc.meaning} | {equivalents} |"


def _table(rows: Iterable[str]) -> list[str]:
    return [
        "| option and type | default | meaning | Java / aiokafka |",
        "| --- | --- | --- | --- |",
        *rows,
    ]


def _field_rows(
    cls: type, names: Sequence[str], own: dict[str, OptionDoc], where: str
) -> list[str]:
    by_name = {f.name: f for f in dataclasses.fields(cls)}
    rows = []
    for name in names:
        doc = _doc(name, own, where)
        field = by_name[name]
        type_text = doc.type or str(field.type)
        default = _default_text(field)
        if doc.default is not None:
            if doc.default_for is not None and field.default != doc.default_for:
                raise SystemExit(
                    f"{where} option {name!r}: the default changed to {field.default!r}; update "
                    "its `default` in tools/gen_config_docs.py"
                )
            default = doc.default
        rows.append(_row(name, type_text, default, doc))
    return rows


def check_coverage() -> None:
    """Raise SystemExit when an option of a config class is missing or unknown here."""
    producer_fields = {f.name for f in dataclasses.fields(ProducerConfig)}
    unexpected = producer_fields - set(PRODUCER_OPTIONS) - set(PRODUCER_FROM_CONNECTION)
    missing = set(PRODUCER_OPTIONS) - producer_fields
    if unexpected or missing:
        raise SystemExit(
            f"ProducerConfig fields and PRODUCER_OPTIONS disagree (fields not options: "
            f"{sorted(unexpected)}, options not fields: {sorted(missing)}); update "
            "tools/gen_config_docs.py"
        )
    share_fields = {f.name for f in dataclasses.fields(ShareConsumerConfig)}
    if share_fields != set(SHARE_CONSUMER_OPTIONS):
        raise SystemExit(
            "ShareConsumerConfig fields and SHARE_CONSUMER_OPTIONS disagree: "
            f"{sorted(share_fields ^ set(SHARE_CONSUMER_OPTIONS))}"
        )
    if set(ADMIN_OPTIONS) != set(ADMIN_DEFAULTS):
        raise SystemExit(
            f"Admin options changed ({sorted(ADMIN_OPTIONS)}): update ADMIN_DEFAULTS in "
            "tools/gen_config_docs.py"
        )
    stale = (
        set(CONNECTION) - {f.name for f in dataclasses.fields(ConnectionConfig)}
        | set(PRODUCER) - set(PRODUCER_OPTIONS)
        | set(CONSUMER) - {f.name for f in dataclasses.fields(ConsumerConfig)}
        | set(SHARE_CONSUMER) - share_fields
        | set(ADMIN) - set(ADMIN_OPTIONS)
    )
    if stale:
        raise SystemExit(f"documented options that no longer exist: {sorted(stale)}")


def render() -> str:
    """The whole configuration reference page."""
    check_coverage()
    out = [INTRO]
    tables = [
        _field_rows(
            ConnectionConfig,
            [f.name for f in dataclasses.fields(ConnectionConfig)],
            CONNECTION,
            "ConnectionConfig",
        ),
        _field_rows(ProducerConfig, list(PRODUCER_OPTIONS), PRODUCER, "Producer"),
        _field_rows(
            ConsumerConfig,
            [f.name for f in dataclasses.fields(ConsumerConfig)],
            CONSUMER,
            "Consumer",
        ),
        _field_rows(
            ShareConsumerConfig,
            [f.name for f in dataclasses.fields(ShareConsumerConfig)],
            SHARE_CONSUMER,
            "ShareConsumer",
        ),
        [
            _row(name, "int", f"{ADMIN_DEFAULTS[name]}", _doc(name, ADMIN, "Admin"))
            for name in ADMIN_OPTIONS
        ],
    ]
    for (title, text), rows in zip(SECTIONS, tables, strict=True):
        out += [f"## {title}", "", text, "", *_table(rows), ""]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the committed page is out of date"
    )
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT.relative_to(ROOT)} is out of date: run python tools/gen_config_docs.py")
            return 1
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
