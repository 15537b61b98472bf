"""bench_step_breakdown.py rebuilds the product's bandwidth breakdown for a run recorded before runs
carried bytes (the committed issue-17 all-on H200 run: PDL on, so kernels overlap)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "reports" / "samples" / "issue17-e256-h200" / "run-all"

pytest.importorskip("triton")


def load_bench():
    spec = importlib.util.spec_from_file_location(
        "bench_step_breakdown", ROOT / "benchmarks" / "bench_step_breakdown.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not RUN.exists(), reason="the committed H200 sample is not in this checkout")
def test_breakdown_of_a_pdl_run_adds_up_and_names_the_fused_kernels() -> None:
    block = load_bench().breakdown_of_run(RUN)["bandwidth"]
    rows = {row["family"]: row for row in block["families"]}
    # Under PDL kernels overlap: charged once, the rows add up to the mean GPU step.
    assert sum(row["critical_ns"] for row in rows.values()) == pytest.approx(block["gpu_step_ns"], abs=2.0)
    assert rows["MoE experts (routed + shared)"]["launches_per_step"] >= 40
    assert rows["GEMV KDA in_proj"]["launches_per_step"] >= 35
    # No family reads faster than the measured copy ceiling (the record's 4153 GB/s) by more than noise.
    assert all((row["fraction_of_ceiling"] or 0) < 1.1 for row in rows.values())
