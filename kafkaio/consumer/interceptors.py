"""Consumer interceptors, as Java's ConsumerInterceptor: see the records a poll returns
before the application does, and hear about every commit that completes.

``Consumer(..., interceptors=[...])`` takes objects with any of:

* ``on_consume(records)``: called with ``{TopicPartition: [ConsumerRecord, ...]}`` that a
  ``getmany()``, ``getone()`` or ``async for`` collected, before the application sees them;
  it may return a changed mapping (records dropped, or changed), or None to keep them.
  Each interceptor gets what the previous one returned.
* ``on_commit(offsets)``: called with ``{TopicPartition: OffsetAndMetadata}`` once a commit
  succeeded (``commit()``, ``commit_async()``, auto-commit, the commit before a
  revocation), in the application's task at its next consumer call (a background event).
* ``close()``: when the consumer closes.

All run in the application's task, never in the network task. An interceptor that raises
is logged (logger ``kafkaio.consumer``) and skipped, as in Java: it cannot break consuming.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kafkaio.errors import KafkaConfigError
from kafkaio.metadata.cluster import TopicPartition
from kafkaio.structs import OffsetAndMetadata

log = logging.getLogger("kafkaio.consumer")

Records = dict[TopicPartition, list[Any]]

_HOOKS = ("on_consume", "on_commit", "close")


class ConsumerInterceptor:
    """A base to subclass (every method optional; the defaults do nothing)."""

    def on_consume(self, records: Records) -> Records | None:
        return None

    def on_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        return None

    def close(self) -> None:
        return None


def check_interceptors(interceptors: Sequence[Any] | None) -> tuple[Any, ...]:
    """The ``interceptors`` option: a sequence of objects with at least one hook."""
    if interceptors is None:
        return ()
    if isinstance(interceptors, (str, bytes)) or not isinstance(interceptors, Sequence):
        raise KafkaConfigError(
            f"interceptors must be a list of interceptor objects, got {interceptors!r}"
        )
    for interceptor in interceptors:
        if not any(callable(getattr(interceptor, hook, None)) for hook in _HOOKS):
            raise KafkaConfigError(
                f"interceptor {interceptor!r} has none of on_consume(records), "
                "on_commit(offsets), close()"
            )
    return tuple(interceptors)


class ConsumerInterceptors:
    """Runs the configured interceptors in order, logging (not raising) their errors."""

    __slots__ = ("_commit", "_consume", "_close", "enabled")

    def __init__(self, interceptors: Sequence[Any]) -> None:
        self._consume = [i for i in interceptors if callable(getattr(i, "on_consume", None))]
        self._commit = [i for i in interceptors if callable(getattr(i, "on_commit", None))]
        self._close = [i for i in interceptors if callable(getattr(i, "close", None))]
        self.enabled = bool(interceptors)

    @property
    def watches_commits(self) -> bool:
        return bool(self._commit)

    def on_consume(self, records: Records) -> Records:
        for interceptor in self._consume:
            try:
                changed = interceptor.on_consume(records)
            except Exception:
                log.exception("consumer interceptor %r failed in on_consume", interceptor)
                continue
            if changed is not None:
                records = {tp: list(batch) for tp, batch in changed.items() if batch}
        return records

    def on_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        for interceptor in self._commit:
            try:
                interceptor.on_commit(dict(offsets))
            except Exception:
                log.exception("consumer interceptor %r failed in on_commit", interceptor)

    def close(self) -> None:
        for interceptor in self._close:
            try:
                interceptor.close()
            except Exception:
                log.exception("consumer interceptor %r failed in close", interceptor)
