"""ConnectionConfig: defaults, validation messages, TLS context, repr redaction."""

from __future__ import annotations

import ssl
from typing import Any

import pytest

from kafkaio.errors import KafkaConfigError
from kafkaio.net.config import ConnectionConfig


def test_defaults_follow_java_client() -> None:
    c = ConnectionConfig()
    assert (c.client_id, c.request_timeout_ms, c.connections_max_idle_ms) == (
        "kafkaio",
        30000,
        540000,
    )
    assert (c.reconnect_backoff_ms, c.reconnect_backoff_max_ms) == (50, 1000)
    assert c.max_in_flight_requests_per_connection == 5
    assert c.max_response_size > 100 * 1024 * 1024
    assert c.security_protocol == "PLAINTEXT" and c.ssl_context is None
    assert not c.uses_tls and not c.uses_sasl


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"request_timeout_ms": 0}, "request_timeout_ms must be >= 1"),
        ({"request_timeout_ms": "30"}, "request_timeout_ms must be an int"),
        ({"max_in_flight_requests_per_connection": 0}, "max_in_flight"),
        ({"reconnect_backoff_ms": -1}, "reconnect_backoff_ms"),
        ({"max_response_size": 10}, "max_response_size"),
        ({"receive_buffer_bytes": 5}, "receive_buffer_bytes"),
        ({"connect_timeout_ms": True}, "connect_timeout_ms must be an int"),
        ({"client_id": 5}, "client_id"),
        ({"security_protocol": "TLS"}, "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
        ({"ssl_context": "yes", "security_protocol": "SSL"}, "ssl.SSLContext"),
        ({"ssl_context": ssl.create_default_context()}, "security_protocol is PLAINTEXT"),
        ({"sasl_plain_username": "u"}, "SASL credentials are set"),
        ({"security_protocol": "SASL_PLAINTEXT"}, "needs sasl_plain_username"),
        (
            {"security_protocol": "SASL_PLAINTEXT", "sasl_plain_username": "u"},
            "needs sasl_plain_password",
        ),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI"}, "sasl_mechanism 'GSSAPI'"),
        (
            {"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER"},
            "needs sasl_oauth_token_provider",
        ),
    ],
)
def test_validation(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(KafkaConfigError, match=match):
        ConnectionConfig(**kwargs)


def test_names_are_normalised() -> None:
    c = ConnectionConfig(
        security_protocol="sasl_plaintext",
        sasl_mechanism="scram-sha-512",
        sasl_plain_username="u",
        sasl_plain_password="p",
    )
    assert (c.security_protocol, c.sasl_mechanism) == ("SASL_PLAINTEXT", "SCRAM-SHA-512")
    assert c.uses_sasl and not c.uses_tls


def test_ssl_gets_a_verifying_default_context() -> None:
    c = ConnectionConfig(security_protocol="SSL")
    assert isinstance(c.ssl_context, ssl.SSLContext)
    assert c.ssl_context.check_hostname is True
    assert c.ssl_context.verify_mode == ssl.CERT_REQUIRED
    relaxed = ConnectionConfig(security_protocol="SSL", ssl_check_hostname=False)
    assert relaxed.ssl_context is not None and relaxed.ssl_context.check_hostname is False
    assert relaxed.ssl_context.verify_mode == ssl.CERT_REQUIRED


def test_given_context_is_used_as_is() -> None:
    ctx = ssl.create_default_context()
    assert (
        ConnectionConfig(
            security_protocol="SASL_SSL",
            ssl_context=ctx,
            sasl_plain_username="u",
            sasl_plain_password="p",
        ).ssl_context
        is ctx
    )


def test_repr_hides_password_and_token() -> None:
    secret, token = "hunter2-password", "tok-SECRET-123"
    c = ConnectionConfig(
        security_protocol="SASL_SSL",
        sasl_plain_username="alice",
        sasl_plain_password=secret,
    )
    for text in (repr(c), str(c), f"{c}"):
        assert secret not in text
        assert "sasl_plain_password='***'" in text and "alice" in text

    def my_token_fn() -> str:
        return token

    o = ConnectionConfig(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=my_token_fn,
    )
    assert (
        "my_token_fn" not in repr(o)
        and token not in repr(o)
        and "sasl_oauth_token_provider='***'" in repr(o)
    )
    assert "sasl_plain_password=None" in repr(ConnectionConfig())
