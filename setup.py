"""Optional accelerator: compile kafkaio's record codec with mypyc (``KAFKAIO_COMPILE=1``).

Everything else is configured in pyproject.toml; without KAFKAIO_COMPILE=1 the package stays
pure Python and needs no compiler. Build in place for a development tree (needs mypy, which
the dev extra installs, and a C compiler):

    KAFKAIO_COMPILE=1 .venv/bin/python setup.py build_ext --inplace

or ``KAFKAIO_COMPILE=1 pip install --no-build-isolation .`` for an installed package. The
compiled modules shadow the .py files of the same name; delete the ``kafkaio/*/*.so``
files to go back to pure Python (and rebuild after editing a compiled module).
"""

from __future__ import annotations

import os

from setuptools import setup  # type: ignore[import-untyped]

# The hot path: varints, Record, RecordBatch decoding and BatchBuilder. compression.py and
# legacy.py stay interpreted (their time is spent in codec libraries or is rare).
COMPILED_MODULES = [
    "kafkaio/records/varint.py",
    "kafkaio/records/record.py",
    "kafkaio/records/batch.py",
    "kafkaio/records/builder.py",
    "kafkaio/consumer/record.py",
    "kafkaio/producer/murmur2.py",
]


def _ext_modules() -> list[object]:
    if os.environ.get("KAFKAIO_COMPILE", "") not in ("1", "true", "yes"):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError as exc:
        raise SystemExit(
            "KAFKAIO_COMPILE=1 needs mypy (with mypyc) in the build environment: install the "
            "dev extra and build with --no-build-isolation, or unset KAFKAIO_COMPILE"
        ) from exc
    # separate=True: one extension per module, placed next to its .py (no shared library
    # at the top of site-packages).
    return list(mypycify(COMPILED_MODULES, opt_level="3", separate=True))


setup(ext_modules=_ext_modules())
