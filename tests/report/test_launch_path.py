"""Kernel launches and launch gap per step (kernel_bandwidth.launch_path), before and after, on real H200
traces: the committed ling3-flash-e256 ablation's all-off run and its all-on run (PDL, CUDA graph).

Expected values are counted here from the raw trace events: a kernel belongs to the step whose
`bubblescope.step` host range holds the runtime call that launched it (its `correlation`; a graph's
kernels share the graph launch's), and a step's launch gap is the time the device had no op running
before each of the step's ops (ops of the device in start order, against the latest end so far).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from bubblescope.analysis.traces import analyze_traces
from bubblescope.diff import compute_diff, side_from
from bubblescope.floor.kernel_bandwidth import attach_kernel_bandwidth
from bubblescope.report.ablation_rows import config_rows
from bubblescope.report.analysis_console import print_analysis
from bubblescope.report.analysis_markdown import render_analysis_markdown
from bubblescope.report.diff_render import render_diff_markdown
from bubblescope.report.html_blocks import kernels_html
from bubblescope.report.html_page import Page
from bubblescope.report.run_console import print_run_summary

RUNS = Path(__file__).resolve().parents[2] / "reports/samples/predicted-ling3-flash-e256-h200/runs"
ALL_ON = "bf16_gate+bf16_lm_head+fused_mla_glue+fused_moe+graph_metadata+no_readback+pdl"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def raw_per_step(key: str) -> tuple[list[int], list[float]]:
    """(kernel launches, launch gap ns) of each profiled step, read from the raw events.

    Every step is typical: the all-on run's first step, whose window opened while the device still ran
    a replay queued before the trace began (its kernels' correlation is below every runtime call in the
    trace), no longer has that replay in its GPU interval, so it is no longer over 1.25 x the median.
    """
    events = json.loads(gzip.decompress((RUNS / f"{key}.trace.json.gz").read_bytes()))["traceEvents"]
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

    def step_of(op: dict) -> int:
        at = launched_at.get(op["args"].get("correlation"))
        return next((i for i, (start, end) in enumerate(steps) if at is not None and start <= at < end), -1)

    ops = sorted((e for e in events if e.get("cat") in GPU_CATS), key=lambda e: e["ts"])
    launches, gaps = [0] * len(steps), [0.0] * len(steps)
    last_end = None
    for op in ops:
        step = step_of(op)
        if step >= 0:
            launches[step] += op["cat"] == "kernel"
            gaps[step] += max(op["ts"] - last_end, 0.0) * 1e3 if last_end is not None else 0.0
        last_end = op["ts"] + op["dur"] if last_end is None else max(last_end, op["ts"] + op["dur"])
    return launches, gaps


def analysed(key: str) -> tuple[dict, dict]:
    """(RunRecord, analysis with the bandwidth block from the record's own kernel_bytes rules)."""
    record = json.loads((RUNS / f"{key}.json").read_text())
    trace = RUNS / f"{key}.trace.json.gz"
    analysis = analyze_traces([trace])
    attach_kernel_bandwidth(analysis, trace, record["kernel_bytes"])
    return record, analysis


@pytest.fixture(scope="module")
def runs() -> dict[str, tuple[dict, dict]]:
    if not RUNS.exists():
        pytest.skip("the committed H200 sample is not in this checkout")
    return {key: analysed(key) for key in ("base", ALL_ON)}


@pytest.mark.parametrize("key", ["base", ALL_ON])
def test_launches_and_gap_per_step_match_the_raw_events(runs, key: str) -> None:
    path = runs[key][1]["bandwidth"]["launch_path"]
    launches, gaps = raw_per_step(key)
    # Four profiled steps, all typical (the all-on run's first too: see raw_per_step).
    assert path["steps"] == len(launches) == 4
    assert path["launches_by_step"] == launches
    # One step assignment (trace/steps.launch_steps_of) behind both: the summary's steps agree.
    assert [s["kernels"] for s in runs[key][1]["steps"]] == launches
    # Times are µs with ns decimals in the JSON: a few ns of rounding per op at most.
    assert path["launch_gap_ns_by_step"] == pytest.approx(gaps, abs=1000)
    assert path["launches_per_step"]["est"] == pytest.approx(float(np.median(launches)))
    gap = path["launch_gap_ns_per_step"]
    assert gap["est"] == pytest.approx(float(np.median(gaps)), abs=1000)
    assert gap["lo"] <= gap["est"] <= gap["hi"]


def test_every_surface_shows_launches_and_gap(runs) -> None:
    record, analysis = runs[ALL_ON]
    markdown = render_analysis_markdown(analysis)
    assert "kernel launches (a CUDA graph's kernels count each); launch gap" in markdown
    console = Console(width=100, record=True, color_system=None)
    print_analysis(console, analysis)
    text = " ".join(console.export_text().split())
    assert "kernel launches" in text and "launch gap" in text
    page = Page("run")
    kernels_html(page, analysis)
    assert "kernel launches (a CUDA graph&#x27;s kernels count each); launch gap" in page.render()
    # The RunRecord's analysis block carries them for `run`'s console and the ablation's configuration table.
    record["analysis"]["launch_path"] = analysis["bandwidth"]["launch_path"]
    console = Console(width=100, record=True, color_system=None)
    print_run_summary(console, record, "out", [])
    raw = f"{np.median(raw_per_step(ALL_ON)[0]):g}"
    assert f"{raw} [{raw}, {raw}] kernel launches" in " ".join(console.export_text().split())
    headers, rows = config_rows({"configs": [{"key": "k"}, {"key": "old"}]}, {"k": record, "old": {}})
    assert headers[-2:] == ["kernel launches / step", "launch gap / step"]
    assert rows[1][-2:] == ["not measured", "not measured"]
    assert rows[0][-2].startswith(f"{np.median(raw_per_step(ALL_ON)[0]):.0f}")


def test_diff_compares_them_before_and_after(runs) -> None:
    base, after = (side_from(key, "run", *runs[key]) for key in ("base", ALL_ON))
    diff = compute_diff(base, after, n_boot=500)
    launches = diff["launch_path"]["launches_per_step"]
    before_raw, after_raw = raw_per_step("base")[0], raw_per_step(ALL_ON)[0]
    assert launches["delta"]["est"] == pytest.approx(float(np.median(after_raw) - np.median(before_raw)))
    assert launches["delta"]["lo"] <= launches["delta"]["est"] <= launches["delta"]["hi"]
    gap = diff["launch_path"]["launch_gap_ns_per_step"]["delta"]
    expected = np.median(raw_per_step(ALL_ON)[1]) - np.median(raw_per_step("base")[1])
    assert gap["est"] == pytest.approx(float(expected), abs=2000)
    assert "kernel launches (median step)" in render_diff_markdown(diff)


def test_a_side_without_bytes_rules_is_not_compared(runs) -> None:
    base = side_from("base", "run", *runs["base"])
    plain = side_from("plain", "run", {}, {"steps": [], "summary": {}})
    diff = compute_diff(base, plain, n_boot=100)
    assert diff["launch_path"] is None
    assert any("launches and launch gap" in note for note in diff["notes"])
