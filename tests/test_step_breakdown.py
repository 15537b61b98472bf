"""bench_step_breakdown.py: critical-path charges add up to the step and never count overlap twice."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "reports" / "samples" / "issue17-e256-h200" / "run-all" / "trace.json.gz"


def load_breakdown():
    spec = importlib.util.spec_from_file_location(
        "bench_step_breakdown", ROOT / "benchmarks" / "bench_step_breakdown.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kernel(name: str, start: float, end: float, grid: int = 1) -> dict:
    return {"name": name, "ts": start, "dur": end - start, "cat": "kernel", "args": {"grid": [grid, 1, 1]}}


def test_overlapping_kernels_are_charged_once_and_gaps_go_to_idle() -> None:
    breakdown = load_breakdown()
    # A runs 0-10; B starts early under PDL (5) and ends at 20; nothing runs 20-25; C runs 25-30.
    step = [
        kernel("add_rmsnorm_kernel", 0, 10),
        kernel("kda_decode_kernel", 5, 20),
        kernel("mla_split", 25, 30),
    ]
    charges = breakdown.charge_step(step, {})
    assert charges["add_rmsnorm"] == 10 and charges["KDA decode"] == 10 and charges["MLA kernels"] == 5
    assert charges["idle (no kernel running)"] == 5 and sum(charges.values()) == 30


def test_a_kernel_inside_another_is_charged_nothing() -> None:
    breakdown = load_breakdown()
    step = [kernel("fused_experts_kernel", 0, 40), kernel("router_route_kernel", 2, 12)]
    charges = breakdown.charge_step(step, {})
    assert charges["experts (fused / deep experts launch)"] == 40
    assert charges["router launch (GEMV + top-k)"] == 0


@pytest.mark.skipif(not SAMPLE.exists(), reason="the committed H200 sample is not in this checkout")
def test_charges_of_every_recorded_step_add_up_to_its_span() -> None:
    breakdown = load_breakdown()
    with gzip.open(SAMPLE) as handle:
        events = [e for e in json.load(handle)["traceEvents"] if e.get("cat") == "kernel"]
    steps = breakdown.split_steps(sorted(events, key=lambda e: e["ts"]))
    assert len(steps) >= 2
    for step in steps:
        span = max(e["ts"] + e["dur"] for e in step) - step[0]["ts"]
        assert sum(breakdown.charge_step(step, {}).values()) == pytest.approx(span, abs=1e-6)
