"""reference_model/kernel_bytes.py: the bytes per kernel family add up to the floor's bytes."""

from __future__ import annotations

import pytest
from bubblescope.reference_model.accounting import bytes_per_token, dtype_bytes
from bubblescope.reference_model.config import get_preset
from bubblescope.reference_model.kernel_bytes import rules_for
from bubblescope.reference_model.switches import LingSwitches

pytest.importorskip("triton")

SWITCH_SETS = [
    LingSwitches(),
    LingSwitches(fused_moe=True, bf16_gate=True, bf16_lm_head=True, pdl=True),
    LingSwitches(fused_moe=True, fused_mla_glue=True, deep_experts=True),
    LingSwitches(fused_moe=True, bf16_gate=True, deep_experts=True, routing_in_experts=True),
    LingSwitches(norm_epilogue=True),
    LingSwitches(fused_moe=True, norm_epilogue=True, bf16_gate=True),
    LingSwitches(fused_moe=True, norm_epilogue=True, deep_experts=True, routing_in_experts=True),
    LingSwitches(fused_moe=True, kda_norm_in_oproj=True),
    LingSwitches(fused_moe=True, kda_norm_in_oproj=True, norm_epilogue=True),
]


@pytest.mark.parametrize("preset", ["ling3-flash-e256", "ling3-tiny", "debug"])
@pytest.mark.parametrize("switches", SWITCH_SETS, ids=lambda s: "+".join(sorted(s.enabled())) or "off")
def test_rules_add_up_to_the_floor_bytes(preset: str, switches: LingSwitches) -> None:
    config = get_preset(preset)
    rules = rules_for(config, switches, context_len=77)
    assert rules is not None
    floor = bytes_per_token(
        config, context_len=77, router_bf16=switches.bf16_gate, lm_head_bf16=switches.bf16_lm_head
    )
    # Read by no kernel of the list: the embedding row (a PyTorch index op) and the MLA latent norms
    # (read inside mla_prep / add_rmsnorm launches, too small to model).
    mla_norms = len(config.mla_layers) * (config.kv_lora_rank + (config.q_lora_rank or 0))
    unmodelled = floor.components["embedding_row"] + mla_norms * dtype_bytes(config)
    assert sum(rule["bytes_per_step"] for rule in rules) == floor.total - unmodelled


def test_fused_and_unfused_moe_name_their_own_kernels() -> None:
    config = get_preset("ling3-flash-e256")
    unfused = {r["family"]: r for r in rules_for(config, LingSwitches(), context_len=1)}
    fused = {r["family"]: r for r in rules_for(config, LingSwitches(fused_moe=True), context_len=1)}
    assert unfused["MoE experts gate/up"]["kernels"] == ["gate_up_kernel"]
    assert "GEMV router gate" in unfused and "GEMV router gate" not in fused
    assert fused["MoE experts (routed + shared)"]["kernels"] == [
        "fused_experts_kernel",
        "deep_experts_kernel",
        "tma_experts_kernel",
    ]
    # The GEMV grids are the launcher's: the H200 traces of this preset have grids 2564, 844, 1536, 256 and
    # the 2560-row projections' 640 (4-row strips, until 2026-12-03) or 1280 (2-row, ops.NARROW_STRIP).
    assert {r["grid_x"] for r in unfused.values() if r["grid_x"]} == {2564, 1280, 844, 1536, 256}


def test_routing_in_experts_moves_the_bias_read_to_the_experts_launch() -> None:
    config = get_preset("ling3-flash-e256")
    ticket = {r["family"]: r for r in rules_for(config, LingSwitches(fused_moe=True), context_len=1)}
    in_experts = {
        r["family"]: r
        for r in rules_for(config, LingSwitches(fused_moe=True, routing_in_experts=True), context_len=1)
    }
    bias = (config.num_hidden_layers - config.first_k_dense_replace) * config.num_experts * 4
    experts = "MoE experts (routed + shared)"
    assert in_experts["MoE router"]["bytes_per_step"] == ticket["MoE router + top-k"]["bytes_per_step"] - bias
    assert in_experts[experts]["bytes_per_step"] == ticket[experts]["bytes_per_step"] + bias
    assert in_experts["MoE router"]["launches"] == ticket["MoE router + top-k"]["launches"]


def test_paths_and_tp_not_modelled_say_so() -> None:
    config = get_preset("debug")
    assert rules_for(config, LingSwitches(), context_len=1, path="eager") is None
    assert rules_for(config, LingSwitches(), context_len=1, tp=2) is None


def test_norm_epilogue_moves_the_norm_weights_into_the_output_gemvs() -> None:
    config = get_preset("ling3-flash-e256")
    off = {r["family"]: r for r in rules_for(config, LingSwitches(fused_moe=True), context_len=1)}
    on = {
        r["family"]: r
        for r in rules_for(config, LingSwitches(fused_moe=True, norm_epilogue=True), context_len=1)
    }
    hidden_row = config.hidden_size * dtype_bytes(config)
    plain = off["GEMV KDA o_proj / MLA dense / dense FFN down"]
    fused = on["GEMV KDA o_proj / MLA dense / dense FFN down + add/RMSNorm"]
    # Same grid (the launcher's tiles), its own kernel name, one norm weight more per launch.
    assert fused["kernels"] == ["gemv_norm_epilogue_kernel"] and fused["grid_x"] == plain["grid_x"] == 1280
    assert fused["launches"] == plain["launches"] == 44
    assert fused["bytes_per_step"] == plain["bytes_per_step"] + 44 * hidden_row
    experts = "MoE experts (routed + shared)"
    assert on[experts]["bytes_per_step"] == off[experts]["bytes_per_step"] + 40 * hidden_row
    # All 85 norms but the first layer's input norm move out of add_rmsnorm.
    moved = off["add + RMSNorm"]["bytes_per_step"] - on["add + RMSNorm"]["bytes_per_step"]
    assert moved == 84 * hidden_row and on["add + RMSNorm"]["bytes_per_step"] == hidden_row
    unfused = {r["family"]: r for r in rules_for(config, LingSwitches(norm_epilogue=True), context_len=1)}
    plain_down = {r["family"]: r for r in rules_for(config, LingSwitches(), context_len=1)}[
        "MoE experts down"
    ]
    assert unfused["MoE experts down"]["bytes_per_step"] == plain_down["bytes_per_step"] + 40 * hidden_row


@pytest.mark.parametrize("norm_epilogue", [False, True])
def test_kda_norm_in_oproj_gives_the_kda_o_proj_its_own_kernel(norm_epilogue: bool) -> None:
    config = get_preset("ling3-flash-e256")
    base = dict(fused_moe=True, norm_epilogue=norm_epilogue)
    off = {r["family"]: r for r in rules_for(config, LingSwitches(**base), context_len=1)}
    on_switches = LingSwitches(**base, kda_norm_in_oproj=True)
    on = {r["family"]: r for r in rules_for(config, on_switches, context_len=1)}
    tail = " + add/RMSNorm" if norm_epilogue else ""
    o_norm_row = config.head_dim * dtype_bytes(config)
    kda_o_proj = on["GEMV KDA o_proj + head norm" + tail]
    others = on["GEMV MLA dense / dense FFN down" + tail]
    shared = off["GEMV KDA o_proj / MLA dense / dense FFN down" + tail]
    assert kda_o_proj["kernels"] == ["gemv_head_norm_kernel"] and kda_o_proj["grid_x"] == shared["grid_x"]
    assert kda_o_proj["launches"] == 35 and others["launches"] + 35 == shared["launches"]
    # The o_norm row of each KDA layer moves from the KDA decode rule into its o_proj's.
    assert (
        kda_o_proj["bytes_per_step"] + others["bytes_per_step"] == shared["bytes_per_step"] + 35 * o_norm_row
    )
    kda = "KDA decode (state + conv)"
    assert on[kda]["bytes_per_step"] == off[kda]["bytes_per_step"] - 35 * o_norm_row
