"""The fix-first list, the per-kernel table and figure data bounds (issue 16 §3, §4; issue 18 §2, §10)."""

from __future__ import annotations

import json
from pathlib import Path

from bubblescope.analysis.traces import analyze_traces
from bubblescope.report.escape import PLOT_CHARS_SHOWN, plot_text
from bubblescope.report.figures import timeline_figure
from bubblescope.report.findings import fix_first, is_tool_site
from bubblescope.report.html import render_trace_html
from tests.trace import scenarios

US = 1000


def _steps(sync_ns: list[int], launch_ns: list[int]) -> list[dict]:
    return [
        {"idle_by_class_ns": {"sync": s, "host": 0, "launch": la, "dependency": 0}}
        for s, la in zip(sync_ns, launch_ns, strict=True)
    ]


def test_warm_up_step_never_dominates_and_tool_sync_is_not_listed() -> None:
    # Step 0 is a warm-up: its 5 ms sync bubble is most of the read's total bubble.
    analysis = {
        "gpu_measured": True,
        "steps": _steps([5_000_000, 20_000, 20_000, 20_000], [0, 50_000, 50_000, 50_000]),
        # The analysis' typical-step means (step 0, the warm-up, left out).
        "summary": {
            "steps": 4,
            "outlier_steps": 1,
            "gpu_busy_ns_per_step": 1_000_000,
            "idle_by_class_ns_per_step": {"sync": 20_000, "host": 0, "launch": 50_000, "dependency": 0},
        },
        "syncs": [
            {
                "site": "profiled.py(97): profile_window",
                "op": "cudaDeviceSynchronize",
                "count": 1,
                "per_step": 0.25,
                "bubble_ns": 9_000_000,
                "hint": "tool",
            },
            {
                "site": "app.py(12): step",
                "op": "aten::item",
                "count": 4,
                "per_step": 1.0,
                "bubble_ns": 5_060_000,
                "hint": "keep it on device",
            },
        ],
        "gaps_top": [{"class": "launch", "dur_ns": 50_000, "blame": "kernel-to-kernel latency"}],
    }
    findings = fix_first(analysis)
    # Launch idle: 50 µs per typical step. The read: 1.265 ms per read on average, bounded by the typical
    # steps' whole sync idle, 20 µs. The tool's own synchronize is absent.
    assert [(f["kind"], f["saving_ns_per_token"]) for f in findings] == [
        ("launch idle", 50_000),
        ("blocking read", 20_000),
    ]
    assert findings[1]["site"] == "app.py(12): step" and findings[0]["rank"] == 1
    assert is_tool_site("profiled.py(97): profile_window") and not is_tool_site("app.py(12): step")
    # Two tokens per step (speculative decoding): savings per token halve.
    assert fix_first(analysis, tokens_per_step=2.0)[0]["saving_ns_per_token"] == 25_000


def test_cpu_reads_are_listed_without_a_saving() -> None:
    analysis = {
        "gpu_measured": False,
        "syncs": [{"site": "app.py(3): f", "op": "aten::item", "count": 2, "per_step": 1, "bubble_ns": 0}],
    }
    (finding,) = fix_first(analysis)
    assert finding["saving_ns_per_token"] is None and finding["site"] == "app.py(3): f"


def test_kernel_table_matches_the_raw_events(tmp_path: Path) -> None:
    path = scenarios.item_sync().write(tmp_path / "trace.json")
    events = json.loads(path.read_text())["traceEvents"]
    durations_ns = {e["name"]: e["dur"] * US for e in events if e.get("cat") == "kernel"}
    kernels = {k["name"]: k for k in analyze_traces([path])["kernels"]}
    assert set(kernels) == set(durations_ns) == {"kA", "kC"}
    total_ns = sum(durations_ns.values())
    for name, dur_ns in durations_ns.items():
        row = kernels[name]
        assert row["count"] == 1 and row["count_per_step"] == 1
        assert row["total_ns"] == row["max_ns"] == row["ns_per_step"] == dur_ns
        assert abs(row["share"] - dur_ns / total_ns) < 1e-6


def _timeline_with_reads(n_reads: int, name: str = "aten::item") -> dict:
    return {
        "start_ns": 0,
        "dur_ns": n_reads * 10 * US,
        "lanes": [{"lane": "host", "kind": "host"}, {"lane": "GPU 0", "kind": "gpu"}],
        "slices": [{"lane": "GPU 0", "cat": "kernel", "name": name, "start_ns": 0, "dur_ns": US}],
        "gaps": [],
        "syncs": [
            {"op": name, "site": "app.py(1): f", "start_ns": i * 10 * US, "dur_ns": US}
            for i in range(n_reads)
        ],
    }


def test_read_marks_are_one_trace_not_a_shape_per_read() -> None:
    small, large = timeline_figure(_timeline_with_reads(3)), timeline_figure(_timeline_with_reads(1000))
    assert len(large.layout.shapes) == 0
    # The figure's structure does not grow with the number of reads; only the data arrays do.
    assert len(large.data) == len(small.data)
    marks = [t for t in large.data if getattr(t, "mode", None) == "lines"]
    assert len(marks) == 1 and len(marks[0].x) == 3 * 1000


def test_plot_text_keeps_quotes_and_cuts_long_names() -> None:
    assert plot_text('say "hi" & <b>') == 'say "hi" &amp; &lt;b&gt;'
    assert len(plot_text("k" * 1_000_000)) == PLOT_CHARS_SHOWN


def test_a_huge_kernel_name_is_whole_in_the_table_and_cut_in_figures(tmp_path: Path) -> None:
    def page_for(name: str) -> str:
        doc = scenarios.item_sync().trace()
        for event in doc["traceEvents"]:
            if event.get("cat") == "kernel" and event["name"] == "kA":
                event["name"] = name
        path = tmp_path / f"t{len(name)}.json"
        path.write_text(json.dumps(doc))
        return render_trace_html(analyze_traces([path]))

    huge = "k" * 1_000_000
    small_page, huge_page = page_for("kA"), page_for(huge)
    # Shown whole once (the kernel table), cut everywhere else: the page grows by ~1 MB, not 90 MB.
    assert huge in huge_page
    assert len(huge_page) - len(small_page) < 1_200_000


def test_timeline_is_aligned_to_the_gpu_interval_with_depth_lanes(tmp_path: Path) -> None:
    # run_ahead's drawn step: host window 30-60 µs, GPU interval 57-98 µs (from its raw events).
    timeline = analyze_traces([scenarios.run_ahead().write(tmp_path / "ra.json")])["timeline"]
    fig = timeline_figure(timeline)
    assert list(fig.layout.xaxis.range) == [0, 41.0]
    assert "host window starts 27.0\u00a0µs earlier" in fig.layout.xaxis.title.text
    # item_sync: `.item()`'s frame is nested in the step's frame: drawn on its own depth lane.
    nested = timeline_figure(analyze_traces([scenarios.item_sync().write(tmp_path / "is.json")])["timeline"])
    lanes = list(nested.layout.yaxis.categoryarray)
    assert lanes.index("host · depth 1") == lanes.index("host") + 1


def _slice(lane: str, start_ns: int, dur_ns: int, name: str = "k", cat: str = "kernel") -> dict:
    return {"lane": lane, "cat": cat, "name": name, "start_ns": start_ns, "dur_ns": dur_ns}


def test_timeline_axis_in_ms_labels_on_large_slices_and_no_lane_without_a_slice_in_view() -> None:
    """Issue 25: an axis to "1,000,000 µs", unlabelled bars, empty host-depth lanes."""
    cutlass = "void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_bf16_128x64_64x6_tn_align8>(x::Params)"
    timeline = {
        "start_ns": 0,
        "dur_ns": 1_200_000_000,
        "gpu_start_ns": 100_000_000,
        "gpu_dur_ns": 1_000_000_000,
        "host_start_ns": 0,
        "lanes": [{"lane": "host", "kind": "host"}, {"lane": "GPU 0 stream 7", "kind": "gpu"}],
        "slices": [
            _slice("GPU 0 stream 7", 200_000_000, 500_000_000, cutlass),
            _slice("GPU 0 stream 7", 800_000_000, 1_000_000, "tiny_kernel"),
            _slice("host", 150_000_000, 600_000_000, "aten::mm", "cpu_op"),
            # Nested only before the GPU interval: its depth lane would be an empty band.
            _slice("host", 0, 50_000_000, "outer", "cpu_op"),
            _slice("host", 10_000_000, 10_000_000, "inner", "cpu_op"),
        ],
        "gaps": [{"lane": "GPU 0 stream 7", "class": "host", "start_ns": 700_000_000, "dur_ns": 100_000_000}],
        "syncs": [],
        "step": 0,
        "rank": 0,
    }
    fig = timeline_figure(timeline)
    assert fig.layout.xaxis.title.text.startswith("ms from the start")
    assert list(fig.layout.xaxis.range) == [0, 1000.0]
    kernels = next(t for t in fig.data if t.name == "kernel")
    assert list(kernels.base) == [100.0, 700.0] and list(kernels.x) == [500.0, 1.0]
    # The large kernel carries its short name; the 0.1% one does not.
    assert list(kernels.text) == ["cutlass_80_tensorop_s16816gemm_bf16_128x64_64x6_tn_align8", ""]
    assert list(fig.layout.yaxis.categoryarray) == ["host", "GPU 0 stream 7"]
    gap = next(t for t in fig.data if t.name == "gap: host")
    assert gap.marker.color != next(t for t in fig.data if t.name == "kernel").marker.color
