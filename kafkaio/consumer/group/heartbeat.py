"""HeartbeatTimers: when the next heartbeat is due, and whether the session or poll timed out.

Pure bookkeeping over times passed in; the membership manager owns one (Java's Heartbeat).
"""

from __future__ import annotations

import math


class HeartbeatTimers:
    """Three clocks of a classic group member.

    * heartbeat: due ``interval_ms`` after the last one was sent, or ``retry_backoff_ms``
      after one failed;
    * session: expires ``session_timeout_ms`` after the last successful heartbeat (or reset);
    * poll: expires ``max_poll_interval_ms`` after the application last polled.
    """

    def __init__(
        self,
        *,
        interval_ms: float,
        session_timeout_ms: float,
        max_poll_interval_ms: float,
        retry_backoff_ms: float,
    ) -> None:
        self.interval_ms = interval_ms
        self.session_timeout_ms = session_timeout_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.next_heartbeat_ms = -math.inf
        self.session_deadline_ms = math.inf
        self.poll_deadline_ms = math.inf
        self.in_flight = False
        self.last_sent_ms: float | None = None

    def reset_timeouts(self, now: float) -> None:
        """A fresh start (joined the group): heartbeat after one interval, full session."""
        self.next_heartbeat_ms = now + self.interval_ms
        self.session_deadline_ms = now + self.session_timeout_ms

    def reset_session(self, now: float) -> None:
        self.session_deadline_ms = now + self.session_timeout_ms

    def sent(self, now: float) -> None:
        self.in_flight = True
        self.last_sent_ms = now
        self.next_heartbeat_ms = now + self.interval_ms

    def received(self, now: float) -> None:
        self.in_flight = False
        self.session_deadline_ms = now + self.session_timeout_ms

    def failed(self, now: float) -> None:
        self.in_flight = False
        self.next_heartbeat_ms = now + self.retry_backoff_ms

    def due(self, now: float) -> bool:
        return not self.in_flight and now >= self.next_heartbeat_ms

    def session_expired(self, now: float) -> bool:
        return now >= self.session_deadline_ms

    def polled(self, now: float) -> None:
        """The application called poll: restart the max-poll-interval clock."""
        self.poll_deadline_ms = now + self.max_poll_interval_ms

    def poll_expired(self, now: float) -> bool:
        return now >= self.poll_deadline_ms
