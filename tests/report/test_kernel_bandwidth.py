"""Achieved bandwidth per kernel family (bubblescope/floor/kernel_bandwidth.py) on a real H200 trace.

The trace is the all-off run of the committed ling3-flash-e256 ablation (recorded on the lent H200):
no PDL there, so kernels of the one stream never overlap and each family's critical-path time must equal
the plain sum of its launches' durations, which the tests read from the raw JSON events.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from bubblescope.analysis.traces import analyze_traces
from bubblescope.capture.floor import kernel_bytes_block
from bubblescope.floor.kernel_bandwidth import (
    IDLE_FAMILY,
    OTHER_FAMILY,
    attach_kernel_bandwidth,
    critical_charges,
)
from bubblescope.report.analysis_console import print_analysis
from bubblescope.report.analysis_markdown import render_analysis_markdown

SAMPLE = Path(__file__).resolve().parents[2] / "reports/samples/ablation-ling3-flash-e256-h200/runs/base"
CEILING_GBPS = 4194.0
# What the fast path reads at this preset with every switch off (reference_model/kernel_bytes.py's
# rules, written out so this test does not need torch): family -> (name prefixes, grid x, bytes/step).
GEMV = ["gemv_kernel"]
RULES = [
    {"family": "GEMV KDA in_proj", "kernels": GEMV, "grid_x": 2564, "bytes_per_step": 3_675_750_400},
    {"family": "GEMV hidden rows", "kernels": GEMV, "grid_x": 640, "bytes_per_step": 943_718_400},
    {"family": "GEMV MLA in_proj", "kernels": GEMV, "grid_x": 844, "bytes_per_step": 241_991_680},
    {"family": "GEMV dense gate/up", "kernels": GEMV, "grid_x": 1536, "bytes_per_step": 125_829_120},
    {"family": "GEMV router gate", "kernels": GEMV, "grid_x": 256, "bytes_per_step": 104_857_600},
    {
        "family": "lm_head",
        "kernels": ["lm_head_partial_kernel"],
        "grid_x": None,
        "bytes_per_step": 1_609_564_160,
    },
    {
        "family": "experts",
        "kernels": ["gate_up_kernel", "down_kernel"],
        "grid_x": None,
        "bytes_per_step": 4_246_732_800,
    },
]


def test_critical_path_counts_an_early_started_kernel_once() -> None:
    # A [0, 10); B starts early at 5 (PDL) and ends at 20; nothing runs in [20, 25); C [25, 30).
    charges, idle_before = critical_charges(np.array([0, 5, 25]), np.array([10, 20, 30]))
    assert charges.tolist() == [10, 10, 5]
    assert idle_before.tolist() == [0, 0, 5]


@pytest.fixture(scope="module")
def analysis() -> dict:
    trace = Path(f"{SAMPLE}.trace.json.gz")
    result = analyze_traces([trace])
    attach_kernel_bandwidth(
        result, trace, {"rules": RULES, "ceiling_gbps": CEILING_GBPS, "ceiling_source": "test"}
    )
    return result


def _raw_kernels() -> list[dict]:
    events = json.loads(gzip.decompress(Path(f"{SAMPLE}.trace.json.gz").read_bytes()))["traceEvents"]
    return [e for e in events if e.get("cat") == "kernel"]


def test_families_match_the_raw_events(analysis: dict) -> None:
    block = analysis["bandwidth"]
    rows = {row["family"]: row for row in block["families"]}
    assert block["steps"] == 4
    raw = [e for e in _raw_kernels() if e["name"] == "gemv_kernel" and e["args"]["grid"][0] == 2564]
    # 35 KDA layers, 4 steps; every launch of that grid is inside a step.
    assert len(raw) == 140
    in_proj = rows["GEMV KDA in_proj"]
    assert in_proj["launches_per_step"] == 35.0
    assert in_proj["critical_ns"] == pytest.approx(sum(e["dur"] for e in raw) * 1000 / 4, abs=1.0)
    assert in_proj["achieved_gbps"] == pytest.approx(3_675_750_400 / in_proj["critical_ns"], rel=1e-3)
    assert in_proj["at_ceiling_ns"] == pytest.approx(3_675_750_400 / CEILING_GBPS, abs=0.1)
    # Every GEMV launch has a grid some rule names: none falls to "other kernels".
    assert all(
        e["args"]["grid"][0] in (2564, 640, 844, 1536, 256)
        for e in _raw_kernels()
        if e["name"] == "gemv_kernel"
    )
    total = sum(row["critical_ns"] for row in block["families"])
    assert total == pytest.approx(block["gpu_step_ns"], abs=2.0)
    assert rows[IDLE_FAMILY]["critical_ns"] > 0 and rows[OTHER_FAMILY]["critical_ns"] > 0


def test_kernel_rows_get_achieved_bandwidth(analysis: dict) -> None:
    lm_head = next(k for k in analysis["kernels"] if k["name"] == "lm_head_partial_kernel")
    durations = [e["dur"] * 1000 for e in _raw_kernels() if e["name"] == "lm_head_partial_kernel"]
    assert lm_head["critical_ns_per_step"] == pytest.approx(sum(durations) / 4, abs=1.0)
    assert lm_head["achieved_gbps"] == pytest.approx(
        1_609_564_160 / lm_head["critical_ns_per_step"], rel=1e-3
    )
    # A kernel no rule names has no bandwidth (not a zero).
    routing = next(k for k in analysis["kernels"] if k["name"] == "routing_kernel")
    assert "achieved_gbps" not in routing


def test_bytes_shared_by_two_kernels_give_neither_a_kernel_number() -> None:
    # One rule naming both lm_head kernels (as the fast path's rules once did): the combine kernel, which
    # reads only KB, must not be credited the weights' 1.6 GB over its own few microseconds.
    trace = Path(f"{SAMPLE}.trace.json.gz")
    result = analyze_traces([trace])
    lumped = [dict(rule) for rule in RULES]
    lumped[5]["kernels"] = ["lm_head_partial_kernel", "argmax_combine_kernel"]
    attach_kernel_bandwidth(result, trace, {"rules": lumped, "ceiling_gbps": CEILING_GBPS})
    kernels = {k["name"]: k for k in result["kernels"]}
    assert "achieved_gbps" not in kernels["argmax_combine_kernel"]
    assert "achieved_gbps" not in kernels["lm_head_partial_kernel"]
    family = next(row for row in result["bandwidth"]["families"] if row["family"] == "lm_head")
    raw = [
        e["dur"] * 1000
        for e in _raw_kernels()
        if e["name"] in ("lm_head_partial_kernel", "argmax_combine_kernel")
    ]
    assert family["critical_ns"] == pytest.approx(sum(raw) / 4, abs=1.0)


def test_every_surface_shows_the_breakdown(analysis: dict) -> None:
    markdown = render_analysis_markdown(analysis)
    assert "### Where the step's GPU time goes against the floor" in markdown
    assert "| GEMV KDA in\\_proj | 35.0 |" in markdown
    console = Console(width=100, record=True, color_system=None)
    print_analysis(console, analysis)
    text = console.export_text()
    assert "GEMV KDA in_proj" in text and "achieved TB/s" in text


def test_no_rules_no_block() -> None:
    analysis = {"gpu_measured": True, "kernels": []}
    attach_kernel_bandwidth(analysis, "unused.json", None)
    assert "bandwidth" not in analysis


def test_kernel_bytes_block_asks_the_workload() -> None:
    class Modelled:
        def kernel_bytes(self, enabled: frozenset[str]) -> list[dict]:
            return [
                {"family": ",".join(sorted(enabled)), "kernels": ["k"], "grid_x": None, "bytes_per_step": 1}
            ]

    block = kernel_bytes_block(Modelled(), frozenset({"pdl"}), (4000.0, "measured"))
    assert block is not None and block["rules"][0]["family"] == "pdl"
    assert (block["ceiling_gbps"], block["ceiling_source"]) == (4000.0, "measured")
    assert kernel_bytes_block(object(), frozenset(), (4000.0, "measured")) is None
