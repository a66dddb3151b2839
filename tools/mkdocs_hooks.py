"""MkDocs hooks of the kafkaio site (mkdocs.yml `hooks:`): optional nav pages, generated tables.

Drops nav entries of pages not written yet; fills the broker error-code table from the code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# Nav entries that may point at a page not written yet; any other missing page stays an error.
OPTIONAL_PAGES = frozenset({"reliability.md", "share-groups.md"})
# A page line that is replaced by the table of broker error codes (kafkaio.errors).
ERROR_CODES_MARK = "<!-- error-codes -->"


def prune_nav(nav: list[Any], docs_dir: Path) -> list[Any]:
    """`nav` without entries for OPTIONAL_PAGES that do not exist under `docs_dir`."""
    kept: list[Any] = []
    for item in nav:
        if isinstance(item, dict):
            title, value = next(iter(item.items()))
            if isinstance(value, list):
                kept.append({title: prune_nav(value, docs_dir)})
                continue
            page = value
        else:
            page = item
        if isinstance(page, str) and page in OPTIONAL_PAGES and not (docs_dir / page).exists():
            continue
        kept.append(item)
    return kept


def on_config(config: Any) -> Any:
    if config["nav"]:
        config["nav"] = prune_nav(config["nav"], Path(config["docs_dir"]))
    return config


def error_codes_table() -> str:
    """Markdown table of every Kafka error code and the kafkaio class raised for it."""
    from kafkaio.errors import ERRORS_BY_CODE

    rows = [
        "| code | Kafka name | kafkaio class | retriable | meaning |",
        "| ---: | --- | --- | :---: | --- |",
    ]
    for code, cls in sorted(ERRORS_BY_CODE.items()):
        meaning = " ".join(cls.description.split()).replace("|", "\\|")
        retriable = "yes" if cls.retriable else ""
        rows.append(f"| {code} | `{cls.name}` | `{cls.__name__}` | {retriable} | {meaning} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    if ERROR_CODES_MARK in markdown:
        markdown = markdown.replace(ERROR_CODES_MARK, error_codes_table())
    return markdown
