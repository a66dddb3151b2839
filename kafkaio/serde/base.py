"""Serializer and deserializer shapes the clients accept, and how they are called.

A key or value (de)serializer is one of:

- a plain callable, ``value -> bytes`` (``bytes | None -> value`` for a deserializer):
  called inline, the fastest path;
- a coroutine function, ``async def f(value) -> bytes``: awaited in the application's task
  (the producer's ``send``/``enqueue``, the consumer's ``getmany``/``getone``), never in the
  network task;
- a :class:`Serializer` / :class:`Deserializer` object, whose ``serialize(data, ctx)`` /
  ``deserialize(data, ctx)`` (sync or ``async def``) also receives a
  :class:`SerializationContext`: the topic, ``"key"`` or ``"value"``, the partition (when
  known), the offset (consumer) and the headers. Schema Registry serializers are of this kind:
  the subject comes from the topic.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kafkaio.errors import KafkaConfigError, SerializationError

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
T_contra = TypeVar("T_contra", contravariant=True)

Headers = Sequence[tuple[str, "bytes | None"]]
_BYTES = (bytes, bytearray, memoryview)


@dataclass(frozen=True, slots=True)
class SerializationContext:
    """Where the data being (de)serialized belongs.

    ``field`` is ``"key"`` or ``"value"``; ``partition`` is None on the producer side unless
    the application chose one; ``offset`` is set on the consumer side only.
    """

    topic: str
    field: str
    partition: int | None = None
    offset: int | None = None
    headers: Headers | None = None


class Serializer(ABC, Generic[T_contra]):
    """A serializer that needs to know the topic (e.g. for a Schema Registry subject).

    Implement ``serialize`` as a plain method or as ``async def``; return the bytes, or None
    for a null key or value. Raise :class:`kafkaio.errors.SerializationError` (with ``path``
    naming the offending field) or any exception: the producer names topic, partition and
    key/value around it.
    """

    @abstractmethod
    def serialize(
        self, data: T_contra, ctx: SerializationContext
    ) -> bytes | None | Awaitable[bytes | None]:
        """``data`` as bytes (None: a null key or value)."""


class Deserializer(ABC, Generic[T_co]):
    """A deserializer that needs to know the topic, partition, offset or headers.

    Implement ``deserialize`` as a plain method or as ``async def``. It is called for null
    keys and values too (``data`` None).
    """

    @abstractmethod
    def deserialize(self, data: bytes | None, ctx: SerializationContext) -> T_co | Awaitable[T_co]:
        """The application's value for ``data``."""


def _is_async(fn: Any) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - a callable object's __call__
    return call is not None and inspect.iscoroutinefunction(call)


class FieldCodec:
    """One key or value (de)serializer as the clients call it, whatever its shape.

    ``plain``: a synchronous ``f(data)`` (the clients keep their inline fast paths for it).
    ``call(data, ctx)`` returns the result or, for an async one, an awaitable.
    """

    __slots__ = ("fn", "field", "plain", "with_context", "is_async", "name")

    def __init__(self, serde: Any, field: str, *, deserializer: bool) -> None:
        role = "deserializer" if deserializer else "serializer"
        self.field = field
        self.name = f"{field}_{role}"
        method = "deserialize" if deserializer else "serialize"
        bound = getattr(serde, method, None)
        if isinstance(serde, Serializer | Deserializer) and callable(bound):
            self.fn: Callable[..., Any] = bound
            self.with_context = True
        elif callable(serde):
            self.fn = serde
            self.with_context = False
        else:
            raise KafkaConfigError(
                f"{self.name} must be a callable, an async function or a kafkaio.serde."
                f"{role.capitalize()}, not {type(serde).__name__}"
            )
        self.is_async = _is_async(self.fn)
        self.plain = not self.with_context and not self.is_async

    def call(self, data: Any, ctx: SerializationContext) -> Any:
        return self.fn(data, ctx) if self.with_context else self.fn(data)


def to_bytes(data: Any, field: str, topic: str, from_serializer: bool) -> bytes | None:
    """A serializer's result (or a raw key/value) as bytes; None stays None."""
    if data is None or type(data) is bytes:
        return data
    if isinstance(data, _BYTES):
        return bytes(data)
    if from_serializer and inspect.isawaitable(data):
        close = getattr(data, "close", None)
        if close is not None:
            close()  # never awaited: no "coroutine was never awaited" warning
        raise SerializationError(
            f"the {field}_serializer returned an awaitable ({type(data).__name__}): define it "
            "with `async def` (or as a kafkaio.serde.Serializer) so that it is awaited",
            topic=topic,
            field=field,
        )
    if from_serializer:
        raise SerializationError(
            f"the {field}_serializer returned {type(data).__name__}, not bytes: make it "
            "return bytes (e.g. encode a str)",
            topic=topic,
            field=field,
        )
    raise KafkaConfigError(
        f"the record's {field} for topic {topic!r} is {type(data).__name__}, not bytes: "
        f"pass bytes or set {field}_serializer"
    )


def located(exc: BaseException, ctx: SerializationContext, what: str) -> SerializationError:
    """A SerializationError naming topic, partition, key/value (and the serde's field path),
    for an exception raised by a (de)serializer."""
    path = exc.path if isinstance(exc, SerializationError) else None
    reason = exc.reason if isinstance(exc, SerializationError) else f"{type(exc).__name__}: {exc}"
    return SerializationError(
        f"the {ctx.field} {what} failed: {reason}",
        topic=ctx.topic,
        partition=ctx.partition,
        offset=ctx.offset,
        field=ctx.field,
        path=path,
    )


async def serialize(codec: FieldCodec, data: Any, ctx: SerializationContext) -> bytes | None:
    """Run one serializer of any shape (None data stays None, as on the plain path)."""
    if data is None:
        return None
    try:
        out = codec.call(data, ctx)
        if codec.is_async or inspect.isawaitable(out):
            out = await out
    except Exception as exc:
        raise located(exc, ctx, "serializer") from exc
    return to_bytes(out, ctx.field, ctx.topic, True)


def serialize_now(codec: FieldCodec, data: Any, ctx: SerializationContext) -> bytes | None:
    """`serialize` for a serializer that is not async (``Producer.produce`` cannot await):
    one that returns an awaitable raises SerializationError."""
    if data is None:
        return None
    try:
        out = codec.call(data, ctx)
    except Exception as exc:
        raise located(exc, ctx, "serializer") from exc
    return to_bytes(out, ctx.field, ctx.topic, True)


async def deserialize(codec: FieldCodec, data: bytes | None, ctx: SerializationContext) -> Any:
    """Run one deserializer of any shape (exceptions propagate: the consumer wraps them)."""
    out = codec.call(data, ctx)
    if codec.is_async or inspect.isawaitable(out):
        out = await out
    return out
