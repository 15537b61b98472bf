"""The rich summaries render the key numbers (terminal output is what a user reads)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from bubblescope.gate import run_gate
from bubblescope.report.cells import fmt_change, fmt_percent
from bubblescope.report.escape import md_text
from bubblescope.report.gate_markdown import gate_change_text, render_gate_markdown
from bubblescope.report.run_console import print_gate_table, print_run_summary

GATE = Path(__file__).parent / "data" / "gate"


def _console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=True, width=200, color_system=None), buffer


def test_run_summary_shows_tpot_reads_sites_and_notices() -> None:
    record = json.loads((GATE / "sync_regression.json").read_text())
    record["floor"] = {
        "bytes_per_token": 2_000_000,
        "bandwidth_gbps": 4140.0,
        "bandwidth_source": "measured",
        "floor_ms": 0.5,
        "tpot_over_floor": 2.0,
    }
    console, buffer = _console()
    print_run_summary(console, record, "out/dir", ["a [bold]notice[/] with markup"])
    text = buffer.getvalue()
    # Sub-millisecond TPOT in µs, with the two-level interval's label.
    assert "TPOT 999.6\u00a0µs (95% CI, two-level bootstrap" in text
    assert "blocking reads / step: 2.00" in text and "sampler.py(41): sample" in text
    assert "TPOT ÷ floor 2.00×" in text
    assert "a [bold]notice[/] with markup" in text, "trace-derived strings are escaped, not interpreted"


def test_gate_table_lists_new_sites() -> None:
    console, buffer = _console()
    print_gate_table(console, run_gate(str(GATE / "baseline.json"), str(GATE / "sync_regression.json")))
    text = buffer.getvalue()
    assert "gate: fail" in text and "sampler.py(41): sample [aten::nonzero]" in text


def test_run_summary_has_no_floor_from_an_assumed_bandwidth_on_cpu() -> None:
    record = json.loads((GATE / "sync_regression.json").read_text())
    record["environment"]["device"] = "cpu"
    record["floor"] = {
        "bytes_per_token": 2_000_000,
        "bandwidth_gbps": 4140.0,
        "bandwidth_source": "assumed (H200 copy ceiling)",
        "floor_ms": 0.000483,
        "tpot_over_floor": 258279.0,
    }
    console, buffer = _console()
    print_run_summary(console, record, "out/dir", [])
    text = buffer.getvalue()
    assert "floor: not measured on CPU" in text and "258" not in text


def test_gate_table_reports_an_improvement() -> None:
    console, buffer = _console()
    # The regression fixture as the baseline: going back to the fast run is an improvement, said as one.
    verdict = run_gate(str(GATE / "tpot_regression.json"), str(GATE / "baseline.json"))
    print_gate_table(console, verdict)
    tpot = next(c for c in verdict["checks"] if c["name"] == "tpot")
    text = buffer.getvalue()
    assert verdict["verdict"] == "pass" and tpot["change"] == "improvement"
    assert "improved" in text and "faster" in text
    # The shared number format (cells.fmt_change): a typographic minus, digits to the interval's resolution.
    change = fmt_change(tpot["ratio"])
    assert change.startswith("−") and "%" in change and change in " ".join(text.split()), text


def test_gate_console_and_markdown_write_the_change_alike() -> None:
    verdict = run_gate(str(GATE / "baseline.json"), str(GATE / "tpot_regression.json"))
    tpot = next(c for c in verdict["checks"] if c["name"] == "tpot")
    console, buffer = _console()
    print_gate_table(console, verdict)
    shown = gate_change_text(tpot)
    assert shown.startswith(fmt_change(tpot["ratio"])) and "limit +3.0%" in shown, shown
    assert shown in " ".join(buffer.getvalue().split())
    assert md_text(shown) in render_gate_markdown(verdict)


def test_change_and_percent_formats() -> None:
    # ±1.5 points of interval: one decimal; ±45: tens' resolution, like every other estimate.
    assert fmt_change({"est": 1.0123, "lo": 0.9971, "hi": 1.0262}) == "+1.2% [−0.3, +2.6]"
    assert fmt_change({"est": 1.5, "lo": 0.7, "hi": 2.4}) == "+50% [−30, +140]"
    assert fmt_change({"est": 0.9, "lo": None, "hi": None}) == "−10.0%"
    assert fmt_change(None) == "—"
    assert fmt_percent(0.03, signed=True) == "+3.0%" and fmt_percent(0.125) == "12.5%"
