"""A CPU trace analysed directly: `bubblescope run` counts its readback ops (1 per step here), so the
analysis surfaces must not answer "0 blocking reads" for the same trace (README walk, issue 16)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from bubblescope.analysis.readbacks import count_readbacks
from bubblescope.report.analysis_console import print_analysis
from bubblescope.report.analysis_markdown import render_analysis_markdown
from bubblescope.report.html import render_trace_html

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("bubblescope.analysis.traces") is None,
    reason="needs bubblescope.analysis.traces",
)


def _cpu_trace(path: Path, steps: int = 2) -> Path:
    """What torch.profiler writes on CPU around `x.item()` in each step: no CUDA events at all."""
    events = []
    for step in range(steps):
        start = 1000.0 * step
        events += [
            {"ph": "X", "cat": "user_annotation", "name": "bubblescope.step", "pid": 1, "tid": 1,
             "ts": start, "dur": 900.0},
            {"ph": "X", "cat": "cpu_op", "name": "aten::item", "pid": 1, "tid": 1,
             "ts": start + 100, "dur": 20.0},
            {"ph": "X", "cat": "cpu_op", "name": "aten::_local_scalar_dense", "pid": 1, "tid": 1,
             "ts": start + 105, "dur": 10.0},
        ]  # fmt: skip
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_cpu_trace_reads_are_not_reported_as_zero(tmp_path: Path) -> None:
    from bubblescope.analysis.traces import analyze_traces

    trace = _cpu_trace(tmp_path / "cpu.json")
    assert count_readbacks(trace)["per_step"] == [1, 1]  # what `run` and `gate` count for it
    analysis = analyze_traces([str(trace)])
    assert analysis["gpu_measured"] is False and analysis["syncs"] == []
    console = Console(record=True, width=200)
    print_analysis(console, analysis)
    surfaces = {
        "console": console.export_text(),
        "markdown": render_analysis_markdown(analysis),
        "html": re.sub(r"<script\b.*?</script>", "", render_trace_html(analysis), flags=re.S),
    }
    for name, text in surfaces.items():
        assert "not detectable" in text, name
        assert not re.search(
            r"\b0(\.0+)? blocking reads|blocking reads/step</div><div class=\"value\">0<", text
        ), name
        assert "no host-blocking reads found" not in text and "no blocking reads and no idle" not in text, (
            name
        )
    assert "GPU busy per step: 0.0" not in surfaces["markdown"]
