"""The optional mypyc-compiled modules and their pure-Python fallback are tested alike.

When the compiled modules are present the normal run tests them, and this file reruns the
records suite, the consumer-record, iteration and group-wiring tests, the producer's and the
metrics' unit tests and the framing and connection-state tests in a subprocess that forces
the .py sources; stale builds are refused. The modules are kafkaio/_accel_modules.py's
COMPILED_MODULES, the list setup.py compiles and the Makefile rebuilds from.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kafkaio
from kafkaio._accel_modules import COMPILED_MODULES, source_paths
from kafkaio.records import COMPILED, BatchBuilder, Compression, iter_batches

HERE = Path(__file__).parent
# The directory holding kafkaio/: the checkout, or site-packages for an installed wheel.
ROOT = Path(kafkaio.__file__).parent.parent
# The tests rerun on the pure-Python modules (COMPILED_MODULES, the modules setup.py compiles).
PURE_SUITES = (
    HERE,
    HERE.parent / "consumer" / "test_record.py",
    HERE.parent / "consumer" / "test_fetch_buffer.py",
    HERE.parent / "consumer" / "test_iteration.py",
    HERE.parent / "consumer" / "test_group_wiring.py",
    HERE.parent / "producer",
    HERE.parent / "metrics",
    HERE.parent / "net" / "test_framing.py",
    HERE.parent / "net" / "test_state.py",
    HERE.parent / "protocol" / "test_typed_requests.py",
)
FORCE_PURE_ENV = "KAFKAIO_TEST_FORCE_PURE_RECORDS"

# Runs pytest with an import hook that loads the compiled modules from .py files even when a
# compiled extension sits next to them (extensions normally win).
_PURE_RUNNER = """
import importlib.machinery, importlib.util, os, sys

PURE = set(os.environ["KAFKAIO_TEST_PURE_MODULES"].split(","))

class PureRecords:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name not in PURE or not path:
            return None
        for entry in path:
            source = os.path.join(entry, name.rpartition(".")[2] + ".py")
            if os.path.exists(source):
                return importlib.util.spec_from_file_location(name, source)
        return None

sys.meta_path.insert(0, PureRecords)
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""


def _extension(module: str) -> Path | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = ROOT / f"{module.replace('.', '/')}{suffix}"
        if candidate.exists():
            return candidate
    return None


def test_implementation_flag_matches_the_loaded_modules() -> None:
    loaded = [importlib.import_module(m).__file__ for m in COMPILED_MODULES]
    compiled = [not str(path).endswith(".py") for path in loaded]
    assert compiled == [COMPILED] * len(loaded)  # all compiled or none
    if os.environ.get(FORCE_PURE_ENV):
        assert not COMPILED


@pytest.mark.skipif(not COMPILED, reason="the mypyc-compiled codec is not built")
@pytest.mark.skipif(
    not (ROOT / "setup.py").exists(),
    reason="an installed package: its modules were compiled by the wheel's build",
)
def test_compiled_modules_are_not_stale() -> None:
    for module in COMPILED_MODULES:
        extension = _extension(module)
        assert extension is not None, f"{module} has no compiled extension"
        source = ROOT / f"{module.replace('.', '/')}.py"
        assert extension.stat().st_mtime >= source.stat().st_mtime, (
            f"{extension.name} is older than {source.name}: rebuild the accelerator "
            "(KAFKAIO_COMPILE=1 python setup.py build_ext --inplace) or delete the .so files"
        )


def test_every_listed_module_has_its_python_source() -> None:
    """The list names each module once, and each is a .py of the package (the fallback)."""
    assert len(set(COMPILED_MODULES)) == len(COMPILED_MODULES)
    assert all(m.startswith("kafkaio.") for m in COMPILED_MODULES)
    missing = [path for path in source_paths() if not (ROOT / path).is_file()]
    assert missing == []


@pytest.mark.skipif(not COMPILED, reason="the mypyc-compiled codec is not built")
def test_the_built_extensions_are_the_listed_modules() -> None:
    """The build (setup.py) compiled exactly the listed modules: none missing, none extra."""
    suffixes = sorted(importlib.machinery.EXTENSION_SUFFIXES, key=len, reverse=True)
    built = set()
    for path in (ROOT / "kafkaio").rglob("*"):
        suffix = next((s for s in suffixes if path.name.endswith(s)), None)
        if suffix is None:
            continue
        stem = path.name[: -len(suffix)]
        # mypyc's per-module runtime (separate=True), and extensions for another Python
        if stem.endswith("__mypyc") or "." in stem:
            continue
        module = path.parent.relative_to(ROOT).as_posix().replace("/", ".")
        built.add(f"{module}.{stem}")
    assert built == set(COMPILED_MODULES), (
        "the compiled extensions differ from kafkaio/_accel_modules.py: rebuild them "
        "(make accel-clean accel)"
    )


@pytest.mark.skipif(
    not (ROOT / "Makefile").exists() or shutil.which("make") is None,
    reason="needs the checkout's Makefile and make",
)
def test_make_accel_rebuilds_from_the_listed_sources() -> None:
    result = subprocess.run(
        ["make", "--no-print-directory", "-s", "--eval",
         "print-accel-src: ; @echo $(ACCEL_SRC)", "print-accel-src"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == source_paths()


def test_every_compiled_module_has_its_tests_rerun_on_pure_python() -> None:
    """PURE_SUITES holds unit tests of each compiled module's subpackage."""
    for module in COMPILED_MODULES:
        tests = HERE.parent / module.split(".")[1]
        assert any(s == tests or tests in s.parents for s in PURE_SUITES), (
            f"no suite under {tests} in PURE_SUITES: add the unit tests of {module}"
        )


@pytest.mark.skipif(not COMPILED, reason="the mypyc-compiled codec is not built")
@pytest.mark.skipif(bool(os.environ.get(FORCE_PURE_ENV)), reason="already the pure-Python run")
def test_pure_python_fallback_passes_the_records_suite() -> None:
    env = dict(
        os.environ,
        **{FORCE_PURE_ENV: "1", "KAFKAIO_TEST_PURE_MODULES": ",".join(COMPILED_MODULES)},
    )
    suites = [str(path) for path in PURE_SUITES]
    result = subprocess.run(
        [sys.executable, "-c", _PURE_RUNNER, "-q", "-p", "no:cacheprovider", *suites],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout


@pytest.mark.parametrize("codec", list(Compression))
def test_batches_are_byte_identical_to_a_known_encoding(codec: Compression) -> None:
    """Whichever implementation runs, uncompressed bytes match a hand-assembled batch."""
    builder = BatchBuilder(compression=codec)
    builder.append(1_000, b"k", b"value")
    builder.append(1_300, None, b"x" * 200, [("h", b"1"), ("n", None)])
    raw = builder.build(base_offset=5)
    (batch,) = list(iter_batches(raw))
    assert batch.record_count == 2
    if codec is Compression.NONE:
        record0 = bytes([0x00, 0x00, 0x00, 0x02, 0x6B, 0x0A]) + b"value" + b"\x00"
        record1 = (
            bytes([0x00, 0xD8, 0x04, 0x02, 0x01, 0x90, 0x03])
            + b"x" * 200
            + bytes([0x04, 0x02])
            + b"h"
            + bytes([0x02])
            + b"1"
            + bytes([0x02])
            + b"n"
            + bytes([0x01])
        )
        expected = bytes([len(record0) << 1]) + record0
        expected += bytes([((len(record1) << 1) & 0x7F) | 0x80, (len(record1) << 1) >> 7])
        expected += record1
        assert raw[61:] == expected
    assert [(r.offset, r.timestamp, r.key, r.headers) for r in batch] == [
        (5, 1_000, b"k", []),
        (6, 1_300, None, [("h", b"1"), ("n", None)]),
    ]
