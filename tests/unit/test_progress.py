"""The progress display: plain lines when piped, final totals exact."""

from __future__ import annotations

import io

from kafkaio.progress import Progress


def test_piped_output_prints_quarter_lines_and_one_final_line() -> None:
    out = io.StringIO()
    p = Progress("produced", 1000, stream=out)
    for _ in range(10):
        p.update(100, 1000)
    p.finish()
    lines = out.getvalue().splitlines()
    assert len(lines) == 4  # 25, 50, 75, 100 %; finish adds nothing new
    assert "1,000/1,000" in lines[-1] and "(100.0%)" in lines[-1]


def test_finish_prints_the_total_when_not_yet_shown() -> None:
    out = io.StringIO()
    p = Progress("consumed", 1000, stream=out)
    p.update(10)
    p.finish()
    assert out.getvalue().splitlines()[-1].split()[1] == "10/1,000"
