"""Every rank's lanes in the one-step timeline at TP (issue 16 §4), on the committed real TP=2 H200 traces.

Expected values are read from the raw trace events here: each rank's kernels run on one (device, stream)
pair, and the drawn step's host window is that rank's third `bubblescope.step` user annotation.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import pytest

from bubblescope.report import figures
from bubblescope.report.html import render_trace_html
from bubblescope.report.rank_lanes import merge_rank_timelines, merged_timeline
from tests.report.helpers import chromium_path, load_in_chromium

TP_RUNS = Path(__file__).resolve().parents[2] / "reports/samples/ablation-ling3-flash-tp2-h200x2"
TRACES = [TP_RUNS / "runs/base.trace.json.gz", TP_RUNS / "rank1/runs/base.trace.json.gz"]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("bubblescope.analysis.traces") is None or not all(p.is_file() for p in TRACES),
    reason="needs bubblescope.analysis.traces and the committed TP=2 sample traces",
)


def _raw(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as handle:
        return json.load(handle)["traceEvents"]


def _raw_gpu_lanes(events: list[dict]) -> set[str]:
    return {
        f"GPU {e['args']['device']} stream {e['args']['stream']}"
        for e in events
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    }


def _raw_step_durs_us(events: list[dict]) -> list[float]:
    steps = [e for e in events if e.get("cat") == "user_annotation" and e.get("name") == "bubblescope.step"]
    return [float(e["dur"]) for e in sorted(steps, key=lambda e: float(e["ts"]))]


@pytest.fixture(scope="module")
def tp_analysis() -> dict:
    from bubblescope.analysis.traces import analyze_traces

    return analyze_traces([str(p) for p in TRACES], step_marker="bubblescope.step")


def test_analysis_has_one_timeline_per_rank_at_the_same_step(tp_analysis: dict) -> None:
    timelines = [tp_analysis["timeline"], *tp_analysis["rank_timelines"]]
    assert [t["rank"] for t in timelines] == [0, 1]
    assert timelines[0]["step"] == timelines[1]["step"]
    step = timelines[0]["step"]
    for timeline, path in zip(timelines, TRACES, strict=True):
        events = _raw(path)
        gpu_lanes = {lane["lane"] for lane in timeline["lanes"] if lane["kind"] == "gpu"}
        assert gpu_lanes == _raw_gpu_lanes(events)
        assert timeline["host_dur_ns"] == pytest.approx(_raw_step_durs_us(events)[step] * 1000, abs=1)
        assert {sl["lane"] for sl in timeline["slices"] if sl["cat"] == "kernel"} == gpu_lanes


def test_merged_timeline_has_every_ranks_lanes_aligned_on_rank0(tp_analysis: dict) -> None:
    timelines = [tp_analysis["timeline"], *tp_analysis["rank_timelines"]]
    merged = merged_timeline(tp_analysis)
    assert merged["ranks"] == [0, 1]
    lanes = [lane["lane"] for lane in merged["lanes"]]
    assert lanes == ["rank 0 · host", "rank 0 · GPU 0 stream 7", "rank 1 · host", "rank 1 · GPU 1 stream 7"]
    assert len(merged["slices"]) == sum(len(t["slices"]) for t in timelines)
    assert {s["lane"] for s in merged["syncs"]} == {"rank 0 · host", "rank 1 · host"}
    # Rank 1's first GPU slice of the step lands where its GPU interval starts: rank 0's interval start.
    rank1_gpu = [sl for sl in merged["slices"] if sl["lane"] == "rank 1 · GPU 1 stream 7"]
    first_shift = min(sl["start_ns"] for sl in rank1_gpu) - merged["gpu_start_ns"]
    own_shift = (
        min(sl["start_ns"] for sl in timelines[1]["slices"] if sl["lane"] == "GPU 1 stream 7")
        - timelines[1]["gpu_start_ns"]
    )
    assert first_shift == pytest.approx(own_shift)
    fig = figures.timeline_figure(merged)
    assert "ranks 0, 1" in fig.layout.title.text
    assert "rank 1 · GPU 1 stream 7" in list(fig.layout.yaxis.categoryarray)


def test_single_rank_and_damaged_timelines_fall_back_to_timeline(tp_analysis: dict) -> None:
    one = dict(tp_analysis, rank_timelines=[])
    assert merged_timeline(one) is tp_analysis["timeline"]
    for damaged in ("x", [1, "a"], [{"slices": 3}, {"slices": []}], None):
        assert merged_timeline(dict(tp_analysis, rank_timelines=damaged)) is tp_analysis["timeline"]
    # No rank 0 timeline to align on: nothing merged.
    assert merged_timeline(dict(tp_analysis, timeline=None)) is None
    bad = merge_rank_timelines([{"rank": 0, "slices": [{}], "lanes": "x", "gaps": 5}, {"rank": 1}])
    assert bad["ranks"] == [0, 1] and bad["lanes"] == [] and bad["gaps"] == []


@pytest.mark.skipif(chromium_path() is None, reason="chromium not installed (apt-get install chromium)")
def test_tp_trace_page_draws_every_ranks_lanes(tp_analysis: dict, tmp_path: Path) -> None:
    page = tmp_path / "tp.html"
    page.write_text(render_trace_html(tp_analysis))
    loaded = load_in_chromium(page)
    assert loaded.html_attr("data-js-errors") == "0", loaded.html_attr("data-js-first-error")
    for lane in ("rank 0 · GPU 0 stream 7", "rank 1 · GPU 1 stream 7", "rank 1 · host"):
        assert lane in loaded.dom
