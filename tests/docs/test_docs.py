"""The documentation site: it builds with no warnings, and its runnable examples run.

A ```python block right after ``<!-- run -->`` runs as a script against the embedded Tansu
broker (``localhost:9092`` in it is replaced by the broker's address); after
``<!-- run pytest -->`` it runs as a test module under pytest.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from kafkaio.testing import BrokerInfo

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PLACEHOLDER = "localhost:9092"
RUN_MARKS = {"<!-- run -->": "script", "<!-- run pytest -->": "pytest"}
EXAMPLE_TIMEOUT_S = 120
# mkdocs-material prints an end-of-life banner unless told not to; it is not a build warning.
BUILD_ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}

_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced code block of a page."""

    page: str  # path under docs/
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    mode: str | None  # "script", "pytest" or None (not runnable)

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"


def extract_blocks(text: str, page: str = "<text>") -> list[Block]:
    """Every fenced code block of a Markdown text, with the run mark that precedes it."""
    lines = text.splitlines()
    blocks: list[Block] = []
    previous = ""  # the last non-blank line before the current one
    i = 0
    while i < len(lines):
        match = _FENCE_OPEN.match(lines[i])
        if match is None:
            if lines[i].strip():
                previous = lines[i].strip()
            i += 1
            continue
        indent, fence = len(match["indent"]), match["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            line = lines[j]
            body.append(line[indent:] if not line[:indent].strip() else line.lstrip())
            j += 1
        blocks.append(
            Block(
                page, i + 1, match["lang"].lower(), "\n".join(body) + "\n", RUN_MARKS.get(previous)
            )
        )
        previous = ""
        i = j + 1
    return blocks


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def all_blocks() -> list[Block]:
    return [
        block
        for path in pages()
        for block in extract_blocks(path.read_text(encoding="utf-8"), str(path.relative_to(DOCS)))
    ]


def runnable_pages() -> list[str]:
    return sorted({b.page for b in all_blocks() if b.mode is not None})


def _load_tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def _missing_docs_tools() -> str | None:
    wanted = {
        "mkdocs": "mkdocs",
        "material": "mkdocs-material",
        "mkdocstrings": "mkdocstrings",
        "mkdocstrings_handlers.python": "mkdocstrings-python",
    }
    for module, package in wanted.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            return f"{package} is not installed (pip install -e '.[dev]' installs the docs tools)"
    return None


# -- the extractor itself ------------------------------------------------------------------


def test_extract_blocks_reads_run_marks_and_fences() -> None:
    text = "\n".join(
        [
            "# Page",
            "<!-- run -->",
            "",
            "```python",
            "print('a')",
            "```",
            "text",
            "```python",
            "print('b')",
            "```",
            "<!-- run pytest -->",
            "````python",
            "```",
            "def test_x(): pass",
            "````",
            "- item",
            "",
            "    ```sh",
            "    echo c",
            "    ```",
        ]
    )
    blocks = extract_blocks(text, "p.md")
    assert [(b.line, b.lang, b.mode) for b in blocks] == [
        (4, "python", "script"),
        (8, "python", None),
        (12, "python", "pytest"),
        (18, "sh", None),
    ]
    assert blocks[0].code == "print('a')\n"
    assert blocks[2].code == "```\ndef test_x(): pass\n"
    assert blocks[3].code == "echo c\n"


# -- generated pages and the nav hook --------------------------------------------------------


def test_configuration_reference_is_generated_from_the_config_classes() -> None:
    gen = _load_tool("gen_config_docs")
    committed = (DOCS / "reference" / "configuration.md").read_text(encoding="utf-8")
    assert committed == gen.render(), (
        "docs/reference/configuration.md is out of date: run python tools/gen_config_docs.py"
    )


def test_configuration_reference_defaults_match_the_clients() -> None:
    """The Admin defaults are not in a dataclass: check the generator's copy against Admin."""
    from kafkaio import Admin

    gen = _load_tool("gen_config_docs")
    admin = Admin("127.0.0.1:1")
    assert admin._timeout_ms == gen.ADMIN_DEFAULTS["default_api_timeout_ms"]
    backoff = admin._backoff
    assert backoff.delay_ms(0) == pytest.approx(gen.ADMIN_DEFAULTS["retry_backoff_ms"], rel=0.25)
    assert backoff.delay_ms(50) == pytest.approx(
        gen.ADMIN_DEFAULTS["retry_backoff_max_ms"], rel=0.25
    )


def test_nav_hook_drops_only_missing_optional_pages(tmp_path: Path) -> None:
    hooks = _load_tool("mkdocs_hooks")
    (tmp_path / "share-groups.md").write_text("# s\n")
    nav = [
        {"Home": "index.md"},
        {"Guide": [{"Share groups": "share-groups.md"}, {"Gone": "missing.md"}]},
        {"Project": [{"Reliability": "reliability.md"}]},
    ]
    assert hooks.prune_nav(nav, tmp_path) == [
        {"Home": "index.md"},
        {"Guide": [{"Share groups": "share-groups.md"}, {"Gone": "missing.md"}]},
        {"Project": []},
    ]


# -- the code in the pages -------------------------------------------------------------------


# Python-fenced blocks that are signature sketches, not code: (page, first line).
SKETCHES = {
    ("web.md", "ConsumerRunner(consumer, handler, *, max_records=500, poll_timeout_ms=1000,"),
}


def test_every_python_example_compiles() -> None:
    failures = []
    for block in all_blocks():
        if block.lang not in ("python", "py") or "--8<--" in block.code:
            continue
        if (block.page, block.code.splitlines()[0] if block.code.strip() else "") in SKETCHES:
            continue
        try:
            compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        except SyntaxError as exc:
            failures.append(f"{block.where}: {exc}")
    assert not failures, "\n".join(failures)


def test_getting_started_producer_and_consumer_are_runnable() -> None:
    runnable = [b for b in all_blocks() if b.page == "getting-started.md" and b.mode == "script"]
    assert any("Producer(" in b.code and ".send(" in b.code for b in runnable)
    assert any("Consumer(" in b.code and "group_id=" in b.code for b in runnable)
    assert all(PLACEHOLDER in b.code for b in runnable), "runnable examples use localhost:9092"


def _run(cmd: list[str], cwd: Path, where: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    try:
        result = subprocess.run(
            cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=EXAMPLE_TIMEOUT_S
        )
    except subprocess.TimeoutExpired as exc:
        output = [o.decode() if isinstance(o, bytes) else o or "" for o in (exc.stdout, exc.stderr)]
        pytest.fail(f"{where} did not finish within {EXAMPLE_TIMEOUT_S} s:\n" + "\n".join(output))
    assert result.returncode == 0, (
        f"{where} failed (exit {result.returncode}):\n{result.stdout}\n{result.stderr}"
    )
    return result


@pytest.mark.integration
@pytest.mark.parametrize("page", runnable_pages())
def test_runnable_examples_run_against_tansu(
    page: str, tansu_broker: BrokerInfo, tmp_path: Path
) -> None:
    """Run the page's marked examples in order (later ones may read what earlier ones wrote)."""
    blocks = [b for b in all_blocks() if b.page == page and b.mode is not None]
    for n, block in enumerate(blocks):
        if block.mode == "script":
            script = tmp_path / f"example_{n}.py"
            script.write_text(block.code.replace(PLACEHOLDER, tansu_broker.bootstrap))
            _run([sys.executable, str(script)], ROOT, block.where)
        else:
            folder = tmp_path / f"example_{n}"
            folder.mkdir()
            (folder / f"test_example_{n}.py").write_text(block.code)
            result = _run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "--rootdir",
                    str(folder),
                    "-o",
                    "asyncio_mode=auto",
                    "-o",
                    "asyncio_default_fixture_loop_scope=function",
                    str(folder),
                ],
                folder,
                block.where,
            )
            assert re.search(r"\b\d+ passed\b", result.stdout), result.stdout
            assert " failed" not in result.stdout and " skipped" not in result.stdout


# -- the site --------------------------------------------------------------------------------


def test_site_builds_without_warnings(tmp_path: Path) -> None:
    reason = _missing_docs_tools()
    if reason is not None:
        pytest.skip(reason)
    site = tmp_path / "site"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(ROOT / "mkdocs.yml"),
            "-d",
            str(site),
        ],
        cwd=tmp_path,  # not the repository's root: paths are relative to mkdocs.yml
        env=BUILD_ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "WARNING" not in output, output
    for page in ("index.html", "getting-started/index.html", "reference/configuration/index.html"):
        assert (site / page).is_file(), f"{page} was not built"
    api = (site / "reference" / "api" / "producer" / "index.html").read_text(encoding="utf-8")
    assert "send_offsets_to_transaction" in api, "the API reference has no Producer methods"
    consumer = (site / "reference" / "api" / "consumer" / "index.html").read_text("utf-8")
    assert "request_managers" not in consumer, "an internal property is in the API reference"
    metrics = (site / "reference" / "api" / "metrics" / "index.html").read_text("utf-8")
    assert "HealthSnapshot" in metrics and "MetricsRegistry" in metrics
    assert "KafkaMetricsExporter" in metrics and "TracingInterceptor" in metrics
    serde = (site / "reference" / "api" / "serde" / "index.html").read_text("utf-8")
    assert "AvroSerializer" in serde and "SchemaRegistryClient" in serde
    for page in ("observability", "serialization", "schema-registry"):
        assert (site / page / "index.html").is_file(), f"{page}.md is not in the site"
    for optional in ("reliability", "share-groups"):
        built = (site / optional / "index.html").is_file()
        assert built == (DOCS / f"{optional}.md").is_file()


def test_web_page_lists_every_route_of_the_examples() -> None:
    """docs/web.md's route table names every route the FastAPI example serves."""
    pytest.importorskip("fastapi", reason="fastapi is not installed")
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "kafkaio_docs_fastapi_example", ROOT / "examples" / "fastapi_app.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    routes = {
        (method, route.path)
        for route in module.create_app("127.0.0.1:1", "t").routes
        for method in getattr(route, "methods", ()) or ()
        if not route.path.startswith(("/docs", "/openapi", "/redoc"))
    }
    page = (DOCS / "web.md").read_text(encoding="utf-8")
    missing = sorted(f"{m} {p}" for m, p in routes if m != "HEAD" and f"`{m} {p}" not in page)
    assert not missing, f"docs/web.md's route table lacks {missing}"
