"""Producer options: names, defaults and validation (the Java client's names in snake_case).

``ProducerConfig.from_options`` raises KafkaConfigError for a bad value, at construction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafkaio.errors import KafkaConfigError
from kafkaio.net.config import ConnectionConfig
from kafkaio.records import Compression
from kafkaio.serde.base import FieldCodec

# A custom partitioner: (serialized key or None, all partitions, available partitions) -> index.
PartitionerFn = Callable[[bytes | None, Sequence[int], Sequence[int]], int]
# A plain or async callable (value -> bytes), or a kafkaio.serde.Serializer.
Serializer = Any

MIB = 1024 * 1024
MAX_IDEMPOTENT_IN_FLIGHT = 5

PRODUCER_OPTIONS = (
    "acks",
    "linger_ms",
    "batch_size",
    "buffer_memory",
    "compression_type",
    "max_request_size",
    "delivery_timeout_ms",
    "retry_backoff_ms",
    "retry_backoff_max_ms",
    "enable_idempotence",
    "partitioner",
    "metadata_max_age_ms",
    "max_block_ms",
    "key_serializer",
    "value_serializer",
    "interceptors",
    "transactional_id",
    "transaction_timeout_ms",
)


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """Validated producer settings. Defaults follow the Java client 4.0.

    ``linger_ms`` defaults to 5 as in Java 4.0 (KIP-1030): a few ms of batching costs little
    latency and makes batches much larger under load. ``enable_idempotence`` None means the
    default: on when acks="all" and max_in_flight <= 5 and the broker supports it; off, with
    a log line, otherwise. True means required (an error if the broker cannot do it).
    ``transactional_id`` makes the producer transactional (and idempotence required);
    ``transaction_timeout_ms`` is sent in InitProducerId: the coordinator aborts a transaction
    left open longer than that.
    """

    acks: int = -1
    linger_ms: float = 5.0
    batch_size: int = 16384
    buffer_memory: int = 32 * MIB
    compression_type: Compression = Compression.NONE
    max_request_size: int = MIB
    request_timeout_ms: float = 30_000.0
    delivery_timeout_ms: float = 120_000.0
    retry_backoff_ms: float = 100.0
    retry_backoff_max_ms: float = 1000.0
    max_in_flight: int = 5
    enable_idempotence: bool | None = None
    partitioner: PartitionerFn | None = None  # None: the default (murmur2 + sticky)
    metadata_max_age_ms: float = 300_000.0
    max_block_ms: float = 60_000.0
    key_serializer: Serializer | None = None
    value_serializer: Serializer | None = None
    interceptors: tuple[Any, ...] = ()
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60_000

    @property
    def idempotence_wanted(self) -> bool:
        """Whether to try idempotence (explicitly on, or on by default and not in conflict)."""
        if self.transactional_id is not None:
            return True
        if self.enable_idempotence is not None:
            return self.enable_idempotence
        return self.acks == -1 and self.max_in_flight <= MAX_IDEMPOTENT_IN_FLIGHT

    @property
    def idempotence_required(self) -> bool:
        return self.enable_idempotence is True or self.transactional_id is not None

    @classmethod
    def from_options(cls, options: Mapping[str, Any], conn: ConnectionConfig) -> ProducerConfig:
        """Build from the producer's own options (see PRODUCER_OPTIONS) and the connection's."""
        o = dict(options)
        acks = _parse_acks(o.pop("acks", "all"))
        compression = o.pop("compression_type", None)
        try:
            codec = Compression.parse("none" if compression is None else compression)
        except (KafkaConfigError, ValueError, KeyError) as exc:
            raise KafkaConfigError(
                f"compression_type {compression!r} is unknown; use one of "
                "'none', 'gzip', 'snappy', 'lz4', 'zstd'"
            ) from exc
        partitioner = o.pop("partitioner", None)
        if isinstance(partitioner, str):
            if partitioner not in ("murmur2", "default"):
                raise KafkaConfigError(
                    f"partitioner {partitioner!r} is unknown; use 'murmur2' (the default) or "
                    "a callable (key_bytes, all_partitions, available_partitions) -> partition"
                )
            partitioner = None
        elif partitioner is not None and not callable(partitioner):
            raise KafkaConfigError("partitioner must be 'murmur2' or a callable")
        for name in ("key_serializer", "value_serializer"):
            if o.get(name) is not None:
                FieldCodec(o[name], name.split("_")[0], deserializer=False)  # raises if unusable
        idem = o.pop("enable_idempotence", None)
        if idem is not None and not isinstance(idem, bool):
            raise KafkaConfigError(f"enable_idempotence must be True or False, got {idem!r}")
        interceptors = tuple(o.pop("interceptors", None) or ())
        transactional_id = o.pop("transactional_id", None)
        if transactional_id is not None and (
            not isinstance(transactional_id, str) or not transactional_id
        ):
            raise KafkaConfigError(
                f"transactional_id must be a non-empty string, got {transactional_id!r}"
            )
        txn_timeout = o.pop("transaction_timeout_ms", 60_000)
        if isinstance(txn_timeout, bool) or not isinstance(txn_timeout, int) or txn_timeout <= 0:
            raise KafkaConfigError(
                f"transaction_timeout_ms must be a positive integer, got {txn_timeout!r}"
            )
        key_serializer = o.pop("key_serializer", None)
        value_serializer = o.pop("value_serializer", None)
        numbers: dict[str, Any] = {name: _number(name, value) for name, value in o.items()}
        config = cls(
            acks=acks,
            compression_type=codec,
            partitioner=partitioner,
            enable_idempotence=idem,
            request_timeout_ms=float(conn.request_timeout_ms),
            max_in_flight=conn.max_in_flight_requests_per_connection,
            interceptors=interceptors,
            key_serializer=key_serializer,
            value_serializer=value_serializer,
            transactional_id=transactional_id,
            transaction_timeout_ms=txn_timeout,
            **numbers,
        )
        config._validate()
        return config

    def _validate(self) -> None:
        for name in ("batch_size", "buffer_memory", "max_request_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise KafkaConfigError(f"{name} must be a positive integer, got {value!r}")
        for name in (
            "linger_ms",
            "retry_backoff_ms",
            "retry_backoff_max_ms",
            "metadata_max_age_ms",
            "max_block_ms",
        ):
            if getattr(self, name) < 0:
                raise KafkaConfigError(f"{name} must be 0 or positive, got {getattr(self, name)}")
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
            raise KafkaConfigError(
                f"delivery_timeout_ms ({self.delivery_timeout_ms:g}) must be at least "
                f"linger_ms + request_timeout_ms ({self.linger_ms + self.request_timeout_ms:g}); "
                "raise delivery_timeout_ms or lower the other two"
            )
        if self.transactional_id is not None:
            if self.enable_idempotence is False:
                raise KafkaConfigError(
                    "a transactional producer is idempotent: transactional_id cannot be used "
                    "with enable_idempotence=False; drop one of the two"
                )
            if self.acks != -1:
                raise KafkaConfigError(
                    f"a transactional producer needs acks='all', got acks={self.acks}; set "
                    "acks='all' (the default) or drop transactional_id"
                )
            if self.max_in_flight > MAX_IDEMPOTENT_IN_FLIGHT:
                raise KafkaConfigError(
                    "a transactional producer needs max_in_flight_requests_per_connection <= "
                    f"5, got {self.max_in_flight}; lower it or drop transactional_id"
                )
        if self.enable_idempotence:
            if self.acks != -1:
                raise KafkaConfigError(
                    f"enable_idempotence=True needs acks='all', got acks={self.acks}; set "
                    "acks='all' or enable_idempotence=False"
                )
            if self.max_in_flight > MAX_IDEMPOTENT_IN_FLIGHT:
                raise KafkaConfigError(
                    "enable_idempotence=True needs max_in_flight_requests_per_connection <= 5, "
                    f"got {self.max_in_flight}; lower it or set enable_idempotence=False"
                )
        for interceptor in self.interceptors:
            if not (hasattr(interceptor, "on_send") or hasattr(interceptor, "on_acknowledgement")):
                raise KafkaConfigError(
                    f"interceptor {interceptor!r} has neither on_send(record) nor "
                    "on_acknowledgement(metadata, error)"
                )


def _parse_acks(value: object) -> int:
    if value in ("all", -1, "-1"):
        return -1
    if value in (0, 1, "0", "1"):
        return int(str(value))
    raise KafkaConfigError(f"acks must be 0, 1 or 'all' (-1), got {value!r}")


def _number(name: str, value: object) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise KafkaConfigError(f"{name} must be a number, got {value!r}")
    return value
