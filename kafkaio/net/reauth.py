"""When a connection must re-authenticate (KIP-368): the SASL session timer, sans-I/O.

A broker with ``connections.max.reauth.ms`` (or OAUTHBEARER, whose tokens expire) says in
its last SaslAuthenticate response how long the session lasts. It closes the connection when
a request other than a re-authentication arrives after that. As the Java client does, the
connection re-authenticates once 85-95% of the lifetime has passed (the jitter spreads the
connections of many clients), before its next request: SaslHandshake and SaslAuthenticate
again on the same connection, with a fresh OAUTHBEARER token.

Times are seconds on the caller's monotonic clock.
"""

from __future__ import annotations

import random
from collections.abc import Callable

#: Re-authenticate after this share of the session lifetime, plus up to ``JITTER`` more.
EARLIEST_SHARE = 0.85
JITTER = 0.10


class SessionTimer:
    """The SASL session of one connection: when it started, when to renew it, how often it
    was renewed."""

    __slots__ = ("_rand", "lifetime_ms", "renew_at", "reauthentications")

    def __init__(self, rand: Callable[[], float] = random.random) -> None:
        self._rand = rand
        self.lifetime_ms = 0  # the broker's answer; 0: the session never ends
        self.renew_at: float | None = None  # when to re-authenticate; None: never
        self.reauthentications = 0  # completed re-authentications

    def authenticated(self, started: float, lifetime_ms: int, *, renewal: bool = False) -> None:
        """An exchange that began at ``started`` succeeded with a session of
        ``lifetime_ms`` (0: unlimited). Counting from the start of the exchange errs on the
        early side: the broker's session began after it."""
        self.lifetime_ms = max(0, int(lifetime_ms))
        if renewal:
            self.reauthentications += 1
        if self.lifetime_ms <= 0:
            self.renew_at = None
            return
        share = EARLIEST_SHARE + JITTER * self._rand()
        self.renew_at = started + self.lifetime_ms / 1000 * share

    def due(self, now: float) -> bool:
        """Whether the connection must re-authenticate before its next request."""
        return self.renew_at is not None and now >= self.renew_at

    def __repr__(self) -> str:
        return (
            f"SessionTimer(lifetime_ms={self.lifetime_ms}, renew_at={self.renew_at}, "
            f"reauthentications={self.reauthentications})"
        )
