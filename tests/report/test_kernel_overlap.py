"""The kernel-overlap line under every kernel table (report/kernel_overlap.py), on real H200 traces.

Under PDL a kernel is launched early and waits for its predecessor, so its traced duration includes the
wait and the kernel table's times add up to more than the GPU was busy. Expected numbers are computed
here from the raw trace events: a kernel belongs to the step whose `bubblescope.step` host range holds
the runtime call that launched it (its `correlation`; a graph's kernels share the graph launch's); a
step's kernel time is the sum of its kernels' durations, its busy time the union of their intervals.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from bubblescope.analysis.traces import analyze_traces
from bubblescope.report.analysis_console import print_analysis
from bubblescope.report.analysis_markdown import render_analysis_markdown
from bubblescope.report.html_blocks import kernels_html
from bubblescope.report.html_page import Page
from bubblescope.report.kernel_overlap import OVERLAP_MARGIN, kernel_overlap_note, kernel_time_and_busy_ns
from bubblescope.report.markdown import kernels_md

SAMPLES = Path(__file__).resolve().parents[2] / "reports/samples"
# ling3-flash-e256 with pdl (and CUDA graphs) among its switches (the record's workload.describe.switches).
PDL_RUN = SAMPLES / "ablation-issue17-round2-e256-h200/runs/base"
# The same model with every switch off: one stream, no PDL.
ALL_OFF_RUN = SAMPLES / "ablation-ling3-flash-e256-h200/runs/base"
NOTE_START = "Kernels overlap (PDL or concurrent streams)"


def raw_steps(run: Path) -> list[tuple[float, float]]:
    """(summed kernel durations ns, union of kernel intervals ns) of each profiled step.

    Every step is typical in both runs (none is over 1.25 x the median GPU step once a replay queued
    before the trace began is charged to no step), so the summary's per-step means are over all four.
    """
    events = json.loads(gzip.decompress(run.with_suffix(".trace.json.gz").read_bytes()))["traceEvents"]
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "user_annotation" and e.get("name") == "bubblescope.step"
    )
    launched_at = {
        e["args"]["correlation"]: e["ts"]
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    kernels = [e for e in events if e.get("cat") == "kernel"]
    per_step: list[list[tuple[float, float]]] = [[] for _ in steps]
    for kernel in kernels:
        at = launched_at.get(kernel["args"].get("correlation"))
        step = next((i for i, (start, end) in enumerate(steps) if at is not None and start <= at < end), -1)
        if step >= 0:
            per_step[step].append((kernel["ts"], kernel["ts"] + kernel["dur"]))
    out = []
    for intervals in per_step:
        union_us, covered_to = 0.0, float("-inf")
        for start, end in sorted(intervals):
            union_us += max(end - max(start, covered_to), 0.0)
            covered_to = max(covered_to, end)
        out.append((sum(end - start for start, end in intervals) * 1e3, union_us * 1e3))
    return out


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


@pytest.fixture(scope="module")
def analyses() -> dict[str, dict]:
    if not PDL_RUN.with_suffix(".trace.json.gz").exists():
        pytest.skip("the committed H200 samples are not in this checkout")
    return {
        run.parent.parent.name: analyze_traces([run.with_suffix(".trace.json.gz")])
        for run in (PDL_RUN, ALL_OFF_RUN)
    }


def test_pdl_run_kernel_time_and_busy_match_the_raw_events(analyses) -> None:
    steps = raw_steps(PDL_RUN)
    kernel_ns, union_ns = mean([s[0] for s in steps]), mean([s[1] for s in steps])
    # The trace really overlaps: every step's kernels add up to far more than the time they cover.
    assert all(summed > (1 + OVERLAP_MARGIN) * union for summed, union in steps), steps
    analysis = analyses[PDL_RUN.parent.parent.name]
    # Times are µs with ns decimals in the JSON: a few ns of rounding per kernel at most.
    assert [s["kernel_ns"] for s in analysis["steps"]] == pytest.approx([s[0] for s in steps], abs=1000)
    summary = analysis["summary"]
    assert summary["kernel_time_ns_per_step"] == pytest.approx(kernel_ns, abs=2000)
    # GPU busy also holds the step's copies and is measured over its GPU interval: within 1 %.
    assert summary["gpu_busy_ns_per_step"] == pytest.approx(union_ns, rel=0.01)
    note = kernel_overlap_note(analyses[PDL_RUN.parent.parent.name])
    assert note is not None and note.startswith(NOTE_START)
    shown = re.search(r"add up to ([\d.]+)\xa0ms per step against ([\d.]+)\xa0ms of GPU busy;", note)
    assert shown is not None, note
    # Two decimals of ms: the raw figures within half a hundredth (plus the rounding above).
    assert float(shown[1]) == pytest.approx(kernel_ns / 1e6, abs=0.0051)
    assert float(shown[2]) == pytest.approx(union_ns / 1e6, abs=0.0051 + 0.01 * union_ns / 1e6)
    assert "share is of the summed kernel time" in note
    # No bandwidth block here: no breakdown below to point at.
    assert "breakdown" not in note


def test_all_off_run_has_no_note(analyses) -> None:
    steps = raw_steps(ALL_OFF_RUN)
    # One stream, no PDL: the kernels never overlap.
    assert all(summed == pytest.approx(union, abs=1) for summed, union in steps)
    analysis = analyses[ALL_OFF_RUN.parent.parent.name]
    assert analysis["summary"]["kernel_time_ns_per_step"] == pytest.approx(
        mean([s[0] for s in steps]), abs=2000
    )
    assert kernel_overlap_note(analysis) is None
    assert NOTE_START not in render_analysis_markdown(analysis)


def test_every_kernel_table_says_so_under_its_heading(analyses) -> None:
    analysis = analyses[PDL_RUN.parent.parent.name]
    note = kernel_overlap_note(analysis)
    markdown = render_analysis_markdown(analysis).splitlines()
    heading = next(i for i, line in enumerate(markdown) if line.startswith("### Kernels by GPU time"))
    assert markdown[heading + 2] == f"_{note}_"
    run_md = kernels_md(analysis)
    assert run_md[0].startswith("### Kernels by GPU time") and run_md[1] == f"_{note}_"
    page = Page("run")
    kernels_html(page, analysis)
    html = page.render()
    assert html.index("Kernels by GPU time") < html.index(NOTE_START) < html.index("<table")
    console = Console(width=100, record=True, color_system=None)
    print_analysis(console, analysis)
    text = console.export_text()
    lines = text.splitlines()
    heading = next(i for i, line in enumerate(lines) if "kernels by GPU time" in line)
    assert lines[heading + 1].startswith(NOTE_START)


def test_an_older_analysis_compares_over_all_its_steps() -> None:
    """Analyses written before `kernel_time_ns_per_step`: kernels[] total time and steps[] busy, all steps."""
    if not PDL_RUN.with_suffix(".analysis.json").exists():
        pytest.skip("the committed H200 samples are not in this checkout")
    older = json.loads(PDL_RUN.with_suffix(".analysis.json").read_text())
    # As written before the field existed (the committed samples have since been re-analysed).
    older["summary"].pop("kernel_time_ns_per_step", None)
    for step in older.get("steps", []):
        step.pop("kernel_ns", None)
    note = kernel_overlap_note(older)
    assert note is not None and "both over all 4 profiled steps" in note
    all_off = json.loads(ALL_OFF_RUN.with_suffix(".analysis.json").read_text())
    assert kernel_overlap_note(all_off) is None


def test_breakdown_named_only_with_a_bandwidth_block(analyses) -> None:
    analysis = dict(analyses[PDL_RUN.parent.parent.name])
    analysis["bandwidth"] = {"families": [{"family": "gemv", "ns_per_step": 1000.0, "bytes_per_step": 1e6}]}
    note = kernel_overlap_note(analysis)
    assert note is not None and note.endswith("The breakdown against the floor below charges each once.")


def test_not_measured_gives_no_note() -> None:
    assert kernel_overlap_note({"gpu_measured": False, "summary": {"kernel_time_ns_per_step": None}}) is None
    assert (
        kernel_overlap_note({"summary": {"kernel_time_ns_per_step": None, "gpu_busy_ns_per_step": 5}}) is None
    )
    assert kernel_overlap_note(None) is None


# Real public traces (tests/data/real/manifest.json): summed kernel durations over the union of every GPU
# op, whole trace, from the raw events (0.1 µs rounding). Two with overlapping kernels (NCCL beside
# compute on A100; DDP on MI300X) and one without (vLLM V1 serving on an H100).
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
REAL_OVERLAP = {
    "hta_a100_sampled_rank0.json.gz": True,
    "tl_resnet_ckpt_ddp_mi300x.json.gz": True,
    "tm_vllm_h100.json.gz": False,
}


def _raw_kernel_sum_over_busy(path: Path) -> float:
    events = json.loads(gzip.decompress(path.read_bytes()))
    events = events["traceEvents"] if isinstance(events, dict) else events
    gpu = [e for e in events if e.get("ph") == "X" and str(e.get("cat", "")).lower() in GPU_CATS]
    kernel_sum = sum(float(e["dur"]) for e in gpu if str(e["cat"]).lower() == "kernel")
    busy, covered_to = 0.0, float("-inf")
    for start, end in sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in gpu):
        if end > covered_to:
            busy += end - max(start, covered_to)
            covered_to = end
    return kernel_sum / busy


@pytest.mark.parametrize("name", sorted(REAL_OVERLAP))
def test_real_traces_get_the_note_where_their_raw_kernels_overlap(shared_dir, name: str) -> None:
    path = shared_dir / "data" / "real_traces" / name
    raw_ratio = _raw_kernel_sum_over_busy(path)
    assert (raw_ratio > 1 + OVERLAP_MARGIN) == REAL_OVERLAP[name]
    analysis = analyze_traces([path])
    kernel_ns, busy_ns, _ = kernel_time_and_busy_ns(analysis)
    # Over the typical steps rather than the whole trace: the same ratio within a few percent.
    assert kernel_ns / busy_ns == pytest.approx(raw_ratio, abs=0.03)
    assert (kernel_overlap_note(analysis) is not None) == REAL_OVERLAP[name]
