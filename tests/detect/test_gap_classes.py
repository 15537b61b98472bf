"""Each gap class and each blocking-read kind on a built trace with hand-worked numbers (see scenarios)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bubblescope.analysis.traces import analyze_traces
from tests.trace import scenarios
from tests.trace.builder import US

DATA = Path(__file__).resolve().parents[1] / "data"


def _analyze(builder, tmp_path: Path) -> dict:
    return analyze_traces([builder.write(tmp_path / "trace.json.gz")])


def _classes(result: dict) -> dict[str, int]:
    (device,) = result["devices"]
    return device["idle_by_class_ns"]


def test_item_read_causes_sync_gap_blamed_on_its_line(tmp_path: Path) -> None:
    result = _analyze(scenarios.item_sync(), tmp_path)
    (device,) = result["devices"]
    assert (device["span_ns"], device["busy_ns"], device["idle_ns"]) == (100 * US, 42 * US, 58 * US)
    assert _classes(result) == {
        "sync": 21 * US,
        "host": 13 * US,
        "launch": 4 * US,
        "dependency": 0,
        "outside": 20 * US,
    }
    (read,) = result["syncs"]
    assert (read["site"], read["op"], read["kind"], read["api"]) == (
        "app.py(12): step",
        "aten::item",
        "item",
        "cudaStreamSynchronize",
    )
    assert (read["count"], read["per_step"], read["blocked_ns"], read["bubble_ns"], read["wait_ns"]) == (
        1,
        1.0,
        21 * US,
        21 * US,
        19 * US,
    )
    assert (read["lost_lead_ns"], read["drained"]) == (21 * US, 1)
    assert "on device" in read["hint"]
    top = result["gaps_top"][0]
    expected_top = ("sync", 21 * US, "app.py(12): step", 41 * US)
    assert (top["class"], top["dur_ns"], top["blame"], top["start_ns"]) == expected_top
    (step,) = result["steps"]
    got = (step["gpu_busy_ns"], step["idle_ns"], step["blocking_reads"], step["kernels"])
    assert got == (42 * US, 38 * US, 1, 2)
    assert (step["dur_ns"], step["gpu_start_ns"], step["gpu_dur_ns"]) == (100 * US, 0, 80 * US)


def test_host_regains_lead_then_gaps_are_plain_host(tmp_path: Path) -> None:
    result = _analyze(scenarios.regained_lead(), tmp_path)
    assert _classes(result) == {
        "sync": 15 * US,
        "host": 37 * US,
        "launch": 7 * US,
        "dependency": 0,
        "outside": 50 * US,
    }
    host_gap = next(g for g in result["gaps_top"] if g["dur_ns"] == 25 * US)
    assert host_gap["class"] == "host" and host_gap["blame"].startswith("aten::add 14.0us")


def test_graph_replay_kernels_map_to_one_launch(tmp_path: Path) -> None:
    result = _analyze(scenarios.graph_replay(), tmp_path)
    (device,) = result["devices"]
    assert (device["graph_launches"], device["kernel_count"]) == (1, 3)
    assert _classes(result) == {
        "sync": 0,
        "host": 40 * US,
        "launch": 8 * US,
        "dependency": 0,
        "outside": 30 * US,
    }
    launch_gaps = [g for g in result["gaps_top"] if g["class"] == "launch"]
    assert all("graph replay" in g["blame"] for g in launch_gaps) and len(launch_gaps) == 3


def test_two_streams_dependency_and_hta_view(tmp_path: Path) -> None:
    result = _analyze(scenarios.two_streams(), tmp_path)
    assert _classes(result) == {
        "sync": 0,
        "host": 15 * US,
        "launch": 45 * US,
        "dependency": 3 * US,
        "outside": 65 * US,
    }
    assert result["syncs"] == []  # cudaStreamWaitEvent blocks a stream, not the host
    (dependency,) = [g for g in result["gaps_top"] if g["class"] == "dependency"]
    assert dependency["blame"] == "stream 8 waited on an event (cudaStreamWaitEvent at 4.0us)"
    streams = {s["stream"]: s for s in result["devices"][0]["streams"]}
    keys = ("busy_ns", "idle_ns", "host_wait_ns", "kernel_wait_ns", "other_ns")
    assert {k: streams[7][k] for k in keys} == {
        "busy_ns": 65 * US,
        "idle_ns": 65 * US,
        "host_wait_ns": 24 * US,
        "kernel_wait_ns": 1 * US,
        "other_ns": 40 * US,
    }
    assert (streams[8]["busy_ns"], streams[8]["idle_ns"]) == (7 * US, 0)


def test_gap_between_steps_belongs_to_the_step_it_delays(tmp_path: Path) -> None:
    result = _analyze(scenarios.outside_steps(), tmp_path)
    assert _classes(result) == {
        "sync": 0,
        "host": 48 * US,
        "launch": 7 * US,
        "dependency": 0,
        "outside": 10 * US,
    }
    steps = result["steps"]
    assert [s["idle_by_class_ns"]["host"] for s in steps] == [3 * US, 45 * US]
    assert [s["idle_by_class_ns"]["launch"] for s in steps] == [2 * US, 5 * US]
    assert [s["gpu_busy_ns"] for s in steps] == [35 * US, 20 * US]
    assert [(s["gpu_start_ns"], s["gpu_dur_ns"]) for s in steps] == [(0, 40 * US), (40 * US, 70 * US)]
    assert [s["dur_ns"] for s in steps] == [50 * US, 50 * US]


def test_nonzero_and_pageable_copy_reads(tmp_path: Path) -> None:
    result = _analyze(scenarios.copies_and_nonzero(), tmp_path)
    reads = {r["op"]: r for r in result["syncs"]}
    assert set(reads) == {"aten::nonzero", "aten::to"}
    assert (reads["aten::nonzero"]["kind"], reads["aten::nonzero"]["bubble_ns"]) == ("nonzero", 11 * US)
    # The pageable copy began while the device was already idle: it lost no lead.
    assert (reads["aten::to"]["lost_lead_ns"], reads["aten::to"]["bubble_ns"]) == (0, 0)
    assert (reads["aten::to"]["kind"], reads["aten::to"]["api"]) == ("copy", "cudaMemcpyAsync")
    assert reads["aten::to"]["inner_op"] == "aten::copy_"
    assert result["summary"]["blocking_reads_per_step"] == 2.0


def test_event_polls_are_not_reads_but_event_synchronize_is(tmp_path: Path) -> None:
    result = _analyze(scenarios.event_polls(), tmp_path)
    (read,) = result["syncs"]
    assert (read["api"], read["kind"], read["op"], read["site"]) == (
        "cudaEventSynchronize",
        "event",
        "",
        "app.py(20): step",
    )
    assert (read["count"], read["blocked_ns"], read["wait_ns"], read["bubble_ns"]) == (
        1,
        16 * US,
        14 * US,
        15 * US,
    )
    (step,) = result["steps"]
    assert step["blocking_reads"] == 1
    assert _classes(result) == {
        "sync": 15 * US,
        "host": 5 * US,
        "launch": 7 * US,
        "dependency": 0,
        "outside": 40 * US,
    }
    assert result["devices"][0]["busy_ns"] == 33 * US


def test_run_ahead_steps_own_the_gpu_work_they_launched(tmp_path: Path) -> None:
    result = _analyze(scenarios.run_ahead(), tmp_path)
    (device,) = result["devices"]
    assert (device["span_ns"], device["busy_ns"]) == (139 * US, 114 * US)
    assert _classes(result) == {"sync": 0, "host": 15 * US, "launch": 10 * US, "dependency": 0, "outside": 0}
    steps = result["steps"]
    assert [s["dur_ns"] for s in steps] == [30 * US] * 3
    assert [s["gpu_start_ns"] for s in steps] == [0, 57 * US, 98 * US]
    assert [s["gpu_dur_ns"] for s in steps] == [57 * US, 41 * US, 41 * US]
    assert [s["idle_ns"] for s in steps] == [19 * US, 3 * US, 3 * US]
    assert [s["idle_by_class_ns"]["host"] for s in steps] == [15 * US, 0, 0]
    assert [s["gpu_busy_ns"] for s in steps] == [38 * US] * 3
    assert [(s["blocking_reads"], s["kernels"]) for s in steps] == [(0, 3)] * 3
    assert result["syncs"] == []  # the per-step readback polls never block
    summary = result["summary"]
    # Step 0's GPU interval (57 µs) is > 1.25x the median (41 µs): it also waited for the window's
    # first launch, so the per-step means leave it out (its 17 µs of host idle is not a per-step cost).
    assert summary["outlier_steps"] == 1
    assert summary["gpu_step_ns_per_step"] == 41 * US
    assert summary["gpu_step_ns_median"] == 41 * US
    assert summary["gpu_busy_ns_per_step"] == 38 * US
    assert summary["idle_by_class_ns_per_step"] == {"sync": 0, "host": 0, "launch": 3 * US, "dependency": 0}


def test_run_ahead_timeline_draws_the_steps_own_gpu_work(tmp_path: Path) -> None:
    timeline = _analyze(scenarios.run_ahead(), tmp_path)["timeline"]
    # All host windows last 30 µs: the median step is step 1 (host [30,60), GPU [57,98)).
    assert timeline["step"] == 1
    assert (timeline["host_start_ns"], timeline["host_dur_ns"]) == (30 * US, 30 * US)
    assert (timeline["gpu_start_ns"], timeline["gpu_dur_ns"]) == (57 * US, 41 * US)
    assert (timeline["start_ns"], timeline["dur_ns"]) == (30 * US, 68 * US)
    gpu_slices = sorted(
        (s["start_ns"], s["dur_ns"]) for s in timeline["slices"] if s["lane"].startswith("GPU")
    )
    # Step 1's replay, not step 0's kernels that run during step 1's host window.
    assert gpu_slices == [(58 * US, 20 * US), (79 * US, 12 * US), (92 * US, 6 * US)]
    host_names = {s["name"] for s in timeline["slices"] if s["lane"] == "host"}
    assert host_names == {"cudaGraphLaunch", "cudaEventQuery"}
    assert sorted((g["start_ns"], g["class"]) for g in timeline["gaps"]) == [
        (57 * US, "launch"),
        (78 * US, "launch"),
        (91 * US, "launch"),
    ]


def test_legacy_format_analyses_like_modern(tmp_path: Path) -> None:
    modern = _analyze(scenarios.quirks(legacy=False), tmp_path / "modern")
    legacy = _analyze(scenarios.quirks(legacy=True), tmp_path / "legacy")
    assert legacy["step_source"] == modern["step_source"] == "ProfilerStep"
    assert legacy["devices"] == modern["devices"]
    assert legacy["syncs"] == modern["syncs"]
    kinds = sorted(s["kind"] for s in legacy["syncs"])
    assert kinds == ["item", "synchronize"]


def test_graph_without_kernels_is_reported_implausible(tmp_path: Path) -> None:
    result = _analyze(scenarios.graph_without_kernels(), tmp_path)
    assert result["gpu_measured"] is False
    assert any("no GPU kernels" in w for w in result["warnings"])
    assert result["devices"] == []


def test_no_markers_falls_back_to_whole_trace_with_warning(tmp_path: Path) -> None:
    builder = scenarios.graph_replay()
    builder.events = [e for e in builder.events if e["cat"] != "user_annotation"]
    result = _analyze(builder, tmp_path)
    assert result["step_source"] == "whole-trace"
    assert any("no step markers" in w for w in result["warnings"])
    # The window is bounded by GPU activity and its launch: [5, 70) µs.
    assert result["steps"][0]["dur_ns"] == 65 * US


def test_step_marker_regex(tmp_path: Path) -> None:
    builder = scenarios.item_sync(step_name="decode_step_0")
    assert analyze_traces([builder.write(tmp_path / "t.json")])["step_source"] == "whole-trace"
    result = analyze_traces([tmp_path / "t.json"], step_marker="decode_step_.*")
    assert result["step_source"] == "regex:decode_step_.*"
    assert result["steps"][0]["blocking_reads"] == 1


@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_committed_scenario_files_match_builder(name: str) -> None:
    # tests/data/<scenario>/trace.json are for people and other tools; regenerate with
    # `python -m tests.trace.scenarios` after changing a scenario.
    committed = (DATA / name / "trace.json").read_text()
    assert committed == json.dumps(scenarios.SCENARIOS[name]().trace(), indent=None)
