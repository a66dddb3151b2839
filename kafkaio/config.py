"""Client configuration shared by Producer, Consumer and Admin: the connection options.

Options use the Java client's / aiokafka's names in snake_case. Unknown names are an error,
with a hint when a close name exists, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from kafkaio.errors import KafkaConfigError
from kafkaio.net.config import ConnectionConfig

CONNECTION_OPTIONS = frozenset(f.name for f in dataclasses.fields(ConnectionConfig))


def split_connection_options(
    options: Mapping[str, Any], client_options: Iterable[str], client: str
) -> tuple[ConnectionConfig, dict[str, Any]]:
    """Split `options` into a ConnectionConfig and the client's own options.

    Raises KafkaConfigError naming any option neither knows (with the closest known name).
    """
    own = frozenset(client_options)
    conn: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for name, value in options.items():
        if name in CONNECTION_OPTIONS:
            conn[name] = value
        elif name in own:
            rest[name] = value
        else:
            raise KafkaConfigError(f"{client} has no option {name!r}{_hint(name, own)}")
    return ConnectionConfig(**conn), rest


# Options of aiokafka, kafka-python or the Java client that kafkaio does not have, and what
# to do instead (the closest known name would mislead: consumer_timeout_ms is not
# connect_timeout_ms).
_INSTEAD = {
    "retries": "kafkaio retries until a deadline, not a count: delivery_timeout_ms bounds "
    "a record's retries (the producer), default_api_timeout_ms a call's",
    "api_version": "kafkaio negotiates each API's version with every broker; remove it",
    "loop": "kafkaio uses the running event loop; remove it",
    "bootstrap_servers": "pass it as the client's bootstrap_servers argument",
    "consumer_timeout_ms": "pass timeout_ms to getmany() instead",
    "sasl_kerberos_service_name": "GSSAPI (Kerberos) is not supported",
    "sasl_kerberos_domain_name": "GSSAPI (Kerberos) is not supported",
    "ssl_cafile": "pass ssl_context=ssl.create_default_context(cafile=...)",
    "ssl_certfile": "pass an ssl_context with the certificate loaded (load_cert_chain)",
    "ssl_keyfile": "pass an ssl_context with the key loaded (load_cert_chain)",
}


def _hint(name: str, own: frozenset[str]) -> str:
    """What to pass instead of the unknown option `name`: kafkaio's snake_case name of a
    Java-style dotted one, the way to do what another client's option did, or the closest
    known name."""
    known = CONNECTION_OPTIONS | own
    snake = name.replace(".", "_").replace("-", "_").lower()
    if snake != name and snake in known:
        return f"; options use snake_case: {snake}=..."
    if snake in _INSTEAD:
        return f": {_INSTEAD[snake]}"
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
