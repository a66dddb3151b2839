"""Who coordinates a key: the one FindCoordinator request and answer of every client.

Groups (consumer and share groups) and transactional ids each have a coordinator broker.
The consumer's and share consumer's `CoordinatorManager`, the transactional producer's
`TransactionManager` and the Admin client all build the lookup with `lookup_request` and
read the answer with `parse_lookup`, so versions (one key up to v3, several from v4),
error codes and empty answers are handled once.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from kafkaio.errors import CoordinatorNotAvailableError, KafkaError, error_for_code
from kafkaio.protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse

__all__ = [
    "CoordinatorAddress",
    "CoordinatorType",
    "lookup_request",
    "parse_lookup",
]


class CoordinatorType(enum.IntEnum):
    """FindCoordinator's key types (Kafka's CoordinatorType)."""

    GROUP = 0
    TRANSACTION = 1
    SHARE = 2  # share-group state (broker to broker); clients look share groups up as GROUP

    @property
    def noun(self) -> str:
        return ("group", "transactional id", "share group")[self.value]

    @property
    def context_name(self) -> str:
        """How errors name the key (``group_id=...``, ``transactional_id=...``)."""
        return "transactional_id" if self is CoordinatorType.TRANSACTION else "group_id"


@dataclass(frozen=True, slots=True)
class CoordinatorAddress:
    """A coordinator broker as FindCoordinator names it."""

    node_id: int
    host: str
    port: int


def lookup_request(key_type: CoordinatorType, keys: Sequence[str]) -> FindCoordinatorRequest:
    """FindCoordinator for `keys` (at least one). Versions up to 3 carry only the first key
    (send one key per request to brokers that old); from v4 every key goes in one request."""
    if not keys:
        raise ValueError("a coordinator lookup needs at least one key")
    return FindCoordinatorRequest(key=keys[0], key_type=int(key_type), coordinator_keys=list(keys))


def parse_lookup(
    response: FindCoordinatorResponse, key_type: CoordinatorType, keys: Sequence[str]
) -> dict[str, CoordinatorAddress | KafkaError]:
    """Each key's coordinator, or the error the broker gave for it (a KafkaError naming the
    key). A key the answer does not mention gets a retriable CoordinatorNotAvailableError."""
    noun, name = key_type.noun, key_type.context_name
    if response.coordinators:  # v4+: one entry per requested key
        answers = [
            (c.key, c.error_code, c.error_message, c.node_id, c.host, c.port)
            for c in response.coordinators
        ]
    else:  # up to v3: the answer is about the one key sent
        answers = [
            (
                keys[0],
                response.error_code,
                response.error_message,
                response.node_id,
                response.host,
                response.port,
            )
        ]
    out: dict[str, CoordinatorAddress | KafkaError] = {}
    for key, code, message, node_id, host, port in answers:
        if key not in keys:
            continue  # not asked for: the broker answered another request
        if code:
            out[key] = error_for_code(code)(message, **{name: key})
        elif node_id < 0 or not host:
            out[key] = CoordinatorNotAvailableError(
                f"FindCoordinator for {noun} {key!r} named no coordinator (node {node_id}, "
                f"host {host!r}); retrying",
                **{name: key},
            )
        else:
            out[key] = CoordinatorAddress(node_id, host, port)
    for key in keys:
        out.setdefault(
            key,
            CoordinatorNotAvailableError(
                f"the FindCoordinator answer has no entry for {noun} {key!r}; retrying",
                **{name: key},
            ),
        )
    return out
