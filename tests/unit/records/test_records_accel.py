"""The optional mypyc-compiled modules and their pure-Python fallback are tested alike.

When the compiled modules are present the normal run tests them, and this file reruns the
records suite, the consumer-record, iteration and group-wiring tests, the producer's and the
metrics' unit tests and the framing and connection-state tests in a subprocess that forces
the .py sources; stale builds are refused.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kafkaio.records
from kafkaio.records import COMPILED, BatchBuilder, Compression, iter_batches

HERE = Path(__file__).parent
PACKAGE_DIR = Path(kafkaio.records.__file__).parent.parent
# The modules setup.py compiles (KAFKAIO_COMPILE=1).
COMPILED_MODULES = (
    "records.varint",
    "records.record",
    "records.batch",
    "records.builder",
    "consumer.record",
    "consumer.iteration",
    "producer.murmur2",
    "producer.future",
    "producer.batch",
    "producer.memory",
    "producer.partitioner",
    "producer.accumulator",
    "producer.appender",
    "producer.sender",
    "producer.idempotence",
    "metrics.sensor",
    "metrics.producer",
    "metrics.timing",
    "protocol.frames",
    "net.framing",
)
# The tests rerun on the pure-Python modules.
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

PURE = {"kafkaio." + m for m in os.environ["KAFKAIO_TEST_PURE_MODULES"].split(",")}

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
        candidate = PACKAGE_DIR / f"{module.replace('.', '/')}{suffix}"
        if candidate.exists():
            return candidate
    return None


def test_implementation_flag_matches_the_loaded_modules() -> None:
    loaded = [importlib.import_module(f"kafkaio.{m}").__file__ for m in COMPILED_MODULES]
    compiled = [not str(path).endswith(".py") for path in loaded]
    assert compiled == [COMPILED] * len(loaded)  # all compiled or none
    if os.environ.get(FORCE_PURE_ENV):
        assert not COMPILED


@pytest.mark.skipif(not COMPILED, reason="the mypyc-compiled codec is not built")
@pytest.mark.skipif(
    not (PACKAGE_DIR.parent / "setup.py").exists(),
    reason="an installed package: its modules were compiled by the wheel's build",
)
def test_compiled_modules_are_not_stale() -> None:
    for module in COMPILED_MODULES:
        extension = _extension(module)
        assert extension is not None, f"{module} has no compiled extension"
        source = PACKAGE_DIR / f"{module.replace('.', '/')}.py"
        assert extension.stat().st_mtime >= source.stat().st_mtime, (
            f"{extension.name} is older than {source.name}: rebuild the accelerator "
            "(KAFKAIO_COMPILE=1 python setup.py build_ext --inplace) or delete the .so files"
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
