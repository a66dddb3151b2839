"""Benchmark results: rows of medians, the machine they ran on, and JSON/markdown/PNG output.

Every suite returns `Row`s; `write_report` saves them as JSON and markdown (and a chart when
matplotlib is installed) so runs can be compared later.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

BASELINE = "aiokafka"  # ratios are kafkaio's value over this client's, in the same run
LIBRDKAFKA = "confluent-kafka (sync)"  # the second ratio: librdkafka's own API
CEILING = "broker ceiling"  # produce pseudo-client: on the chart a line per case, not a bar
# the same with one request in flight: the most a client that keeps one batch per partition
# in flight (for order, as aiokafka does) can get from this broker; a dotted line
ORDERED_CEILING = "broker ceiling, 1 in flight"
CEILINGS = (CEILING, ORDERED_CEILING)
NOTES: set[str] = set()  # what could not be measured, and why; printed after the tables


def note(text: str) -> None:
    """Record a note for the report (from a suite or, shipped back, from a child process)."""
    NOTES.add(text)


@dataclass(slots=True)
class Row:
    """One client in one case of a suite: the median of its runs, and every run."""

    suite: str  # records, produce, consume, latency, rebalance, memory
    case: str  # e.g. "100 B, none, acks=1"
    client: str
    metrics: dict[str, float]  # medians, e.g. {"msg_per_s": ..., "cpu_us_per_msg": ...}
    runs: list[dict[str, float]] = field(default_factory=list)


def median_row(suite: str, case: str, client: str, runs: Sequence[dict[str, float]]) -> Row:
    keys = runs[0].keys() if runs else ()
    medians = {k: statistics.median(r[k] for r in runs) for k in keys}
    return Row(suite, case, client, medians, list(runs))


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def environment(bootstrap: str | None = None) -> dict[str, Any]:
    """What the numbers depend on: machine, Python, library versions, codec build, broker."""
    from benchmarks.common import describe_broker
    from kafkaio.records import COMPILED

    info: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} "
        f"{platform.release()}",
        "python": platform.python_version(),
        "kafkaio": _version("kafkaio"),
        "kafkaio_codec": "mypyc-compiled" if COMPILED else "pure Python",
        "aiokafka": _version("aiokafka"),
        "confluent-kafka": _version("confluent-kafka"),
        "kafka-python": _version("kafka-python"),
        "broker": describe_broker(bootstrap),
    }
    try:
        import confluent_kafka

        info["librdkafka"] = confluent_kafka.libversion()[0]
    except ImportError:
        pass
    try:
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    return info


# -- markdown ----------------------------------------------------------------------------

_THROUGHPUT = [
    ("msg_per_s", "msg/s", ",.0f"),
    ("mb_per_s", "MB/s", ",.1f"),
    ("cpu_us_per_msg", "CPU µs/msg", ".2f"),
    ("peak_rss_mib", "peak RSS MiB", ".0f"),
]
_COLUMNS: dict[str, list[tuple[str, str, str]]] = {
    # suite: (metric key, header, format)
    "records": [("ns_per_record", "ns/record", ",.0f")],
    "produce": _THROUGHPUT,
    # steady state (first record to last); start-up and close apart, and the whole run
    "consume": [
        ("msg_per_s", "msg/s", ",.0f"),
        ("mb_per_s", "MB/s", ",.1f"),
        ("cpu_us_per_msg", "CPU µs/msg", ".2f"),
        ("startup_s", "start-up s", ".2f"),
        ("close_s", "close s", ".2f"),
        ("whole_msg_per_s", "whole run msg/s", ",.0f"),
        ("peak_rss_mib", "peak RSS MiB", ".0f"),
    ],
    "latency": [
        ("p50_ms", "p50 ms", ",.2f"),
        ("p99_ms", "p99 ms", ",.2f"),
        ("p999_ms", "p99.9 ms", ",.2f"),
        ("max_ms", "max ms", ",.2f"),
        ("samples", "samples", ",.0f"),
        ("client_cpu_pct", "client CPU %", ".0f"),
        ("broker_cpu_pct", "broker CPU %", ".0f"),
    ],
    "rebalance": [
        ("steady_gap_ms", "steady: longest partition gap ms", ",.0f"),
        ("join_pause_ms", "join: group pause ms", ",.0f"),
        ("join_gap_ms", "join: longest partition gap ms", ",.0f"),
        ("leave_pause_ms", "leave: group pause ms", ",.0f"),
        ("leave_gap_ms", "leave: longest partition gap ms", ",.0f"),
    ],
    "spark": [
        ("rows_per_s", "rows/s", ",.0f"),
        ("mb_per_s", "MB/s", ",.1f"),
        ("exec_cpu_us_per_row", "executors CPU µs/row", ".2f"),
        ("broker_cpu_us_per_row", "broker CPU µs/row", ".2f"),
        ("exec_peak_mib", "peak MiB per executor", ".0f"),
        ("p50_ms", "p50 ms", ",.0f"),
        ("p99_ms", "p99 ms", ",.0f"),
        ("samples", "samples", ",.0f"),
    ],
    "memory": [
        ("start_rss_mib", "start RSS MiB", ".1f"),
        ("peak_rss_mib", "peak RSS MiB", ".1f"),
        ("end_rss_mib", "end RSS MiB", ".1f"),
        ("growth_mib", "growth MiB", ".1f"),
        ("msg_per_s", "msg/s", ",.0f"),
    ],
}
# a group member's close(), (a) right after the last record, (b) after idle polls (bench_close)
_COLUMNS["close"] = [
    ("close_s", "(a) after the last record: close s", ".3f"),
    ("close_s_min", "min", ".3f"),
    ("close_s_max", "max", ".3f"),
    ("idle_close_s", "(b) after 3 idle polls: close s", ".3f"),
    ("idle_close_s_min", "min", ".3f"),
    ("idle_close_s_max", "max", ".3f"),
]
# the scale curves' tables (bench_scale): the produce and consume columns
_COLUMNS["scale: produce"] = _COLUMNS["produce"]
_COLUMNS["scale: consume"] = _COLUMNS["consume"]
_COLUMNS["scale: group size"] = [
    ("formation_s", "formation s", ".2f"),
    ("join_s", "join s", ".2f"),
    ("moved", "partitions moved on join", ".0f"),
    ("cpu_s", "CPU s", ".2f"),
    ("peak_rss_mib", "peak RSS MiB", ".0f"),
]
_COLUMNS["scale: metadata"] = [
    ("wall_ms", "refresh wall ms", ",.1f"),
    ("cpu_ms", "refresh CPU ms", ",.1f"),
    ("cpu_us_per_partition", "CPU µs/partition", ".2f"),
    ("peak_rss_mib", "peak RSS MiB", ".0f"),
]
# the ratio column: kafkaio's value / aiokafka's (higher is better for msg/s, lower for
# ns/record and latency)
_RATIO = {
    "records": "ns_per_record",
    "produce": "msg_per_s",
    "consume": "msg_per_s",
    "latency": "p99_ms",
    "scale: produce": "msg_per_s",
    "scale: consume": "msg_per_s",
    "scale: group size": "join_s",
    "scale: metadata": "cpu_ms",
    "spark": "rows_per_s",
}
# the client each suite's ratios are to (default BASELINE)
_BASELINES = {"spark": "spark-sql-kafka"}


def markdown(rows: Sequence[Row], env: dict[str, Any]) -> str:
    out = ["# Benchmark results", ""]
    out += [f"- {k}: {v}" for k, v in env.items()]
    for suite in _COLUMNS:
        suite_rows = [r for r in rows if r.suite == suite]
        if suite_rows:
            out += ["", f"## {suite}", "", suite_table(suite_rows)]
    if NOTES:
        out += ["", "## Notes", ""]
        out += [f"- {text}." for text in sorted(NOTES)]
    return "\n".join(out) + "\n"


def print_suite(description: str, rows: Sequence[Row]) -> None:
    """What a suite's own command prints: its description, its table and the notes."""
    print(description)
    if rows:
        print(suite_table(rows), flush=True)
    for text in sorted(NOTES):
        print(f"\nNote: {text}.")


def suite_table(rows: Sequence[Row]) -> str:
    """One markdown table; for throughput and latency, each client's ratio to aiokafka and
    to librdkafka (confluent-kafka's sync client) in the same run."""
    suite = rows[0].suite
    columns = _COLUMNS[suite]
    ratio_key = _RATIO.get(suite)
    baseline = _BASELINES.get(suite, BASELINE)
    header = ["case", "client", *(h for _, h, _ in columns)]
    references = [baseline, LIBRDKAFKA] if ratio_key else []
    references = [ref for ref in references if any(r.client == ref for r in rows)]
    lower = (
        " (lower is better)" if ratio_key and ratio_key not in ("msg_per_s", "rows_per_s") else ""
    )
    header += [f"vs {'librdkafka' if ref == LIBRDKAFKA else ref}{lower}" for ref in references]
    header.append("runs")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * 2 + "---:|" * (len(header) - 2)]
    bases = [
        {r.case: r.metrics.get(ratio_key or "") for r in rows if r.client == ref}
        for ref in references
    ]
    for r in rows:
        cells = [r.case, r.client]
        cells += [format(r.metrics[k], f) if k in r.metrics else "" for k, _, f in columns]
        for base in bases:
            theirs = base.get(r.case)
            ours = r.metrics.get(ratio_key or "")
            cells.append(f"{ours / theirs:.2f}x" if theirs and ours else "")
        cells.append(str(len(r.runs) or 1))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- chart -------------------------------------------------------------------------------


def chart(rows: Sequence[Row], path: Path) -> bool:
    """Bar chart of throughput relative to aiokafka per case (False: matplotlib missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    suites = [s for s in ("produce", "consume") if any(r.suite == s for r in rows)]
    if not suites:
        return False
    every_client = list(
        dict.fromkeys(r.client for r in rows if r.suite in suites and r.client not in CEILINGS)
    )
    palette = plt.get_cmap("tab10")
    colors = {client: palette(i % 10) for i, client in enumerate(every_client)}
    fig, axes = plt.subplots(len(suites), 1, figsize=(11, 3.6 * len(suites)), squeeze=False)
    for ax, suite in zip(axes[:, 0], suites, strict=True):
        suite_rows = [r for r in rows if r.suite == suite]
        cases = list(dict.fromkeys(r.case for r in suite_rows))
        clients = list(dict.fromkeys(r.client for r in suite_rows if r.client not in CEILINGS))
        base = {r.case: r.metrics["msg_per_s"] for r in suite_rows if r.client == BASELINE}
        width = 0.8 / max(len(clients), 1)
        highest = 2.0  # of the bars (and the dashed 2x line)
        for i, client in enumerate(clients):
            values = []
            for case in cases:
                row = next((r for r in suite_rows if r.case == case and r.client == client), None)
                theirs = base.get(case)
                values.append(row.metrics["msg_per_s"] / theirs if row and theirs else 0.0)
            positions = [c + i * width for c in range(len(cases))]
            ax.bar(positions, values, width, label=client, color=colors[client])
            highest = max(highest, *values)
        for ceiling in CEILINGS:
            _ceiling_marks(ax, suite_rows, cases, base, width, len(clients), 1.4 * highest, ceiling)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.axhline(2.0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xticks([c + width * (len(clients) - 1) / 2 for c in range(len(cases))])
        ax.set_xticklabels(cases, fontsize=8, rotation=12, ha="right")
        ax.set_ylabel(f"msg/s vs {BASELINE}")
        ax.set_title(f"{suite} (msg/s relative to {BASELINE}; dashed: 2x)")
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _ceiling_marks(
    ax: Any,
    rows: Sequence[Row],
    cases: list[str],
    base: dict[str, float],
    width: float,
    bars: int,
    top: float,
    ceiling: str = CEILING,
) -> None:
    """A broker ceiling (`ceiling`: CEILING, a solid line, or ORDERED_CEILING, dotted) of
    each case: a black line across the case's bars at its msg/s relative to the baseline,
    labelled with that ratio. A ceiling far above every bar is drawn at `top` (the axis ends
    there) so the bars stay readable."""
    label: str | None = ceiling
    solid = ceiling == CEILING  # its ratio at the right end, the dotted one's at the left
    clipped = False
    for c, case in enumerate(cases):
        row = next((r for r in rows if r.case == case and r.client == ceiling), None)
        theirs = base.get(case)
        if row is None or not theirs:
            continue
        level = row.metrics["msg_per_s"] / theirs
        drawn = min(level, top)
        clipped = clipped or level > top
        left = c - width / 2  # bar i of a case is centred at c + i * width
        ax.hlines(
            drawn,
            left,
            left + bars * width,
            colors="black",
            linewidth=2 if solid else 1.5,
            linestyles="solid" if solid else "dotted",
            label=label,
        )
        ax.annotate(
            f"{level:.1f}x" + (" (off scale)" if level > top else ""),
            (left + bars * width if solid else left, drawn),
            xytext=(2, 2),
            textcoords="offset points",
            fontsize=7,
            ha="right" if solid else "left",
            va="bottom",
        )
        label = None  # one legend entry
    if clipped:
        ax.set_ylim(0, top * 1.08)


def write_report(rows: Iterable[Row], out_dir: Path, env: dict[str, Any]) -> list[Path]:
    """Write results.json, results.md and (if possible) results.png into `out_dir`."""
    rows = list(rows)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    json_path = out_dir / "results.json"
    json_path.write_text(
        json.dumps(
            {"environment": env, "rows": [asdict(r) for r in rows], "notes": sorted(NOTES)},
            indent=1,
        )
        + "\n"
    )
    written.append(json_path)
    md_path = out_dir / "results.md"
    md_path.write_text(markdown(rows, env))
    written.append(md_path)
    png_path = out_dir / "results.png"
    if chart(rows, png_path):
        written.append(png_path)
    return written
