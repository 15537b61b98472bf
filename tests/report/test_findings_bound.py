"""Every promised saving is bounded by the timed step (issue 23 §2): the property, the committed H200
sample, and hints that fit the context (a step that already replays as a CUDA graph)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bubblescope.analysis.timed_idle import bound_idle, timed_step_ns_of
from bubblescope.report.findings import fix_first, fix_first_caption

SAMPLE = (
    Path(__file__).resolve().parents[2] / "reports" / "samples" / "ablation-ling3-flash-e256-h200" / "runs"
)
CLASSES = ("sync", "host", "launch", "dependency")

ns = st.integers(min_value=0, max_value=20_000_000)


@st.composite
def analyses(draw) -> dict:
    """A generated analysis: per-step means, read sites, top gaps (graph launches or not), kernels."""
    idle = {c: draw(ns) for c in CLASSES}
    syncs = [
        {
            "site": f"app.py({i}): step",
            "op": "aten::item",
            "count": draw(st.integers(1, 50)),
            "per_step": draw(st.floats(0.0, 8.0)),
            "bubble_ns": draw(ns),
            "hint": "h",
        }
        for i in range(draw(st.integers(0, 4)))
    ]
    kernels = [
        {"name": f"k{i}", "bandwidth_fraction": draw(st.floats(0.0, 1.0)), "ns_per_step": draw(ns)}
        for i in range(draw(st.integers(0, 3)))
    ]
    return {
        "gpu_measured": True,
        "summary": {
            "steps": draw(st.integers(1, 64)),
            "outlier_steps": 0,
            "gpu_busy_ns_per_step": draw(ns),
            "idle_by_class_ns_per_step": idle,
            "profiler_ns_per_step": draw(ns),
        },
        "syncs": syncs,
        "kernels": kernels,
        "devices": [{"graph_launches": draw(st.integers(0, 100))}],
        "gaps_top": [
            {
                "class": "host",
                "dur_ns": 10,
                "blame": draw(st.sampled_from(["a.py(1): f 3.0us", "cudaGraphLaunch 9.0us"])),
            }
        ],
    }


@settings(max_examples=200, deadline=None)
@given(analyses(), st.one_of(st.none(), st.integers(1, 40_000_000)), st.floats(1.0, 8.0))
def test_savings_never_exceed_the_timed_idle(analysis: dict, timed_ns: int | None, tokens: float) -> None:
    findings = fix_first(analysis, tokens, limit=100, timed_step_ns=timed_ns)
    bound = bound_idle(analysis, timed_ns)
    idle = sum(f["saving_ns_per_token"] for f in findings if f["bound"] == "idle")
    busy = sum(f["saving_ns_per_token"] for f in findings if f["bound"] == "busy")
    # Σ idle findings <= the timed idle per token (timed: TPOT x tokens - busy; else the estimate).
    assert idle * tokens <= bound["timed_idle_ns"] + 1e-6
    if timed_ns is not None:
        assert bound["timed_idle_ns"] <= max(timed_ns - bound["gpu_busy_ns"], 0) + 1e-6
    assert busy * tokens <= bound["gpu_busy_ns"] + 1e-6
    for finding in findings:
        assert finding["estimate"] == (timed_ns is None)
        if finding["cut_from_ns_per_token"] is not None:
            assert finding["cut_from_ns_per_token"] > finding["saving_ns_per_token"]
    # The profiler's share plus what is left is the profiled idle, class by class never negative.
    assert all(v >= 0 for v in bound["idle_by_class_ns"].values())
    assert bound["profiler_ns"] + bound["timed_idle_ns"] == pytest.approx(bound["profiled_idle_ns"])


def test_bound_takes_the_profilers_share_from_host_first() -> None:
    """Busy 4 ms, profiled idle sync 0.2 + host 1.5 + launch 0.3 = 2 ms; timed step 4.5 ms: timed idle
    0.5 ms, so 1.5 ms is the profiler's, all of it from host (host 1.5 -> 0)."""
    analysis = {
        "summary": {
            "steps": 8,
            "outlier_steps": 1,
            "gpu_busy_ns_per_step": 4_000_000,
            "idle_by_class_ns_per_step": {
                "sync": 200_000,
                "host": 1_500_000,
                "launch": 300_000,
                "dependency": 0,
            },
        }
    }
    bound = bound_idle(analysis, 4_500_000)
    assert (bound["source"], bound["profiler_ns"], bound["timed_idle_ns"]) == ("timed", 1_500_000, 500_000)
    assert bound["idle_by_class_ns"] == {"sync": 200_000, "host": 0, "launch": 300_000, "dependency": 0}
    assert (bound["profiled_over_timed"], bound["typical_steps"]) == (round(6 / 4.5, 3), 7)
    # A timed step of 4.1 ms leaves 0.1 ms: host gives all 1.5, the other 0.4 shrinks by 3/4 of 0.5.
    tight = bound_idle(analysis, 4_100_000)["idle_by_class_ns"]
    assert (
        tight["host"] == 0
        and tight["sync"] == pytest.approx(40_000)
        and tight["launch"] == pytest.approx(60_000)
    )
    # No timed step: the per-call estimate (here 0.6 ms) comes out of host, marked an estimate.
    analysis["summary"]["profiler_ns_per_step"] = 600_000
    model = bound_idle(analysis)
    assert (model["source"], model["estimate"], model["idle_by_class_ns"]["host"]) == ("model", True, 900_000)
    assert "estimate" in fix_first_caption(analysis)


def _sample() -> tuple[dict, dict]:
    record = json.loads((SAMPLE / "base.json").read_text())
    analysis = json.loads((SAMPLE / "base.analysis.json").read_text())
    return record, analysis


def test_committed_h200_sample_promises_at_most_the_timed_idle() -> None:
    """reports/samples/ablation-ling3-flash-e256-h200/runs/base.json: TPOT 5.158 ms, one token per step,
    GPU busy 4.77 ms per step, so at most ~0.39 ms per token (the list used to promise 2.19 ms)."""
    from bubblescope.report.run_rows import findings_analysis, tokens_per_step

    record, analysis = _sample()
    timed = timed_step_ns_of(record)
    assert timed == pytest.approx(5_158_416)
    findings = fix_first(findings_analysis(record, analysis), tokens_per_step(record))
    total = sum(f["saving_ns_per_token"] for f in findings if f["bound"] == "idle")
    assert total <= 5_158_416 - 4_770_784 + 1
    host = next(f for f in findings if f["kind"] == "host idle")
    assert host["cut_from_ns_per_token"] == pytest.approx(1_846_178)
    caption = fix_first_caption(findings_analysis(record, analysis))
    assert "1.35x the timed" in caption and "profiler's" in caption


def test_hints_fit_a_graph_replayed_step() -> None:
    """The sample replays its step as a CUDA graph (one graph launch per step) and its host gap is
    inside cudaGraphLaunch: no finding says "capture the step in a CUDA graph"; launch idle points at
    PDL / fusion; the read points at what runs outside the graph."""
    from bubblescope.report.run_rows import findings_analysis

    record, analysis = _sample()
    findings = {f["kind"]: f for f in fix_first(findings_analysis(record, analysis))}
    assert all("capture" not in f["hint"] for f in findings.values())
    assert "PDL" in findings["launch idle"]["hint"]
    assert "cudaGraphLaunch 914.5" in findings["host idle"]["hint"]
    assert "outside the graph" in findings["blocking read"]["hint"]


def test_eager_step_keeps_the_capture_hint() -> None:
    analysis = {
        "summary": {
            "steps": 4,
            "gpu_busy_ns_per_step": 1_000_000,
            "idle_by_class_ns_per_step": {"sync": 0, "host": 400_000, "launch": 100_000, "dependency": 0},
        },
        "devices": [{"graph_launches": 0}],
        "gaps_top": [{"class": "host", "dur_ns": 300_000, "blame": "app.py(3): prepare 250.0us"}],
    }
    findings = {f["kind"]: f for f in fix_first(analysis, timed_step_ns=1_500_000)}
    assert "capture" in findings["host idle"]["hint"] and "capture" in findings["launch idle"]["hint"]


def test_record_bound_from_the_record_block_alone() -> None:
    """What h23-ablate calls per configuration: the record's own analysis block and timed step."""
    from bubblescope.analysis.timed_idle import record_bound

    record, analysis = _sample()
    from_block, from_full = record_bound(record), record_bound(record, analysis)
    assert from_block["timed_idle_ns"] == pytest.approx(5_158_416 - 4_770_784)
    assert from_full["timed_idle_ns"] == pytest.approx(from_block["timed_idle_ns"])
    assert from_block["steps"] is None and from_full["steps"] == 4
