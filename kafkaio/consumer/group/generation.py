"""The classic group generation: the id, member id and protocol a JoinGroup response grants.

Immutable, so a request can remember the generation it was sent with and spot staleness.
"""

from __future__ import annotations

from dataclasses import dataclass

NO_GENERATION_ID = -1
NO_MEMBER_ID = ""


@dataclass(frozen=True, slots=True)
class Generation:
    """One generation of group membership (``generation_id`` -1: none yet)."""

    generation_id: int = NO_GENERATION_ID
    member_id: str = NO_MEMBER_ID
    protocol: str | None = None

    @property
    def is_valid(self) -> bool:
        """True when this member holds a real generation (it may commit and heartbeat)."""
        return self.generation_id != NO_GENERATION_ID and self.member_id != NO_MEMBER_ID

    def without_generation(self) -> Generation:
        """The same member id, but no generation (after ILLEGAL_GENERATION)."""
        return Generation(NO_GENERATION_ID, self.member_id, None)


NO_GENERATION = Generation()
