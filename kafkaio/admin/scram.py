"""Admin SCRAM credential calls: DescribeUserScramCredentials and AlterUserScramCredentials.

As Java's AdminClient does, an upsertion is salted and hashed here (PBKDF2 with the
mechanism's hash, a random salt unless one is given): the password itself never crosses the
network. Changes go to the controller (in KRaft any broker forwards them).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread

from kafkaio.admin.core import AdminCore, broker_error
from kafkaio.errors import KafkaConfigError, KafkaError, NotControllerError
from kafkaio.net.sasl import (
    DEFAULT_MAX_SCRAM_ITERATIONS,
    KAFKA_MIN_SCRAM_ITERATIONS,
    SCRAM_HASHES,
    saslprep,
)
from kafkaio.protocol import messages as m

#: Kafka's ScramMechanism type codes.
SCRAM_MECHANISM_TYPES: dict[str, int] = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
_MECHANISM_NAMES = {code: name for name, code in SCRAM_MECHANISM_TYPES.items()}


def _mechanism_code(mechanism: str) -> int:
    try:
        return SCRAM_MECHANISM_TYPES[mechanism.upper()]
    except (KeyError, AttributeError):
        raise KafkaConfigError(
            f"unknown SCRAM mechanism {mechanism!r}; use one of {sorted(SCRAM_MECHANISM_TYPES)}"
        ) from None


@dataclass(frozen=True, slots=True)
class ScramCredentialInfo:
    """A mechanism a user has credentials for, and their PBKDF2 iteration count."""

    mechanism: str  # "SCRAM-SHA-256" or "SCRAM-SHA-512" ("UNKNOWN" for a code kafkaio lacks)
    iterations: int


@dataclass(frozen=True, slots=True)
class UserScramCredentialsDescription:
    """A user's SCRAM credentials (``error`` set, e.g. RESOURCE_NOT_FOUND, instead)."""

    user: str
    credentials: list[ScramCredentialInfo] = field(default_factory=list)
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True, repr=False)
class UserScramCredentialUpsertion:
    """Create or replace ``user``'s credential for ``mechanism`` from ``password``
    (``iterations`` 4096-16384, as Kafka accepts; ``salt`` random unless given)."""

    user: str
    mechanism: str
    password: str
    iterations: int = KAFKA_MIN_SCRAM_ITERATIONS
    salt: bytes | None = None

    def __repr__(self) -> str:
        return (
            f"UserScramCredentialUpsertion(user={self.user!r}, mechanism={self.mechanism!r}, "
            f"password='***', iterations={self.iterations})"
        )


@dataclass(frozen=True, slots=True)
class UserScramCredentialDeletion:
    """Remove ``user``'s credential for ``mechanism``."""

    user: str
    mechanism: str


UserScramCredentialAlteration = UserScramCredentialUpsertion | UserScramCredentialDeletion


def salted_upsertion(
    change: UserScramCredentialUpsertion,
) -> m.AlterUserScramCredentialsRequest.ScramCredentialUpsertion:
    """The request entry for `change`: PBKDF2 of the SASLprep'ed password (the slow part)."""
    code = _mechanism_code(change.mechanism)
    if not KAFKA_MIN_SCRAM_ITERATIONS <= change.iterations <= DEFAULT_MAX_SCRAM_ITERATIONS:
        raise KafkaConfigError(
            f"SCRAM iterations must be {KAFKA_MIN_SCRAM_ITERATIONS}-{DEFAULT_MAX_SCRAM_ITERATIONS}"
            f" (what Kafka accepts), got {change.iterations}"
        )
    if not change.user:
        raise KafkaConfigError("a SCRAM credential needs a user name")
    salt = change.salt if change.salt is not None else secrets.token_bytes(32)
    password = saslprep(change.password, "password").encode()
    digest = SCRAM_HASHES[_MECHANISM_NAMES[code]]
    salted = hashlib.pbkdf2_hmac(digest, password, salt, change.iterations)
    return m.AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name=change.user,
        mechanism=code,
        iterations=change.iterations,
        salt=salt,
        salted_password=salted,
    )


class ScramMixin(AdminCore):
    async def describe_user_scram_credentials(
        self, users: Sequence[str] | None = None, *, timeout_ms: float | None = None
    ) -> dict[str, UserScramCredentialsDescription]:
        """The SCRAM credentials of ``users`` (every user that has some, by default): per
        user the mechanisms and iteration counts (never the salted passwords), or the
        error (RESOURCE_NOT_FOUND for a user without credentials)."""
        wanted = None if users is None else list(dict.fromkeys(users))
        request = m.DescribeUserScramCredentialsRequest(
            users=None
            if wanted is None
            else [m.DescribeUserScramCredentialsRequest.UserName(name=u) for u in wanted]
        )

        async def attempt() -> dict[str, UserScramCredentialsDescription]:
            response = await (await self._any()).send(request)
            error = broker_error(response.error_code, response.error_message)
            if error is not None:
                raise error
            return {
                r.user: UserScramCredentialsDescription(
                    r.user,
                    [
                        ScramCredentialInfo(
                            _MECHANISM_NAMES.get(c.mechanism, "UNKNOWN"), c.iterations
                        )
                        for c in r.credential_infos
                    ],
                    broker_error(r.error_code, r.error_message, user=r.user),
                )
                for r in response.results
            }

        return await self._retrying("describe_user_scram_credentials", attempt, timeout_ms)

    async def alter_user_scram_credentials(
        self,
        alterations: Sequence[UserScramCredentialAlteration],
        *,
        timeout_ms: float | None = None,
    ) -> dict[str, KafkaError | None]:
        """Create, replace or delete SCRAM credentials, in the order given; each user's
        error (the first of its changes that failed; later ones are not sent), or None
        where every change of that user was applied. Passwords are salted and hashed here.

        A KRaft controller takes one change per user per request (DUPLICATE_RESOURCE
        otherwise), so a user's second change goes in a second request, and so on.
        """
        entries: dict[str, list[tuple[bool, Any]]] = {}  # user: [(deletion?, entry)]
        for change in alterations:
            if isinstance(change, UserScramCredentialDeletion):
                entry: Any = m.AlterUserScramCredentialsRequest.ScramCredentialDeletion(
                    name=change.user, mechanism=_mechanism_code(change.mechanism)
                )
            else:  # PBKDF2 costs milliseconds per thousand iterations: off the event loop
                entry = await anyio.to_thread.run_sync(salted_upsertion, change)
            entries.setdefault(change.user, []).append(
                (isinstance(change, UserScramCredentialDeletion), entry)
            )
        results: dict[str, KafkaError | None] = dict.fromkeys(entries)
        for round_ in range(max((len(e) for e in entries.values()), default=0)):
            batch = [
                changes[round_]
                for user, changes in entries.items()
                if round_ < len(changes) and results[user] is None
            ]
            if not batch:
                break
            request = m.AlterUserScramCredentialsRequest(
                deletions=[entry for deletion, entry in batch if deletion],
                upsertions=[entry for deletion, entry in batch if not deletion],
            )
            results.update(await self._alter_scram(request, timeout_ms))
        return results

    async def _alter_scram(
        self, request: m.AlterUserScramCredentialsRequest, timeout_ms: float | None
    ) -> dict[str, KafkaError | None]:
        async def attempt() -> dict[str, KafkaError | None]:
            response = await self._send_to_controller(request)
            results: dict[str, KafkaError | None] = {}
            for r in response.results:
                error = broker_error(r.error_code, r.error_message, user=r.user)
                if isinstance(error, NotControllerError):
                    raise error
                results[r.user] = error
            return results

        return await self._retrying("alter_user_scram_credentials", attempt, timeout_ms)
