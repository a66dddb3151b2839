"""Secrets in settings: which option names hold one, and how settings print without them.

Every repr of a settings object and every error or log line that shows an option goes
through here, so a password, a key password or a token provider never reaches a terminal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MASK", "is_secret", "masked", "masked_repr"]

MASK = "***"
# Option names (snake_case or Kafka's dotted names) whose values are secrets.
_SECRET_WORDS = ("password", "secret", "token", "credential", "jaas")


def is_secret(name: str) -> bool:
    """True for an option holding a secret: a password, a token (provider), JAAS config."""
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def masked(options: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `options` with every secret value (not None) replaced by ``'***'``."""
    return {k: (MASK if v is not None and is_secret(k) else v) for k, v in options.items()}


def masked_repr(obj: object, fields: Mapping[str, Any]) -> str:
    """``Type(field=value, ...)`` with secret values masked (for ``__repr__``)."""
    parts = ", ".join(f"{k}={v!r}" for k, v in masked(fields).items())
    return f"{type(obj).__name__}({parts})"
