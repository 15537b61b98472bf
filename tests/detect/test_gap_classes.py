"""Each gap class and each blocking-read kind on a built trace with hand-worked numbers (see scenarios)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bubblescope.analysis import analyze_traces
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
    assert _classes(result) == {"sync": 26 * US, "host": 32 * US, "launch": 0, "dependency": 0, "outside": 0}
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
        26 * US,
        19 * US,
    )
    assert "on device" in read["hint"]
    top = result["gaps_top"][0]
    expected_top = ("sync", 26 * US, "app.py(12): step", 41 * US)
    assert (top["class"], top["dur_ns"], top["blame"], top["start_ns"]) == expected_top
    (step,) = result["steps"]
    got = (step["gpu_busy_ns"], step["idle_ns"], step["blocking_reads"], step["kernels"])
    assert got == (42 * US, 58 * US, 1, 2)


def test_host_regains_lead_then_gaps_are_plain_host(tmp_path: Path) -> None:
    result = _analyze(scenarios.regained_lead(), tmp_path)
    assert _classes(result) == {
        "sync": 26 * US,
        "host": 82 * US,
        "launch": 1 * US,
        "dependency": 0,
        "outside": 0,
    }
    host_gap = next(g for g in result["gaps_top"] if g["dur_ns"] == 27 * US)
    assert host_gap["class"] == "host" and host_gap["blame"].startswith("aten::add 14.0us")


def test_graph_replay_kernels_map_to_one_launch(tmp_path: Path) -> None:
    result = _analyze(scenarios.graph_replay(), tmp_path)
    (device,) = result["devices"]
    assert (device["graph_launches"], device["kernel_count"]) == (1, 3)
    assert _classes(result) == {"sync": 0, "host": 75 * US, "launch": 3 * US, "dependency": 0, "outside": 0}
    launch_gaps = [g for g in result["gaps_top"] if g["class"] == "launch"]
    assert all("CUDA graph" in g["blame"] for g in launch_gaps) and len(launch_gaps) == 2


def test_two_streams_dependency_and_hta_view(tmp_path: Path) -> None:
    result = _analyze(scenarios.two_streams(), tmp_path)
    assert _classes(result) == {
        "sync": 0,
        "host": 84 * US,
        "launch": 41 * US,
        "dependency": 3 * US,
        "outside": 0,
    }
    assert result["syncs"] == []  # cudaStreamWaitEvent blocks a stream, not the host
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


def test_gap_between_steps_is_outside(tmp_path: Path) -> None:
    result = _analyze(scenarios.outside_steps(), tmp_path)
    assert _classes(result) == {"sync": 0, "host": 45 * US, "launch": 0, "dependency": 0, "outside": 20 * US}
    assert [s["idle_by_class_ns"]["host"] for s in result["steps"]] == [15 * US, 30 * US]
    assert [s["gpu_busy_ns"] for s in result["steps"]] == [35 * US, 20 * US]


def test_nonzero_and_pageable_copy_reads(tmp_path: Path) -> None:
    result = _analyze(scenarios.copies_and_nonzero(), tmp_path)
    reads = {r["op"]: r for r in result["syncs"]}
    assert set(reads) == {"aten::nonzero", "aten::to"}
    assert (reads["aten::nonzero"]["kind"], reads["aten::nonzero"]["bubble_ns"]) == ("nonzero", 34 * US)
    assert (reads["aten::to"]["kind"], reads["aten::to"]["api"]) == ("copy", "cudaMemcpyAsync")
    assert reads["aten::to"]["inner_op"] == "aten::copy_"
    assert result["summary"]["blocking_reads_per_step"] == 2.0


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
