"""The ``kafka.*`` options of the Spark source and sink turned into kafkaio client options.

Sans-I/O: parses strings only. ``ClientSettings`` is picklable; it builds the SSL context in
the process that creates a client (Spark's Python workers), not where options were parsed.
"""

from __future__ import annotations

import difflib
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from kafkaio.admin.core import ADMIN_OPTIONS
from kafkaio.config import CONNECTION_OPTIONS
from kafkaio.consumer.config import CONSUMER_OPTIONS
from kafkaio.errors import KafkaConfigError
from kafkaio.producer.config import PRODUCER_OPTIONS
from kafkaio.redact import masked, masked_repr

# Options Spark's Kafka source rejects too, with the reason it gives.
_FORBIDDEN = {
    "auto.offset.reset": "use startingOffsets (and failOnDataLoss) instead",
    "enable.auto.commit": "the source commits no offsets to Kafka",
    "key.deserializer": "keys are always binary: cast them in Spark (CAST(key AS STRING))",
    "value.deserializer": "values are always binary: cast them in Spark (CAST(value AS STRING))",
    "key.serializer": "write a string or binary `key` column instead",
    "value.serializer": "write a string or binary `value` column instead",
    "interceptor.classes": "interceptors are Java classes; kafkaio cannot load them",
    "partitioner.class": "write a `partition` column instead",
    "transactional.id": "set deliveryGuarantee=exactly-once (and optionally "
    "transactionalIdPrefix): the sink then gives each task its transactional id",
}
# Java / librdkafka names whose snake_case form is not kafkaio's name.
_ALIASES = {
    "sasl_username": "sasl_plain_username",
    "sasl_password": "sasl_plain_password",
}
# Options whose value stays a string even when it looks like a number or a boolean.
_STRINGS = frozenset(
    {
        "client_id",
        "sasl_plain_username",
        "sasl_plain_password",
        "security_protocol",
        "sasl_mechanism",
        "acks",
        "compression_type",
        "client_rack",
        "isolation_level",
        "group_instance_id",
    }
)
_SSL_KEYS = frozenset(
    {
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.ca.location",
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.endpoint.identification.algorithm",
    }
)
_OWN_OPTIONS = frozenset(
    set(CONNECTION_OPTIONS) | set(CONSUMER_OPTIONS) | set(PRODUCER_OPTIONS) | set(ADMIN_OPTIONS)
)
# Options the source and sink set themselves.
_RESERVED = frozenset(
    {"group_id", "auto_offset_reset", "enable_auto_commit", "ssl_context", "ssl_check_hostname"}
)
_JAAS_VALUE = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, slots=True, repr=False)
class SslFiles:
    """PEM files for TLS (Java's PEM truststore/keystore or librdkafka's locations).
    ``repr()`` masks the key password."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    key_password: str | None = None
    check_hostname: bool = True

    def __repr__(self) -> str:
        return masked_repr(self, {f.name: getattr(self, f.name) for f in fields(self)})

    def context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.ca_file)
        context.check_hostname = self.check_hostname
        if self.cert_file is not None:
            context.load_cert_chain(self.cert_file, self.key_file, self.key_password)
        return context


@dataclass(frozen=True, slots=True, repr=False)
class ClientSettings:
    """Where the brokers are and how to talk to them, for Admin, Consumer and Producer.
    ``repr()`` masks secrets (the SASL password, the key password)."""

    bootstrap_servers: str
    options: Mapping[str, Any] = field(default_factory=dict)
    ssl_files: SslFiles | None = None

    def __repr__(self) -> str:
        return masked_repr(
            self,
            {
                "bootstrap_servers": self.bootstrap_servers,
                "options": masked(self.options),
                "ssl_files": self.ssl_files,
            },
        )

    def _pick(self, names: frozenset[str] | set[str]) -> dict[str, Any]:
        picked = {k: v for k, v in self.options.items() if k in names}
        if self.ssl_files is not None:
            picked["ssl_context"] = self.ssl_files.context()
        return picked

    def admin_options(self) -> dict[str, Any]:
        return self._pick(set(CONNECTION_OPTIONS) | set(ADMIN_OPTIONS))

    def consumer_options(self) -> dict[str, Any]:
        return self._pick(set(CONNECTION_OPTIONS) | set(CONSUMER_OPTIONS))

    def producer_options(self) -> dict[str, Any]:
        return self._pick(set(CONNECTION_OPTIONS) | set(PRODUCER_OPTIONS))


def client_settings(options: Mapping[str, str]) -> ClientSettings:
    """Parse ``kafka.bootstrap.servers`` (or ``bootstrap.servers``) and the other
    ``kafka.*`` options (Kafka's dotted names, e.g. ``kafka.security.protocol``)."""
    opts = {k.lower(): v for k, v in options.items()}
    bootstrap = opts.get("kafka.bootstrap.servers") or opts.get("bootstrap.servers")
    if not bootstrap:
        raise KafkaConfigError(
            "option kafka.bootstrap.servers is required: a comma-separated list of "
            "host:port brokers, e.g. .option('kafka.bootstrap.servers', 'localhost:9092')"
        )
    out: dict[str, Any] = {}
    ssl_opts: dict[str, str] = {}
    for name, value in opts.items():
        if not name.startswith("kafka.") or name == "kafka.bootstrap.servers":
            continue
        key = name[len("kafka.") :]
        if key in _FORBIDDEN:
            raise KafkaConfigError(f"option {name} is not supported: {_FORBIDDEN[key]}")
        if key == "group.id":
            continue  # as Spark's source: it joins no group and commits nothing to it
        if key in _SSL_KEYS:
            ssl_opts[key] = value
            continue
        if key == "sasl.jaas.config":
            out.update(_jaas_credentials(value))
            continue
        snake = key.replace(".", "_").replace("-", "_")
        snake = _ALIASES.get(snake, snake)
        if snake in _RESERVED or snake not in _OWN_OPTIONS:
            known = sorted(
                "kafka." + n.replace("_", ".") for n in _OWN_OPTIONS - _RESERVED
            ) + sorted("kafka." + k for k in _SSL_KEYS)
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise KafkaConfigError(
                f"option {name} is not a Kafka client option kafkaio knows{hint} (kafka.* "
                "options use Kafka's dotted names, e.g. kafka.security.protocol)"
            )
        out[snake] = _convert(snake, value)
    return ClientSettings(str(bootstrap), out, _ssl_files(ssl_opts))


def _convert(name: str, value: Any) -> Any:
    if not isinstance(value, str) or name in _STRINGS:
        return value
    text = value.strip()
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d+\.\d*", text):
        return float(text)
    return value


def _jaas_credentials(config: str) -> dict[str, str]:
    """username/password of a PlainLoginModule or ScramLoginModule JAAS line."""
    if "PlainLoginModule" not in config and "ScramLoginModule" not in config:
        raise KafkaConfigError(
            "option kafka.sasl.jaas.config: only PlainLoginModule and ScramLoginModule "
            "(username=... password=...) are supported; for OAUTHBEARER use kafkaio directly"
        )
    values = {k.lower(): re.sub(r"\\(.)", r"\1", v) for k, v in _JAAS_VALUE.findall(config)}
    if "username" not in values or "password" not in values:
        raise KafkaConfigError(
            'option kafka.sasl.jaas.config needs username="..." and password="..."'
        )
    return {"sasl_plain_username": values["username"], "sasl_plain_password": values["password"]}


def _ssl_files(opts: Mapping[str, str]) -> SslFiles | None:
    if not opts:
        return None
    for type_key in ("ssl.truststore.type", "ssl.keystore.type"):
        if opts.get(type_key, "PEM").upper() != "PEM":
            raise KafkaConfigError(
                f"option kafka.{type_key} is {opts[type_key]!r}: only PEM files are supported "
                "(convert JKS/PKCS12 stores to PEM)"
            )
    cert = opts.get("ssl.certificate.location") or opts.get("ssl.keystore.location")
    return SslFiles(
        ca_file=opts.get("ssl.ca.location") or opts.get("ssl.truststore.location"),
        cert_file=cert,
        key_file=opts.get("ssl.key.location"),
        key_password=opts.get("ssl.key.password") or opts.get("ssl.keystore.password"),
        check_hostname=opts.get("ssl.endpoint.identification.algorithm", "https") != "",
    )
