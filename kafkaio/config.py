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
            known = sorted(CONNECTION_OPTIONS | own)
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise KafkaConfigError(f"{client} has no option {name!r}{hint}")
    return ConnectionConfig(**conn), rest
