"""Build kafkaio's wheel with every CPython 3.10-3.13 on this machine and test each one.

For each interpreter (``--python PATH`` as often as wanted, or every pyenv and PATH
``python3.1x`` found): make a venv, build the wheel there with ``python -m build`` (mypyc
compiles the codec when a C compiler is present), install it with no extras into a fresh
venv, check that the compiled codec is the one loaded, and run the unit tests against the
installed package (from a copy of tests/ outside the checkout, so the source tree cannot
be imported instead). Prints a summary; exits 1 if any version failed.

    python tools/check_wheels.py                 # what `make wheels-check` runs
    python tools/check_wheels.py --python /usr/bin/python3.12 --keep
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = ("3.10", "3.11", "3.12", "3.13")
TEST_REQUIREMENTS = [
    "pytest>=8",
    "pytest-asyncio>=0.24",
    "hypothesis>=6.100",
    "trio>=0.25",
    "aiokafka==0.14.0",
    "certifi",
    "pydantic>=2",  # the typed serdes' unit tests (kafkaio[pydantic])
]


def find_interpreters() -> dict[str, str]:
    """Minor version -> an interpreter for it (pyenv's first, then PATH)."""
    found: dict[str, str] = {}
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for version in VERSIONS:
        for candidate in sorted(glob.glob(str(pyenv / f"{version}.*" / "bin" / "python"))):
            found.setdefault(version, candidate)
        on_path = shutil.which(f"python{version}")
        if on_path:
            found.setdefault(version, on_path)
    return found


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}


def _run(args: list[str], cwd: Path, log: Path) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(args)}\n")
        out.flush()
        code = subprocess.call(args, cwd=cwd, env=_env(), stdout=out, stderr=subprocess.STDOUT)
    if code != 0:
        raise RuntimeError(f"{' '.join(args[:4])}... exited with {code}; see {log}")


def _venv(interpreter: str, where: Path, log: Path) -> Path:
    _run([interpreter, "-m", "venv", "--clear", str(where)], where.parent, log)
    python = where / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"], where.parent, log)
    return python


def check(version: str, interpreter: str, work: Path) -> tuple[str, str]:
    """Build, install and test with one interpreter; (status, detail)."""
    work.mkdir(parents=True, exist_ok=True)
    log = work / "log.txt"
    log.write_text("")
    started = time.monotonic()
    builder = _venv(interpreter, work / "build-venv", log)
    _run([str(builder), "-m", "pip", "install", "-q", "build"], work, log)
    dist = work / "dist"
    # sdist first, then the wheel from it (in a directory of its own, as a release builds)
    _run([str(builder), "-m", "build", "--outdir", str(dist), str(ROOT)], work, log)
    (wheel,) = dist.glob("kafkaio-*.whl")
    python = _venv(interpreter, work / "test-venv", log)
    _run([str(python), "-m", "pip", "install", "-q", str(wheel), *TEST_REQUIREMENTS], work, log)
    tests = work / "tree"
    shutil.rmtree(tests, ignore_errors=True)
    tests.mkdir()
    shutil.copytree(ROOT / "tests", tests / "tests")
    # a unit test crafts hostile lz4 frames with a helper it shares with the benchmarks
    shutil.copytree(ROOT / "benchmarks", tests / "benchmarks")
    shutil.copy(ROOT / "pyproject.toml", tests / "pyproject.toml")
    probe = (
        "import kafkaio, kafkaio.records as r; "
        "assert 'site-packages' in kafkaio.__file__, kafkaio.__file__; "
        "print(kafkaio.__file__, 'compiled' if r.COMPILED else 'pure Python')"
    )
    _run([str(python), "-c", probe], tests, log)
    _run(
        [str(python), "-m", "pytest", "tests/unit", "-q", "-p", "no:cacheprovider", "-x"],
        tests,
        log,
    )
    lines = log.read_text().splitlines()
    summary = next((line for line in reversed(lines) if " passed" in line), "?")
    codec = next((line.split()[-1] for line in lines if line.endswith(("compiled", "Python"))), "?")
    return "ok", f"{wheel.name}; codec {codec}; {summary.strip()}; {time.monotonic() - started:.0f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", action="append", help="an interpreter to check (repeat)")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "wheels-check")
    parser.add_argument("--keep", action="store_true", help="keep the venvs and logs")
    args = parser.parse_args()
    if args.python:
        interpreters = {
            subprocess.check_output(
                [p, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], text=True
            ).strip(): p
            for p in args.python
        }
    else:
        interpreters = find_interpreters()
    failed = False
    for version in VERSIONS:
        if version not in interpreters:
            print(f"CPython {version}: MISSING on this machine (not checked)")
            continue
        work = Path(tempfile.mkdtemp(prefix=f"py{version}-", dir=_ensure(args.work)))
        try:
            status, detail = check(version, interpreters[version], work)
        except Exception as exc:  # report and go on with the other versions
            status, detail, failed = "FAILED", str(exc), True
        print(f"CPython {version} ({interpreters[version]}): {status}: {detail}", flush=True)
        if status == "ok" and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


if __name__ == "__main__":
    sys.exit(main())
