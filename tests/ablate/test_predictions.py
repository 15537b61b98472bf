"""Predictions from the baseline's analysis and their check against the measured savings (issue 23 §3)."""

from __future__ import annotations

import pytest

from bubblescope.ablate.plan import plan_ablation
from bubblescope.ablate.predict import RULES, predict_switch
from bubblescope.ablate.predicted_vs_measured import agrees, predicted_vs_measured
from bubblescope.report.predicted_rows import predicted_rows

# Four profiled steps of a baseline that reads twice a step: sync idle ~140 µs, launch idle ~200 µs.
SYNC_NS = [168_831, 140_831, 135_359, 136_031]
LAUNCH_NS = [198_008, 201_768, 202_873, 198_557]
KERNELS = [
    {"name": "gemv_kernel", "count_per_step": 128.0, "ns_per_step": 1_541_764.5},
    {"name": "down_kernel", "count_per_step": 40.0, "ns_per_step": 1_036_896.8},
    {"name": "gate_up_kernel", "count_per_step": 40.0, "ns_per_step": 954_900.0},
    {"name": "routing_kernel", "count_per_step": 40.0, "ns_per_step": 265_700.0},
    {"name": "mla_split_kernel", "count_per_step": 7.0, "ns_per_step": 51_100.0},
    {"name": "nvjet_sm90_tst_64x8", "count_per_step": 7.0, "ns_per_step": 27_100.0},
    {
        "name": "void at::native::vectorized_elementwise_kernel<4>",
        "count_per_step": 7.0,
        "ns_per_step": 9_000.0,
    },
    # The same kernel family outside the MLA layers (metadata ops): not MLA glue.
    {
        "name": "void at::native::vectorized_elementwise_kernel<8>",
        "count_per_step": 2.0,
        "ns_per_step": 3_200.0,
    },
]


def _record(enabled: list[str], *, bytes_per_token: float = 20e9, reads: float = 2.0) -> dict:
    return {
        "switches": {"enabled": enabled},
        "summary": {"tokens": 96, "steps": 32, "repeats": 3},
        "floor": {
            "bytes_per_token": bytes_per_token,
            "bandwidth_gbps": 4000.0,
            "bandwidth_source": "measured",
        },
        "analysis": {
            "gpu_measured": True,
            "blocking_reads_per_step": reads,
            "kernels_per_step": 400.0,
            "gpu_busy_ns_per_step": 4_770_000,
            "profiled_step_over_timed": 1.35,
            "idle_steps": {
                "steps": [0, 1, 2, 3],
                "by_class_ns": {"sync": SYNC_NS, "host": [0] * 4, "launch": LAUNCH_NS, "dependency": [0] * 4},
            },
        },
    }


def test_idle_rules_predict_the_median_step_with_an_interval() -> None:
    reads = predict_switch("no_readback", _record([]), None)
    assert reads["predicted_ms"]["est"] == pytest.approx((136_031 + 140_831) / 2 / 1e6)
    assert reads["predicted_ms"]["lo"] <= reads["predicted_ms"]["est"] <= reads["predicted_ms"]["hi"]
    pdl = predict_switch("pdl", _record([]), None)
    assert pdl["predicted_ms"]["est"] == pytest.approx((198_557 + 201_768) / 2 / 1e6)


def test_launch_rules_count_the_launches_merged_away() -> None:
    analysis = {"kernels": KERNELS}
    mean_gap_ns = (198_557 + 201_768) / 2 / 400.0
    moe = predict_switch("fused_moe", _record([]), analysis)
    # router + gate/up + down (40 each) become 2 launches per MoE layer: 40 launches removed.
    assert moe["predicted_ms"]["est"] == pytest.approx(40 * mean_gap_ns / 1e6, rel=1e-6)
    glue = predict_switch("fused_mla_glue", _record([]), analysis)
    # nvjet + elementwise<4> (7 each) become 2 per MLA layer: nothing merged away, the elementwise time goes.
    assert glue["predicted_ms"]["est"] == pytest.approx(9_000.0 / 1e6, rel=1e-6)
    assert "no prediction" in predicted_rows([predict_switch("fused_moe", _record([]), None)])[1][0][2]
    norms = {"name": "add_rmsnorm_kernel", "count_per_step": 85.0, "ns_per_step": 137_000.0}
    epilogue = predict_switch("norm_epilogue", _record([]), {"kernels": [*KERNELS, norms]})
    # 85 add + norm launches, the first layer's input norm stays: 84 gaps; their kernel time moves, not saved.
    assert epilogue["predicted_ms"]["est"] == pytest.approx(84 * mean_gap_ns / 1e6, rel=1e-6)
    assert epilogue["basis"].startswith("84 of 400 launches")


def test_bytes_rules_divide_the_bytes_saved_by_the_measured_bandwidth() -> None:
    row = predict_switch("bf16_lm_head", _record([]), None, _record(["bf16_lm_head"], bytes_per_token=19.2e9))
    assert row["predicted_ms"]["est"] == pytest.approx(0.8e9 / 4000.0 / 1e6)
    assert row["predicted_ms"]["lo"] is None and "no per-step variation" in row["no_interval"]
    assumed = _record([])
    assumed["floor"]["bandwidth_source"] = "assumed (H200 copy ceiling)"
    assert predict_switch("bf16_gate", assumed, None, _record(["bf16_gate"]))["predicted_ms"] is None


def test_switches_without_a_rule_say_so() -> None:
    for name in ("fast_topk", "verify_norm_kernel", "made_up"):
        row = predict_switch(name, _record([]), None)
        assert row["predicted_ms"] is None and row["why_none"]
    assert set(RULES) >= {"no_readback", "pdl", "graph_metadata", "fused_moe", "bf16_gate", "bf16_lm_head"}


def test_agreement_is_25_percent_or_inside_an_interval() -> None:
    measured = {"est": 0.20, "lo": 0.19, "hi": 0.21}
    assert agrees({"est": 0.16, "lo": None, "hi": None}, measured)  # 20% off
    assert not agrees({"est": 0.14, "lo": None, "hi": None}, measured)  # 30% off, outside
    assert agrees({"est": 0.14, "lo": 0.10, "hi": 0.22}, measured)  # measured inside the prediction's
    assert agrees({"est": 0.3, "lo": None, "hi": None}, {"est": 0.2, "lo": 0.1, "hi": 0.35})


def test_a_switch_saving_nothing_while_the_host_blocks_on_reads_is_explained() -> None:
    plan = plan_ablation(["pdl", "no_readback"])
    records = {c.key: _record(sorted(c.enabled)) for c in plan.configs}
    switches = [
        {
            "name": "pdl",
            "alone_ms": {"est": -0.05, "lo": -0.4, "hi": 0.1},
            "removed_from_all_ms": {"est": 0.30, "lo": 0.29, "hi": 0.31},
        },
        {
            "name": "no_readback",
            "alone_ms": {"est": 0.15, "lo": 0.12, "hi": 0.17},
            "removed_from_all_ms": {"est": 0.14, "lo": 0.13, "hi": 0.15},
        },
    ]
    rows = {r["switch"]: r for r in predicted_vs_measured(plan, records, switches, None)}
    pdl = rows["pdl"]
    assert pdl["verdict"] == "off" and pdl["agrees_with"] == []
    assert any("host still blocks on 2 reads/step" in reason for reason in pdl["reasons"])
    assert any(reason.startswith("tracing: ") for reason in pdl["reasons"]) is False  # 0.2 < 0.3 measured
    assert rows["no_readback"]["verdict"] == "agrees"
    assert rows["no_readback"]["agrees_with"] == ["alone", "removed from all-on"]
    table = predicted_rows(list(rows.values()))[1]
    assert table[0][5].startswith("off: ") and table[1][5] == "agrees with alone and removed from all-on"
