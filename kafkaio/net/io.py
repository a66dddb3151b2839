"""The boundary between a Connection and its I/O: what an I/O adapter offers
(`ConnectionIO`: `kafkaio.net.wire` for asyncio, `kafkaio.net.stream` for anyio streams)
and what it reports back (`ConnectionEvents`: bytes received, the socket lost, the time a
request is due).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kafkaio.runtime.completion import Completion


class ConnectionEvents(Protocol):
    """What an I/O adapter reports to its connection (which feeds its state machine)."""

    def received(self, data: bytes, now: float) -> None:
        """Bytes arrived at `now`."""

    def lost(self, error: BaseException | None) -> None:
        """The socket broke (`error`) or the broker closed it (None)."""

    def expire(self, now: float) -> None:
        """A request's deadline may have passed: close if one has."""

    def writable(self) -> None:
        """The transport takes more data again (asyncio's resume_writing)."""


class ConnectionIO(Protocol):
    """One connection's socket, as the Connection uses it."""

    #: True if `write_now` takes a whole frame without waiting (an asyncio transport
    #: buffers it): then requests are written from the submitting call, else by a writer.
    writes_at_once: bool

    @property
    def writable(self) -> bool:
        """False while written data waits for the peer to read (a request the broker does
        not answer waits in the queue then)."""

    def now(self) -> float:
        """anyio's clock."""

    def write_now(self, data: bytes) -> None:
        """Write `data` now (only when `writes_at_once`)."""

    async def write(self, data: bytes, deadline: float) -> None:
        """Write `data` whole; raises TimeoutError if it cannot by `deadline` (the broker
        is not reading) and OSError / anyio's stream errors if the socket broke."""

    async def wait(self, completion: Completion[Any]) -> None:
        """Return once `completion` is done (reading for it if need be)."""

    def watch(self, deadline: float) -> None:
        """A request in flight is due at `deadline`: report `expire` by then."""

    async def read_in_flight(self) -> None:
        """Read until no request is in flight (anyio streams' reader; asyncio reads from
        callbacks)."""

    def abort(self) -> None:
        """The state machine closed: drop the socket as soon as possible (no await)."""

    async def aclose(self, grace: float) -> None:
        """Close the socket, waiting at most `grace` seconds, even when cancelled."""

    def socket(self) -> Any:
        """The underlying socket object, if there is one."""
