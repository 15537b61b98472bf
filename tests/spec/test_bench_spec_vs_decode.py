"""benchmarks/bench_spec_vs_decode.py: the ratio of two interleaved workloads, and its CPU dry run."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from bubblescope.reference_model.on_top import MEASURED_SLOWER

ROOT = Path(__file__).resolve().parents[2]


def load_bench():
    spec = importlib.util.spec_from_file_location(
        "bench_spec_vs_decode", ROOT / "benchmarks" / "bench_spec_vs_decode.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ratio_is_effective_tpot_over_effective_tpot() -> None:
    # Decode: 1 token per 4 ms step. DSpark: 10 tokens per 15 ms verify -> 1.5 ms per token = 0.375 x.
    samples = {
        "decode": {"samples_ns": [[4_000_000] * 5, [4_000_000] * 5], "tokens_per_step": [[1] * 5, [1] * 5]},
        "spec": {"samples_ns": [[15_000_000] * 3, [15_000_000] * 3], "tokens_per_step": [[10] * 3, [10] * 3]},
    }
    result = load_bench().summarize(samples, seed=0)
    assert result["decode_tpot_ms"]["est"] == pytest.approx(4.0)
    assert result["spec_tpot_ms"]["est"] == pytest.approx(1.5)
    assert result["ratio"] == pytest.approx({"est": 0.375, "lo": 0.375, "hi": 0.375})
    assert result["round_ratios"] == [0.375, 0.375]
    assert result["meets_target"] is True


@pytest.mark.slow
def test_cpu_dry_run_writes_both_sides_and_the_ratio(tmp_path: Path) -> None:
    """The debug preset on the CPU (eager decode, eager-MoE DSpark), two rounds: ~15 s."""
    code = load_bench().main(
        [
            str(tmp_path),
            *("--preset", "debug", "--rounds", "2", "--decode-steps", "3", "--spec-steps", "2"),
            *("--extra-overlaps", "0.5"),
            *("--spec-without", "bf16_gate", "--without-repeats", "2"),
        ]
    )
    report = json.loads((tmp_path / "spec_vs_decode.json").read_text())
    assert code == 0, report["errors"]
    assert [r["order"] for r in report["rounds"]] == [["decode", "spec"], ["spec", "decode"]]
    # The oracle at 9.95 with block 9 emits 10 tokens on (almost) every verify.
    assert report["spec"]["accept_len"] > 9
    result = report["result"]
    assert result["ratio"]["lo"] <= result["ratio"]["est"] <= result["ratio"]["hi"]
    assert len(report["samples"]["spec"]["samples_ns"]) == 2
    assert (tmp_path / "spec_vs_decode.md").read_text().startswith("# bench_spec_vs_decode")
    (extra,) = report["overlaps"]
    assert extra["experts"]["overlap_knob"] == 0.5 and extra["experts"]["verifies"] > 0
    # The non-speculative side leaves off what on_top.MEASURED_SLOWER names (measured slower in the step).
    assert report["build"]["decode_off"] == sorted(MEASURED_SLOWER) and "norm_epilogue" in MEASURED_SLOWER
    (without,) = report["without"]
    assert without["switch"] == "bf16_gate"
    assert without["saving_ms"] == pytest.approx(
        without["without_tpot_ms"]["est"] - without["all_on_tpot_ms"]["est"]
    )


def test_moe_alt_parses_into_typed_config_fields() -> None:
    bench = load_bench()
    assert bench.parse_moe_overrides("union_num_warps=4,union_compact=true,routing_site=experts") == {
        "union_num_warps": 4,
        "union_compact": True,
        "routing_site": "experts",
    }
    with pytest.raises(SystemExit, match="not a FusedMoEConfig field"):
        bench.parse_moe_overrides("union_warps=4")
