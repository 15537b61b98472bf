"""The rich summaries render the key numbers (terminal output is what a user reads)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from bubblescope.gate import run_gate
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
    assert f"TPOT {record['summary']['tpot_ms']:.4f} ms" in text
    assert "blocking reads / step: 2.00" in text and "sampler.py(41): sample" in text
    assert "TPOT ÷ floor 2.0×" in text
    assert "a [bold]notice[/] with markup" in text, "trace-derived strings are escaped, not interpreted"


def test_gate_table_lists_new_sites() -> None:
    console, buffer = _console()
    print_gate_table(console, run_gate(str(GATE / "baseline.json"), str(GATE / "sync_regression.json")))
    text = buffer.getvalue()
    assert "gate: fail" in text and "sampler.py(41): sample [aten::nonzero]" in text
