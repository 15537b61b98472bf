"""Not measured is null in JSON and "not measured" on every surface, never 0.0 beside it (issue 23 §4)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

from rich.console import Console

from bubblescope.ablate.removed_idle import removed_idle
from bubblescope.analysis.not_measured import null_unmeasured_analysis, null_unmeasured_record
from bubblescope.analysis.readbacks import count_readbacks
from bubblescope.report.ablation_cells import removed_idle_text
from bubblescope.report.analysis_console import print_analysis
from bubblescope.report.analysis_markdown import render_analysis_markdown
from bubblescope.report.html import render_trace_html
from bubblescope.report.markdown import render_inputs_markdown, trace_markdown
from tests.report.test_cpu_trace_reads import _cpu_trace

# A GPU time printed as measured zero: what a CPU report must never show.
_ZERO_TIME = re.compile(r"\b0\.0\s?µs|\b0\s?ns\b")


def _surfaces(analysis: dict) -> dict[str, str]:
    console = Console(record=True, width=200)
    print_analysis(console, analysis)
    return {
        "console": console.export_text(),
        "analyze markdown": render_analysis_markdown(analysis),
        "report markdown": trace_markdown(analysis),
        "html": re.sub(r"<script\b.*?</script>", "", render_trace_html(analysis), flags=re.S),
    }


def test_cpu_analysis_json_holds_null_not_zero(tmp_path: Path) -> None:
    from bubblescope.analysis.traces import analyze_traces

    analysis = analyze_traces([str(_cpu_trace(tmp_path / "cpu.json"))])
    summary = analysis["summary"]
    assert analysis["gpu_measured"] is False
    assert summary["gpu_busy_ns_per_step"] is None and summary["idle_ns_per_step"] is None
    assert set(summary["idle_by_class_ns_per_step"].values()) == {None}
    assert all(step["gpu_busy_ns"] is None for step in analysis["steps"])
    assert summary["steps"] == 2, "what a CPU trace does measure stays"
    # Round-trips as JSON null.
    assert '"gpu_busy_ns_per_step": null' in json.dumps(summary)
    for name, text in _surfaces(analysis).items():
        assert not _ZERO_TIME.search(text), f"{name}: {_ZERO_TIME.search(text)}"


def test_documents_written_with_zeros_read_as_not_measured(tmp_path: Path) -> None:
    """Analyses and records from before this change hold 0 beside gpu_measured false."""
    from bubblescope.analysis.traces import analyze_traces

    analysis = analyze_traces([str(_cpu_trace(tmp_path / "cpu.json"))])
    legacy = copy.deepcopy(analysis)
    legacy["summary"].update(gpu_busy_ns_per_step=0, idle_ns_per_step=0)
    legacy["summary"]["idle_by_class_ns_per_step"] = {"sync": 0, "host": 0, "launch": 0, "dependency": 0}
    upgraded = null_unmeasured_analysis(legacy)
    assert upgraded["summary"]["gpu_busy_ns_per_step"] is None
    assert legacy["summary"]["gpu_busy_ns_per_step"] == 0, "the reader's copy changes, not the input"
    text = trace_markdown(legacy)
    assert "GPU busy/step | not measured" in text and not _ZERO_TIME.search(text)
    record = {"analysis": {"gpu_measured": False, "gpu_busy_ns_per_step": 0, "syncs": [{"blocked_ns": 0}]}}
    assert null_unmeasured_record(record)["analysis"]["syncs"][0]["blocked_ns"] is None


def test_counted_cpu_reads_have_null_times(tmp_path: Path) -> None:
    syncs = count_readbacks(_cpu_trace(tmp_path / "cpu.json"))["syncs"]
    assert syncs and all(s["blocked_ns"] is None and s["bubble_ns"] is None for s in syncs)


def test_cpu_ablation_says_idle_removed_is_not_measured() -> None:
    cpu = {"analysis": {"gpu_measured": False}, "switches": {"enabled": []}}
    block = removed_idle(cpu, cpu, {"est": 1.0, "lo": 0.5, "hi": 1.5})
    assert block["by_class_us"] is None and block["measured"] is False
    assert removed_idle_text({"removed_idle_per_step": block}) == "not measured"


def test_cpu_run_report_never_prints_zero_gpu_time(tmp_path: Path) -> None:
    from bubblescope.report.load_inputs import load_inputs

    trace = _cpu_trace(tmp_path / "cpu.json")
    text = render_inputs_markdown(load_inputs([trace]))
    assert "not measured" in text and not _ZERO_TIME.search(text)
