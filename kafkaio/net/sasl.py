"""SASL mechanisms as sans-I/O state machines: PLAIN, SCRAM-SHA-256/512, OAUTHBEARER.

Each mechanism produces the client's first message, then turns every server message into the
next client message until it is done; the connection carries them in SaslAuthenticate requests.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import secrets
import stringprep
import unicodedata
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from kafkaio.errors import KafkaConfigError, KafkaError, SaslAuthenticationFailedError

TokenProvider = Callable[[], "str | Awaitable[str]"]
"""Returns an OAuth 2 bearer token (a JWS compact string); may be sync or async."""

SCRAM_HASHES: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# SHA-1 is not a Kafka mechanism; it is here only so RFC 5802's example can be checked.
_ALL_SCRAM_HASHES: dict[str, str] = {**SCRAM_HASHES, "SCRAM-SHA-1": "sha1"}
KAFKA_MIN_SCRAM_ITERATIONS = 4096  # the minimum Kafka's ScramMechanism accepts
#: The most iterations a SCRAM server-first message may ask for unless configured otherwise
#: (``sasl_scram_max_iterations``): Kafka's own maximum (ScramMechanism.maxIterations), the
#: most a broker lets a credential be stored with. PBKDF2 costs a few ms per 10,000.
DEFAULT_MAX_SCRAM_ITERATIONS = 16384
#: What PBKDF2 (a C int) can take at all.
MAX_SCRAM_ITERATIONS_LIMIT = 2**31 - 1


class SaslMechanism(Protocol):
    """One client-side SASL exchange."""

    name: str

    def initial_response(self) -> bytes:
        """The client's first message."""
        ...

    def step(self, challenge: bytes) -> bytes | None:
        """Handle a server message; return the next client message, or None when done."""
        ...


class _Step(enum.Enum):
    INITIAL = "initial"
    SENT_FIRST = "sent-first"
    SENT_FINAL = "sent-final"
    DONE = "done"


def _illegal(name: str, step: _Step) -> KafkaError:
    return KafkaError(f"{name} SASL exchange used out of order (state {step.value})")


class _OneMessageStart:
    """The first step of PLAIN and OAUTHBEARER: send the prepared message once."""

    name: str
    _message: bytes
    _step: _Step

    def initial_response(self) -> bytes:
        if self._step is not _Step.INITIAL:
            raise _illegal(self.name, self._step)
        self._step = _Step.SENT_FIRST
        return self._message


class PlainMechanism(_OneMessageStart):
    """SASL PLAIN (RFC 4616): ``authzid NUL username NUL password``; the server answers once."""

    name = "PLAIN"

    def __init__(self, username: str, password: str, authzid: str = "") -> None:
        for what, value in (("username", username), ("password", password), ("authzid", authzid)):
            if "\x00" in value:
                raise KafkaConfigError(f"SASL PLAIN {what} must not contain a NUL character")
        self._message = f"{authzid}\x00{username}\x00{password}".encode()
        self._step = _Step.INITIAL

    def __repr__(self) -> str:
        return f"PlainMechanism(state={self._step.value})"

    def step(self, challenge: bytes) -> bytes | None:
        if self._step is not _Step.SENT_FIRST:
            raise _illegal(self.name, self._step)
        self._step = _Step.DONE
        return None


def saslprep(value: str, what: str = "value") -> str:
    """SASLprep (RFC 4013) without its bidi and unassigned-code-point checks.

    Maps non-ASCII spaces to a space, drops characters "commonly mapped to nothing", applies
    NFKC and rejects prohibited output (controls, private use, non-characters, surrogates...).
    ASCII strings without control characters are returned unchanged.
    """
    if value.isascii() and value.isprintable():
        return value
    mapped = "".join(
        " " if stringprep.in_table_c12(ch) else ch for ch in value if not stringprep.in_table_b1(ch)
    )
    result = unicodedata.normalize("NFKC", mapped)
    for ch in result:
        if (
            stringprep.in_table_c12(ch)
            or stringprep.in_table_c21_c22(ch)
            or stringprep.in_table_c3(ch)
            or stringprep.in_table_c4(ch)
            or stringprep.in_table_c5(ch)
            or stringprep.in_table_c6(ch)
            or stringprep.in_table_c7(ch)
            or stringprep.in_table_c8(ch)
            or stringprep.in_table_c9(ch)
        ):
            raise KafkaConfigError(
                f"SASL {what} contains the prohibited character U+{ord(ch):04X} (RFC 4013)"
            )
    return result


def _escape_username(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def _parse_attributes(message: str) -> dict[str, str]:
    attributes: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise SaslAuthenticationFailedError(f"malformed SCRAM server message {message!r}")
        attributes.setdefault(part[0], part[2:])
    return attributes


@dataclass(frozen=True, slots=True)
class ScramServerFirst:
    """A checked SCRAM server-first message: its text, the combined nonce, salt, iterations."""

    message: str
    nonce: str
    salt: bytes
    iterations: int

    def __repr__(self) -> str:
        return f"ScramServerFirst(iterations={self.iterations})"


class ScramMechanism:
    """SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) without channel binding.

    client-first ``n,,n=<user>,r=<nonce>``; server-first gives the combined nonce, salt and
    iteration count; client-final carries the proof; server-final's signature is verified so
    the broker proves it knows the password too.
    """

    def __init__(
        self,
        mechanism: str,
        username: str,
        password: str,
        *,
        nonce: str | None = None,
        min_iterations: int = KAFKA_MIN_SCRAM_ITERATIONS,
        max_iterations: int = DEFAULT_MAX_SCRAM_ITERATIONS,
    ) -> None:
        try:
            self._hash = _ALL_SCRAM_HASHES[mechanism]
        except KeyError:
            raise KafkaConfigError(
                f"unknown SCRAM mechanism {mechanism!r}; use one of {sorted(SCRAM_HASHES)}"
            ) from None
        self.name = mechanism
        self._username = _escape_username(saslprep(username, "username"))
        self._password = saslprep(password, "password").encode()
        self._nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        if not self._nonce or "," in self._nonce or not self._nonce.isprintable():
            raise KafkaConfigError("a SCRAM nonce must be printable and contain no comma")
        self._min_iterations = min_iterations
        self._max_iterations = min(max_iterations, MAX_SCRAM_ITERATIONS_LIMIT)
        self._client_first_bare = f"n={self._username},r={self._nonce}"
        self._server_signature = b""
        self._step = _Step.INITIAL

    def __repr__(self) -> str:
        return f"ScramMechanism({self.name}, state={self._step.value})"

    def initial_response(self) -> bytes:
        if self._step is not _Step.INITIAL:
            raise _illegal(self.name, self._step)
        self._step = _Step.SENT_FIRST
        return ("n,," + self._client_first_bare).encode()

    def step(self, challenge: bytes) -> bytes | None:
        if self._step is _Step.SENT_FIRST:
            first = self.server_first(challenge)
            return self.client_final(first, self.salted_password(first))
        if self._step is _Step.SENT_FINAL:
            self._verify_server_final(challenge)
            self._step = _Step.DONE
            return None
        raise _illegal(self.name, self._step)

    @property
    def awaits_server_first(self) -> bool:
        """True when the next server message is server-first: the step that needs PBKDF2,
        which a caller on an event loop runs in a thread (``server_first``,
        ``salted_password``, ``client_final``) instead of ``step``."""
        return self._step is _Step.SENT_FIRST

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self._hash).digest()

    def server_first(self, challenge: bytes) -> ScramServerFirst:
        """Parse and check the server-first message (nonce, salt, iteration count within
        ``min_iterations``..``max_iterations``); raise SaslAuthenticationFailedError."""
        if self._step is not _Step.SENT_FIRST:
            raise _illegal(self.name, self._step)
        server_first = challenge.decode("utf-8", "replace")
        if server_first.startswith("e="):
            raise SaslAuthenticationFailedError(
                f"{self.name}: the broker refused: {server_first[2:]}"
            )
        if server_first.startswith("m="):
            raise SaslAuthenticationFailedError(
                f"{self.name}: the broker requires an unsupported SCRAM extension"
            )
        attributes = _parse_attributes(server_first)
        nonce, salt_b64, iterations_text = (attributes.get(k) for k in ("r", "s", "i"))
        if nonce is None or salt_b64 is None or iterations_text is None:
            raise SaslAuthenticationFailedError(
                f"{self.name}: server-first message lacks r=, s= or i=: {server_first!r}"
            )
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslAuthenticationFailedError(
                f"{self.name}: the broker's nonce does not extend the client's nonce"
            )
        try:
            salt = base64.b64decode(salt_b64, validate=True)
            iterations = int(iterations_text[:20])  # a longer number is out of range anyway
        except ValueError:
            raise SaslAuthenticationFailedError(
                f"{self.name}: malformed salt or iteration count in {server_first!r}"
            ) from None
        if iterations < self._min_iterations:
            raise SaslAuthenticationFailedError(
                f"{self.name}: the broker asked for {iterations} iterations, fewer than the "
                f"minimum {self._min_iterations}"
            )
        if iterations > self._max_iterations or len(iterations_text) > 20:
            raise SaslAuthenticationFailedError(
                f"{self.name}: the broker asked for {iterations_text[:20]} iterations, more than "
                f"the maximum {self._max_iterations} (sasl_scram_max_iterations; Kafka stores "
                f"credentials with at most {DEFAULT_MAX_SCRAM_ITERATIONS}): each costs CPU "
                "time, so a broker asking for millions is refused"
            )
        return ScramServerFirst(server_first, nonce, salt, iterations)

    def salted_password(self, first: ScramServerFirst) -> bytes:
        """PBKDF2 of the password: the slow part (milliseconds per 10,000 iterations),
        pure and thread-safe."""
        return hashlib.pbkdf2_hmac(self._hash, self._password, first.salt, first.iterations)

    def client_final(self, first: ScramServerFirst, salted: bytes) -> bytes:
        """The client-final message (with the proof) for `first`, given its salted password."""
        if self._step is not _Step.SENT_FIRST:
            raise _illegal(self.name, self._step)
        self._step = _Step.SENT_FINAL
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c=biws,r={first.nonce}"  # biws = base64("n,,"): no channel binding
        auth_message = f"{self._client_first_bare},{first.message},{without_proof}".encode()
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = self._hmac(salted, b"Server Key")
        self._server_signature = self._hmac(server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, challenge: bytes) -> None:
        attributes = _parse_attributes(challenge.decode("utf-8", "replace"))
        if "e" in attributes:
            raise SaslAuthenticationFailedError(
                f"{self.name}: the broker refused: {attributes['e']}"
            )
        try:
            signature = base64.b64decode(attributes.get("v", ""), validate=True)
        except ValueError:
            signature = b""
        if not signature or not hmac.compare_digest(signature, self._server_signature):
            raise SaslAuthenticationFailedError(
                f"{self.name}: the broker's server signature is wrong, so it does not know this "
                "user's credentials; the broker may not be the one you meant to reach"
            )


class OAuthBearerMechanism(_OneMessageStart):
    """OAUTHBEARER (RFC 7628) as Kafka uses it: ``n,,\\x01auth=Bearer <token>\\x01\\x01``.

    On failure the broker sends a JSON error instead of an empty message; the client answers
    with ``\\x01`` as the RFC requires and the broker then fails the exchange, so the JSON is
    kept in ``server_error`` for the error message.
    """

    name = "OAUTHBEARER"

    def __init__(
        self, token: str, *, authzid: str | None = None, extensions: Mapping[str, str] | None = None
    ) -> None:
        if not token or any(c in token for c in "\x01 ") or not token.isprintable():
            raise KafkaConfigError(
                "the OAUTHBEARER token provider returned an empty or malformed token "
                "(it must be a non-empty printable string without spaces)"
            )
        parts = [f"auth=Bearer {token}"]
        for key, value in (extensions or {}).items():
            if key == "auth" or not key.isalpha() or "\x01" in value:
                raise KafkaConfigError(f"invalid OAUTHBEARER extension {key!r}")
            parts.append(f"{key}={value}")
        gs2 = f"n,a={_escape_username(authzid)}," if authzid else "n,,"
        self._message = (gs2 + "\x01" + "\x01".join(parts) + "\x01\x01").encode()
        self.server_error: str | None = None
        self._step = _Step.INITIAL

    def __repr__(self) -> str:
        return f"OAuthBearerMechanism(state={self._step.value})"

    def step(self, challenge: bytes) -> bytes | None:
        if self._step is _Step.SENT_FINAL:
            raise SaslAuthenticationFailedError(
                f"OAUTHBEARER: the broker rejected the token: {self.server_error}"
            )
        if self._step is not _Step.SENT_FIRST:
            raise _illegal(self.name, self._step)
        if challenge:
            self.server_error = challenge.decode("utf-8", "replace")
            self._step = _Step.SENT_FINAL
            return b"\x01"
        self._step = _Step.DONE
        return None
