"""Hypothesis strategies that build valid instances of any generated message for one version."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import strategies as st

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def _in(rng: tuple[int, int], v: int) -> bool:
    lo, hi = rng
    return lo <= v and (hi == -1 or v <= hi)


def _scalar(kafka_type: str) -> st.SearchStrategy[Any]:
    if kafka_type in INT_RANGES:
        lo, hi = INT_RANGES[kafka_type]
        return st.integers(lo, hi)
    if kafka_type == "bool":
        return st.booleans()
    if kafka_type == "float64":
        return st.floats(allow_nan=False)
    if kafka_type == "string":
        return st.text(max_size=20)
    if kafka_type in ("bytes", "records"):
        return st.binary(max_size=40)
    if kafka_type == "uuid":
        return st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))
    raise AssertionError(kafka_type)


def instance(root: type, cls: type, version: int, depth: int = 0) -> st.SearchStrategy[Any]:
    """Instances of `cls` (a class nested in message class `root`) valid at `version`."""
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for attr, ktype, versions, nullable, _tagged in cls.FIELD_SPECS:  # type: ignore[attr-defined]
        if not _in(versions, version):
            continue
        elem = ktype[2:] if ktype.startswith("[]") else ktype
        if elem in INT_RANGES or elem in ("bool", "float64", "string", "bytes", "records", "uuid"):
            base = _scalar(elem)
        else:
            sub = getattr(root, elem)
            base = instance(root, sub, version, depth + 1)
        if ktype.startswith("[]"):
            base = st.lists(base, max_size=3 if depth < 2 else 1)
        if _in(nullable, version):
            base = st.none() | base
        kwargs[attr] = base
    return st.builds(cls, **kwargs)
