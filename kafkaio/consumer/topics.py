"""SubscribedTopicsManager: keeps metadata requests in line with a group subscription.

Named topics (plus, for the leader, every member's) are tracked; a pattern is re-matched
against all topics on each metadata update.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kafkaio.consumer.subscription import SubscriptionState, SubscriptionType
from kafkaio.metadata.manager import MetadataManager
from kafkaio.runtime.requests import PollResult

log = logging.getLogger("kafkaio.consumer")


class SubscribedTopicsManager:
    """A request manager that sends nothing itself: it steers the metadata manager.

    * ``subscribe(topics)``: the metadata topics follow ``group_topics()`` (the member's
      topics, and for the group leader every member's, which it must assign).
    * ``subscribe(pattern=...)``: metadata covers every topic; each new snapshot is matched
      against the pattern (internal topics excluded when ``exclude_internal_topics``), and a
      change of the matched set makes the membership manager rejoin on its next poll.
    * ``assign()`` or nothing: leaves the metadata topics alone (the consumer sets them).
    """

    def __init__(
        self,
        subscriptions: SubscriptionState,
        metadata: MetadataManager,
        group_topics: Callable[[], frozenset[str]],
        *,
        exclude_internal_topics: bool = True,
    ) -> None:
        self._subscriptions = subscriptions
        self._metadata = metadata
        self._group_topics = group_topics
        self._exclude_internal = exclude_internal_topics
        self._tracked: frozenset[str] = frozenset()
        self._matched_version = -1
        self._all_topics = False

    def poll(self, now: float) -> PollResult:
        subs = self._subscriptions
        pattern = subs.type is SubscriptionType.AUTO_PATTERN
        if pattern != self._all_topics:
            self._all_topics = pattern
            self._metadata.request_all_topics(pattern)
            # match only snapshots of all topics: those requested after this point
            self._matched_version = self._metadata.request_update() if pattern else -1
        if pattern:
            self._match(self._metadata.version)
        wanted = self._group_topics() if subs.has_auto_assignment() else frozenset()
        if wanted != self._tracked:
            self._metadata.remove_topics(self._tracked - wanted)
            self._metadata.add_topics(wanted - self._tracked)
            self._tracked = wanted
        return PollResult()

    def _match(self, version: int) -> None:
        if version <= self._matched_version:
            return
        self._matched_version = version
        topics = self._metadata.cluster.topics.values()
        names = [t.name for t in topics if not (self._exclude_internal and t.is_internal)]
        if self._subscriptions.match_pattern(names):
            log.info(
                "pattern %r now matches %d topics: %s",
                self._subscriptions.pattern.pattern if self._subscriptions.pattern else None,
                len(self._subscriptions.subscription()),
                sorted(self._subscriptions.subscription()),
            )
