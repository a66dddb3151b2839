"""Connection settings of the command-line tool: the bootstrap servers (flag or
environment) and a ``key=value`` properties file with security settings."""

from __future__ import annotations

import os
import re
import ssl
from pathlib import Path
from typing import Any

from kafkaio.config import CONNECTION_OPTIONS
from kafkaio.errors import KafkaConfigError
from kafkaio.redact import is_secret

BOOTSTRAP_ENV = "KAFKAIO_BOOTSTRAP_SERVERS"

# Properties-file keys (dots or underscores) the tool accepts, mapped to client options.
_STRING_KEYS = (
    "client_id",
    "security_protocol",
    "sasl_mechanism",
    "sasl_plain_username",
    "sasl_plain_password",
)
_INT_KEYS = ("request_timeout_ms", "connect_timeout_ms")
_SSL_KEYS = ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password", "ssl_check_hostname")
# A key, then "=", ":" or whitespace (with optional whitespace around "=" or ":"), then the
# value: the separators of Java's properties files.
_PROPERTY = re.compile(r"([^=:\s]+)\s*(?:[=:]\s*|\s+|$)(.*)")
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


def resolve_bootstrap(flag: str | None) -> str:
    """`--bootstrap`, else $KAFKAIO_BOOTSTRAP_SERVERS; a usage error when neither is set."""
    value = flag or os.environ.get(BOOTSTRAP_ENV, "").strip()
    if not value:
        raise KafkaConfigError(
            f"no bootstrap servers: pass -b HOST:PORT or set {BOOTSTRAP_ENV} "
            "(run `kafkaio broker` to start a local broker)"
        )
    return value


def read_properties(path: str) -> dict[str, str]:
    """Parse a small Java properties file: ``key=value``, ``key: value`` or ``key value``
    lines, ``#``/``!`` comments, blank lines (no escapes or continuation lines). Errors name
    the line and the key, never the value (it may be a password)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise KafkaConfigError(f"cannot read config file {path!r}: {exc.strerror}") from None
    props: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        match = _PROPERTY.fullmatch(line)
        if match is None:  # cannot happen for a stripped non-empty line; never echo it
            raise KafkaConfigError(f"{path}:{number}: expected key=value")
        key = match.group(1).replace(".", "_").lower()
        if line.endswith("\\"):
            raise KafkaConfigError(
                f"{path}:{number}: {key}: continuation lines (a trailing backslash) are not "
                "supported; write the value on one line"
            )
        props[key] = match.group(2)
    return props


def client_options(props: dict[str, str]) -> dict[str, Any]:
    """Client options from properties: strings, ints, booleans, and an SSLContext from
    ssl_* files. Errors name the key; values are shown only for keys holding no secret."""
    options: dict[str, Any] = {}
    for key, value in props.items():
        if key in _STRING_KEYS:
            options[key] = value
        elif key in _INT_KEYS:
            try:
                options[key] = int(value)
            except ValueError:
                raise KafkaConfigError(f"{key} must be an integer, got {value!r}") from None
        elif key not in _SSL_KEYS:
            known = ", ".join(sorted(_STRING_KEYS + _INT_KEYS + _SSL_KEYS))
            raise KafkaConfigError(f"unknown config key {key!r}; known keys: {known}")
    if "ssl_check_hostname" in props:
        options["ssl_check_hostname"] = parse_bool("ssl_check_hostname", props["ssl_check_hostname"])
    if any(props.get(k) for k in ("ssl_cafile", "ssl_certfile")):
        options["ssl_context"] = ssl_context(props)
        options.setdefault("security_protocol", "SSL")
    return options


def parse_bool(key: str, value: str) -> bool:
    """``true``/``false`` (also ``yes``/``no``, ``on``/``off``, ``1``/``0``, any case); any
    other value is an error naming the key (``enabled`` or ``y`` turned hostname checks off)."""
    word = value.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    shown = "" if is_secret(key) else f" {value!r}"
    raise KafkaConfigError(
        f"{key} must be true or false (also yes/no, on/off, 1/0), not{shown or ' that value'}"
    )


def ssl_context(props: dict[str, str]) -> ssl.SSLContext:
    """A client TLS context trusting `ssl_cafile` (else the system CAs), with a client
    certificate from `ssl_certfile`/`ssl_keyfile` when given."""
    try:
        context = ssl.create_default_context(cafile=props.get("ssl_cafile") or None)
        if props.get("ssl_certfile"):
            context.load_cert_chain(
                props["ssl_certfile"],
                props.get("ssl_keyfile") or None,
                props.get("ssl_password") or None,
            )
    except (OSError, ssl.SSLError) as exc:
        raise KafkaConfigError(f"cannot set up TLS from the config file: {exc}") from None
    context.check_hostname = parse_bool("ssl_check_hostname", props.get("ssl_check_hostname", "true"))
    return context


def setting_value(text: str) -> Any:
    """A -X value as the client option's type: true/false, none/null, an int, a float, or
    the text itself."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def split_settings(items: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``-X key=value`` items as (connection options, producer/consumer options): keys take
    dots, dashes or underscores (``linger.ms`` is ``linger_ms``). The client refuses an
    option it does not know, with the closest name."""
    connection: dict[str, Any] = {}
    own: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        name = key.strip().replace(".", "_").replace("-", "_").lower()
        if not sep or not name:
            raise KafkaConfigError(f"-X {item!r}: expected KEY=VALUE")
        (connection if name in CONNECTION_OPTIONS else own)[name] = setting_value(value)
    return connection, own
