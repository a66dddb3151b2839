"""Fuzz helpers: random valid protocol messages, byte mutators and a bounded decode runner.

Deterministic (seeded ``random.Random``) so that a sweep's figures are reproducible.
"""

from __future__ import annotations

import random
import signal
import struct
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kafkaio.errors import KafkaError
from kafkaio.protocol import messages as m
from kafkaio.protocol.frames import is_flexible

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
TIME_LIMIT_S = 2.0  # one decode of a hostile frame must finish within this
ALLOC_LIMIT = 4 * 1024 * 1024  # and allocate at most this (peak, traced)

# Values written over length and count fields: huge, negative, null, off by one.
PATCH_I32 = (0x7FFFFFFF, -1, -2, -(2**31), 0x10000000, 1_000_000)
PATCH_I16 = (0x7FFF, -1, -2, -(2**15))
PATCH_VARINTS = (
    b"\xff\xff\xff\xff\x0f",
    b"\xff\xff\xff\xff\x07",
    b"\x80\x80\x80\x80\x80\x01",
    b"\xfe\xff\xff\xff\x07",
    b"\x00",
)


def _in(rng: tuple[int, int], v: int) -> bool:
    lo, hi = rng
    return lo <= v and (hi == -1 or v <= hi)


def random_scalar(rnd: random.Random, kafka_type: str) -> Any:
    if kafka_type in INT_RANGES:
        lo, hi = INT_RANGES[kafka_type]
        return rnd.choice((0, 1, -1 if lo < 0 else 2, rnd.randint(lo, hi)))
    if kafka_type == "bool":
        return rnd.random() < 0.5
    if kafka_type == "float64":
        return rnd.uniform(-1e6, 1e6)
    if kafka_type == "string":
        return "".join(rnd.choice("abcxyz-é") for _ in range(rnd.randint(0, 12)))
    if kafka_type in ("bytes", "records"):
        return rnd.randbytes(rnd.randint(0, 30))
    if kafka_type == "uuid":
        return uuid.UUID(int=rnd.getrandbits(128))
    raise AssertionError(kafka_type)


def random_instance(rnd: random.Random, root: type, cls: type, version: int, depth: int = 0) -> Any:
    """A random instance of ``cls`` (nested in message class ``root``) valid at ``version``."""
    kwargs: dict[str, Any] = {}
    for attr, ktype, versions, nullable, _tagged in cls.FIELD_SPECS:  # type: ignore[attr-defined]
        if not _in(versions, version):
            continue
        if _in(nullable, version) and rnd.random() < 0.15:
            kwargs[attr] = None
            continue
        elem = ktype[2:] if ktype.startswith("[]") else ktype
        scalar = elem in INT_RANGES or elem in (
            "bool",
            "float64",
            "string",
            "bytes",
            "records",
            "uuid",
        )

        def one(elem: str = elem, scalar: bool = scalar) -> Any:
            if scalar:
                return random_scalar(rnd, elem)
            return random_instance(rnd, root, getattr(root, elem), version, depth + 1)

        if ktype.startswith("[]"):
            kwargs[attr] = [one() for _ in range(rnd.randint(0, 3 if depth < 2 else 1))]
        else:
            kwargs[attr] = one()
    return cls(**kwargs)


def response_cases() -> list[tuple[int, type, int]]:
    """(api key, response class, version) for every response version kafkaio decodes."""
    return [
        (key, resp, v)
        for key, (_req, resp) in sorted(m.REQUESTS.items())
        for v in range(resp.MIN_VERSION, resp.MAX_VERSION + 1)
    ]


def response_frame(api_key: int, cls: type, version: int, message: Any, cid: int = 7) -> bytes:
    """A response frame without its size prefix: correlation id, header, body."""
    out = bytearray(struct.pack(">i", cid))
    if api_key != 18 and is_flexible(cls, version):
        out.append(0)
    message.encode_into(version, out)
    return bytes(out)


# -- mutators ---------------------------------------------------------------------------


def flip_bits(rnd: random.Random, data: bytes) -> bytes:
    raw = bytearray(data)
    for _ in range(rnd.randint(1, 4)):
        raw[rnd.randrange(len(raw))] ^= 1 << rnd.randrange(8)
    return bytes(raw)


def truncate(rnd: random.Random, data: bytes) -> bytes:
    return data[: rnd.randrange(len(data))]


def patch_length(rnd: random.Random, data: bytes, pos: int | None = None) -> bytes:
    """Overwrite the bytes at ``pos`` with a huge/negative int32, int16 or varint."""
    raw = bytearray(data)
    pos = rnd.randrange(len(raw)) if pos is None else pos
    kind = rnd.randrange(3)
    if kind == 0:
        patch = struct.pack(">i", rnd.choice(PATCH_I32))
    elif kind == 1:
        patch = struct.pack(">h", rnd.choice(PATCH_I16))
    else:
        patch = rnd.choice(PATCH_VARINTS)
    raw[pos : pos + len(patch)] = patch
    return bytes(raw[: max(len(data), pos + len(patch))])


def splice(rnd: random.Random, data: bytes) -> bytes:
    """Insert or delete a few bytes somewhere (shifts every later field)."""
    pos = rnd.randrange(len(data) + 1)
    if rnd.random() < 0.5:
        return data[:pos] + rnd.randbytes(rnd.randint(1, 8)) + data[pos:]
    return data[:pos] + data[pos + rnd.randint(1, 8) :]


MUTATORS: tuple[Callable[[random.Random, bytes], bytes], ...] = (
    flip_bits,
    truncate,
    patch_length,
    splice,
)


def mutate(rnd: random.Random, data: bytes, header: int = 4) -> bytes:
    """One to three mutations, keeping the first ``header`` bytes (the correlation id)."""
    body = data[header:] or b"\x00"
    for _ in range(rnd.randint(1, 3)):
        body = rnd.choice(MUTATORS)(rnd, body) or b"\x00"
    return data[:header] + body


# -- the bounded runner -----------------------------------------------------------------


class DecodeHang(BaseException):
    """Raised by the alarm when one decode runs past TIME_LIMIT_S."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise DecodeHang()


@dataclass
class FuzzStats:
    """What a sweep did: examples, typed rejections, successes, the worst allocation."""

    examples: int = 0
    rejected: int = 0
    decoded: int = 0
    peak_alloc: int = 0
    crashes: list[str] = field(default_factory=list)


def bounded_decode(decode: Callable[[], object], stats: FuzzStats, label: str) -> None:
    """Run one decode under the time and allocation bounds; record the outcome in ``stats``.

    Allowed outcomes: a value, or a KafkaError subclass. Anything else, a decode running past
    TIME_LIMIT_S or allocating more than ALLOC_LIMIT, is a crash (kept in ``stats.crashes``).
    """
    stats.examples += 1
    old = signal.signal(signal.SIGALRM, _on_alarm)
    tracing = tracemalloc.is_tracing()
    if tracing:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
    signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT_S)
    try:
        decode()
        stats.decoded += 1
    except KafkaError:
        stats.rejected += 1
    except DecodeHang:
        stats.crashes.append(f"{label}: no result within {TIME_LIMIT_S} s")
    except Exception as exc:  # noqa: BLE001 - a foreign error is the finding
        stats.crashes.append(f"{label}: {type(exc).__name__}: {exc}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    if tracing:
        peak = tracemalloc.get_traced_memory()[1] - base
        stats.peak_alloc = max(stats.peak_alloc, peak)
        if peak > ALLOC_LIMIT:
            stats.crashes.append(f"{label}: allocated {peak} bytes")


def traced() -> Iterator[None]:
    """Context generator: tracemalloc on for the block (use with contextlib.contextmanager)."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        yield
    finally:
        if started:
            tracemalloc.stop()
