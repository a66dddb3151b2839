"""What a request message promises: the type of its response.

Every generated request class derives from ``Request[ItsResponse]`` (see
tools/gen_protocol.py), so ``Connection.send(MetadataRequest(...))`` is typed as returning a
``MetadataResponse`` and an ``UnsentRequest`` built from it hands its handler one: strict
mypy follows a response from the wire into every handler. The base adds no state and no
cost (no fields, empty ``__slots__``).
"""

from __future__ import annotations

from typing import ClassVar, Generic, TypeVar

__all__ = ["Request", "ResponseT"]

ResponseT = TypeVar("ResponseT", covariant=True)


class Request(Generic[ResponseT]):
    """Base of every generated request message; ``ResponseT`` is its response class."""

    __slots__ = ()

    API_KEY: ClassVar[int]
    MIN_VERSION: ClassVar[int]
    MAX_VERSION: ClassVar[int]
    MAX_STABLE_VERSION: ClassVar[int]
    FIRST_FLEXIBLE_VERSION: ClassVar[int | None]

    def encode(self, version: int) -> bytes:
        """Encode this message as `version` (no header, no size prefix)."""
        raise NotImplementedError

    def encode_into(self, version: int, out: bytearray) -> None:
        """Append this message, encoded as `version`, to `out`."""
        raise NotImplementedError
