"""Producer option validation: bad values fail at construction with a clear message."""

from __future__ import annotations

import pytest

from kafkaio.errors import KafkaConfigError
from kafkaio.net.config import ConnectionConfig
from kafkaio.producer import Producer
from kafkaio.producer.config import ProducerConfig
from kafkaio.records import Compression


def config(**options: object) -> ProducerConfig:
    return ProducerConfig.from_options(options, ConnectionConfig())


def test_defaults() -> None:
    c = config()
    assert (c.acks, c.linger_ms, c.batch_size, c.buffer_memory) == (-1, 5.0, 16384, 32 << 20)
    assert c.max_request_size == 1 << 20 and c.delivery_timeout_ms == 120_000
    assert c.compression_type is Compression.NONE
    assert c.idempotence_wanted and not c.idempotence_required


@pytest.mark.parametrize(("acks", "expected"), [("all", -1), (-1, -1), (0, 0), (1, 1), ("1", 1)])
def test_acks(acks: object, expected: int) -> None:
    assert config(acks=acks).acks == expected


def test_idempotence_defaults_off_when_acks_conflict() -> None:
    assert not config(acks=1).idempotence_wanted
    assert not ProducerConfig.from_options(
        {}, ConnectionConfig(max_in_flight_requests_per_connection=6)
    ).idempotence_wanted


@pytest.mark.parametrize(
    ("options", "conn", "words"),
    [
        ({"acks": 2}, {}, "acks must be"),
        ({"enable_idempotence": True, "acks": 1}, {}, "needs acks='all'"),
        ({"enable_idempotence": True}, {"max_in_flight_requests_per_connection": 6}, "<= 5"),
        ({"compression_type": "brotli"}, {}, "compression_type"),
        ({"batch_size": 0}, {}, "batch_size"),
        ({"linger_ms": -1}, {}, "linger_ms"),
        ({"delivery_timeout_ms": 1000}, {}, "delivery_timeout_ms"),
        ({"partitioner": "round-robin"}, {}, "partitioner"),
        ({"interceptors": [object()]}, {}, "interceptor"),
        ({"linger_ms": "5"}, {}, "must be a number"),
    ],
)
def test_invalid_options(options: dict[str, object], conn: dict[str, int], words: str) -> None:
    with pytest.raises(KafkaConfigError, match=words):
        ProducerConfig.from_options(options, ConnectionConfig(**conn))


def test_unknown_option_names_a_close_match() -> None:
    with pytest.raises(KafkaConfigError, match="linger_ms"):
        Producer("localhost:9092", linger_msec=5)


def test_producer_validates_at_construction() -> None:
    with pytest.raises(KafkaConfigError, match="needs acks='all'"):
        Producer("localhost:9092", acks=0, enable_idempotence=True)
