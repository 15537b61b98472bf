"""One spelling of microseconds on every surface (issue 16 §5): the analysis writes blame texts such as
"_replay (decoder.py, def line 198) 934.0us"; console, Markdown and HTML show "934.0 µs"."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from bubblescope.report.analysis_console import print_analysis
from bubblescope.report.analysis_markdown import render_analysis_markdown
from bubblescope.report.cells import NBSP, blame_text
from bubblescope.report.html import render_trace_html

E256_BASE = (
    Path(__file__).resolve().parents[2]
    / "reports/samples/ablation-ling3-flash-e256-h200/runs/base.analysis.json"
)
BARE_US = re.compile(r"\d(?:\.\d+)?us\b")


def test_blame_text_spells_microseconds_once() -> None:
    assert blame_text("step (w.py, def line 32) 117.6us; aten::copy_ 54us") == (
        f"step (w.py, def line 32) 117.6{NBSP}µs; aten::copy_ 54{NBSP}µs"
    )
    # Not a unit: a word that merely contains "us" after a digit, and names are kept.
    assert blame_text("bus 3usx; cudaStreamSynchronize") == "bus 3usx; cudaStreamSynchronize"
    assert blame_text(None) == "—"


@pytest.mark.skipif(not E256_BASE.is_file(), reason="committed e256 sample missing")
def test_real_h200_blames_render_in_microseconds_everywhere() -> None:
    analysis = json.loads(E256_BASE.read_text())
    raw_blames = [g["blame"] for g in analysis["gaps_top"] if BARE_US.search(g.get("blame") or "")]
    assert raw_blames, "the committed analysis writes '...us' blames (the case this test covers)"
    console = Console(record=True, width=400)
    print_analysis(console, analysis)
    surfaces = {
        "console": console.export_text(),
        "markdown": render_analysis_markdown(analysis),
        "html": re.sub(r"<script\b.*?</script>", "", render_trace_html(analysis), flags=re.S),
    }
    for name, text in surfaces.items():
        assert not BARE_US.search(text), (name, BARE_US.search(text))
        assert "µs" in text, name


@pytest.mark.skipif(not E256_BASE.is_file(), reason="committed e256 sample missing")
@pytest.mark.parametrize("width", [80, 100])
def test_console_kernel_table_shows_names_at_terminal_widths(width: int) -> None:
    """At 100 columns the eleven-column kernel table drew the names zero wide; every name starts legibly."""
    analysis = json.loads(E256_BASE.read_text())
    console = Console(record=True, width=width)
    print_analysis(console, analysis)
    text = console.export_text()
    table = text[text.index("kernels by GPU time") :]
    table = table[: table.index("\n\n")] if "\n\n" in table else table
    assert "┃ kernel " in table
    rows = [line for line in table.splitlines() if re.match(r"│ \d+ +│", line)]
    assert rows
    for row in rows:
        name_cell = row.split("│")[2].strip()
        assert len(name_cell) >= 10, row
    assert all(len(line) <= width for line in text.splitlines())


def test_estimates_carry_the_digits_their_interval_resolves() -> None:
    """Issue 25: "TPOT 931.563 ms [642.627, 1183.688]" printed six digits of a ±29% estimate."""
    from bubblescope.report.cells import NBSP, fmt_estimate, fmt_range, interval_decimals

    assert fmt_estimate(931.563, 642.627, 1183.688, "ms") == f"930{NBSP}ms [640, 1180]"
    assert fmt_estimate(3.504, 3.498, 3.510, "ms") == f"3.504{NBSP}ms [3.498, 3.510]"
    assert fmt_estimate(0.288, 0.1, 0.45, signed=True) == "+0.29 [+0.10, +0.45]"
    assert fmt_estimate(-0.004, -0.2, 0.2) == "0.00 [-0.20, 0.20]"
    assert fmt_estimate(7.59) == "7.590" and fmt_estimate(None) == "—"
    assert fmt_range(642.627, 1183.688) == "640 – 1180"
    assert interval_decimals(1.0, 1.0) == 3 and interval_decimals(None, 2.0) == 3
