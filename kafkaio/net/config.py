"""Settings of broker connections (``ConnectionConfig``), with the Java client's names.

Validated when built: a wrong value raises KafkaConfigError saying which and why.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, fields

from kafkaio.errors import KafkaConfigError
from kafkaio.net.sasl import (
    DEFAULT_MAX_SCRAM_ITERATIONS,
    KAFKA_MIN_SCRAM_ITERATIONS,
    MAX_SCRAM_ITERATIONS_LIMIT,
    SCRAM_HASHES,
    TokenProvider,
)
from kafkaio.redact import masked_repr
from kafkaio.validate import check_bool

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", *SCRAM_HASHES, "OAUTHBEARER")
_MIB = 1024 * 1024


@dataclass(slots=True, repr=False)
class ConnectionConfig:
    """How to reach, secure and pace broker connections.

    Times are milliseconds, as in the Java client. With ``security_protocol`` SSL or SASL_SSL
    and no ``ssl_context``, a default context is created that verifies the broker's
    certificate against the system CAs and, unless ``ssl_check_hostname`` is False, its host
    name. A context you pass is used as is (``ssl_check_hostname`` then does not change it).
    ``repr()`` never shows the password or the token provider.
    """

    client_id: str | None = "kafkaio"
    request_timeout_ms: int = 30_000
    connect_timeout_ms: int = 10_000
    connections_max_idle_ms: int = 540_000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1_000
    max_in_flight_requests_per_connection: int = 5
    max_response_size: int = 100 * _MIB + _MIB
    receive_buffer_bytes: int | None = None
    send_buffer_bytes: int | None = None
    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    ssl_check_hostname: bool = True
    sasl_mechanism: str = "PLAIN"
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = None
    sasl_oauth_token_provider: TokenProvider | None = None
    sasl_scram_max_iterations: int = DEFAULT_MAX_SCRAM_ITERATIONS

    def __post_init__(self) -> None:
        for name, minimum in (
            ("request_timeout_ms", 1),
            ("connect_timeout_ms", 1),
            ("connections_max_idle_ms", 1),
            ("reconnect_backoff_ms", 0),
            ("reconnect_backoff_max_ms", 0),
            ("max_in_flight_requests_per_connection", 1),
            ("max_response_size", 1024),
            ("sasl_scram_max_iterations", KAFKA_MIN_SCRAM_ITERATIONS),
        ):
            _check_int(name, getattr(self, name), minimum)
        if self.sasl_scram_max_iterations > MAX_SCRAM_ITERATIONS_LIMIT:
            raise KafkaConfigError(
                f"sasl_scram_max_iterations must be <= {MAX_SCRAM_ITERATIONS_LIMIT}, got "
                f"{self.sasl_scram_max_iterations}"
            )
        for name in ("receive_buffer_bytes", "send_buffer_bytes"):
            value = getattr(self, name)
            if value is not None:
                _check_int(name, value, 1024)
        check_bool("ssl_check_hostname", self.ssl_check_hostname)
        if self.client_id is not None and not isinstance(self.client_id, str):
            raise KafkaConfigError(f"client_id must be a str or None, got {self.client_id!r}")
        self._check_security()

    def _check_security(self) -> None:
        protocol = str(self.security_protocol).upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise KafkaConfigError(
                f"security_protocol {self.security_protocol!r} is not one of "
                f"{', '.join(SECURITY_PROTOCOLS)}"
            )
        self.security_protocol = protocol
        if self.ssl_context is not None and not isinstance(self.ssl_context, ssl.SSLContext):
            raise KafkaConfigError(
                f"ssl_context must be an ssl.SSLContext, got {type(self.ssl_context).__name__}"
            )
        if self.uses_tls:
            if self.ssl_context is None:
                context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
                context.check_hostname = bool(self.ssl_check_hostname)
                self.ssl_context = context
        elif self.ssl_context is not None:
            raise KafkaConfigError(
                f"ssl_context is set but security_protocol is {protocol}, so it would not be "
                "used; set security_protocol to SSL or SASL_SSL"
            )
        mechanism = str(self.sasl_mechanism).upper()
        if mechanism not in SASL_MECHANISMS:
            raise KafkaConfigError(
                f"sasl_mechanism {self.sasl_mechanism!r} is not one of {', '.join(SASL_MECHANISMS)}"
            )
        self.sasl_mechanism = mechanism
        has_credentials = (
            self.sasl_plain_username is not None
            or self.sasl_plain_password is not None
            or self.sasl_oauth_token_provider is not None
        )
        if not self.uses_sasl:
            if has_credentials:
                raise KafkaConfigError(
                    f"SASL credentials are set but security_protocol is {protocol}, so they "
                    "would not be used; set security_protocol to SASL_PLAINTEXT or SASL_SSL"
                )
            return
        if mechanism == "OAUTHBEARER":
            if not callable(self.sasl_oauth_token_provider):
                raise KafkaConfigError(
                    "sasl_mechanism OAUTHBEARER needs sasl_oauth_token_provider: a function "
                    "(sync or async) returning the bearer token"
                )
            return
        for name in ("sasl_plain_username", "sasl_plain_password"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise KafkaConfigError(f"sasl_mechanism {mechanism} needs {name} (a non-empty str)")

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def sends_credentials_in_clear(self) -> bool:
        """PLAIN's password or OAUTHBEARER's token would cross the network unencrypted
        (SASL_PLAINTEXT); SCRAM sends neither."""
        return self.security_protocol == "SASL_PLAINTEXT" and self.sasl_mechanism in (
            "PLAIN",
            "OAUTHBEARER",
        )

    def __repr__(self) -> str:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.ssl_context is not None:
            values["ssl_context"] = _Shown(f"<{type(self.ssl_context).__name__}>")
        return masked_repr(self, values)

    __str__ = __repr__


class _Shown(str):
    """A string shown as is by repr()."""

    def __repr__(self) -> str:
        return str(self)


def _check_int(name: str, value: object, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise KafkaConfigError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise KafkaConfigError(f"{name} must be >= {minimum}, got {value}")
