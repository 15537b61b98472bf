"""The union experts launch on its compact grid (kernels/moe/union_compact_kernel.py, FusedMoEConfig
.union_compact): against the naive reference and the per-row union grid, one program per item and a
persistent grid whose programs loop over several items, with and without the shared expert."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from bubblescope.kernels.moe import (
    FusedMoEConfig,
    MoEWorkspace,
    RoutingRule,
    moe_fused,
    moe_naive,
    route_naive,
)
from bubblescope.kernels.moe.launch import sm_count, union_compact_programs

from tests.kernels.helpers import assert_close, poison
from tests.kernels.test_moe import make_weights

# As test_moe_union.py: 15 experts, top-3 of 2 kept groups of 3, so the window's rows share experts.
RULE = RoutingRule(top_k=3, n_group=5, topk_group=2, scale=2.5)
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2e-3}


# inter 20 at block_i 16: two slices per expert, the second partial. inter 272: 17 slices, so even the
# H200's persistent grid (132 programs at 1 per SM) is smaller than the ~15 experts' items and loops.
@pytest.mark.parametrize(
    ("rows", "dtype", "per_sm", "deep", "shared", "inter"),
    [
        (10, torch.bfloat16, 0, False, True, 20),
        (10, torch.float32, 1, False, True, 20),
        (16, torch.bfloat16, 1, True, True, 272),
        (5, torch.float32, 0, True, False, 20),
        (3, torch.float32, 2, False, False, 20),
    ],
    ids=["10-bf16-dense", "10-fp32-persistent", "16-bf16-persistent-deep-loops", "5-fp32-dense-deep-noshared",
         "3-fp32-persistent-noshared"],
)  # fmt: skip
def test_compact_union_matches_naive(device, rows, dtype, per_sm, deep, shared, inter):
    weights = make_weights(15, 37, inter, device, dtype, shared=shared, limits=(0.6, 0.8))
    x = torch.randn(rows, 37, device=device).to(dtype)
    config = FusedMoEConfig(
        expert_union=True,
        fast_topk=True,
        deep_experts=deep,
        union_compact=True,
        union_programs_per_sm=per_sm,
        union_block_i=16,
    )
    workspace = MoEWorkspace.allocate(rows, weights, RULE)
    want = moe_naive(x, weights, RULE)
    for call in range(2):
        out = poison(torch.empty(rows, 37, device=device))
        moe_fused(x, weights, RULE, use_pdl=True, workspace=workspace, config=config, out=out)
        tol = TOLERANCE[dtype]
        assert_close(f"compact union rows={rows} {dtype} call {call}", out, want, atol=tol, rtol=tol)
    ids, _ = route_naive(workspace.logits, weights.expert_bias, RULE)
    slices = -(-inter // 16)
    items = (ids.unique().numel() + shared) * slices
    grid = union_compact_programs(rows * RULE.top_k + shared, inter, 16, config, x.device)
    if per_sm and (device.type == "cpu" or inter > 200):
        assert grid < items, f"the persistent grid ({grid}) should loop over the {items} items"


def test_compact_union_equals_the_per_row_grid(device):
    """The same items as the per-row union grid: outputs equal to fp32 atomic-order rounding."""
    weights = make_weights(15, 37, 20, device, torch.float32, shared=True)
    x = torch.randn(10, 37, device=device)
    per_row = moe_fused(x, weights, RULE, config=FusedMoEConfig(expert_union=True))
    compact = moe_fused(x, weights, RULE, config=FusedMoEConfig(expert_union=True, union_compact=True))
    assert_close("compact vs per-row union grid", compact, per_row, atol=1e-5, rtol=1e-5)


def test_compact_grid_size():
    config = FusedMoEConfig(union_compact=True)
    cpu = torch.device("cpu")
    # 10 rows x top-8 + shared = 81 possible experts, 24 slices of 32 rows of I = 768.
    assert union_compact_programs(81, 768, 32, config, cpu) == 81 * 24
    persistent = FusedMoEConfig(union_compact=True, union_programs_per_sm=3)
    assert union_compact_programs(81, 768, 32, persistent, cpu) == 3 * sm_count(cpu)
    assert union_compact_programs(1, 20, 16, persistent, cpu) == 2


@pytest.mark.parametrize("compact", [False, True], ids=["rows-grid", "compact"])
def test_down_products_in_bf16_hi_lo_match_naive(device, compact):
    """union_h_bf16x2: h split into bf16 hi + lo for the down products (bf16 weights), both grids."""
    weights = make_weights(15, 37, 20, device, torch.bfloat16, shared=True, limits=(0.6, 0.8))
    x = torch.randn(10, 37, device=device).to(torch.bfloat16)
    config = FusedMoEConfig(
        expert_union=True, union_compact=compact, union_h_bf16x2=True, union_block_i=16, deep_experts=True
    )
    out = poison(torch.empty(10, 37, device=device))
    moe_fused(x, weights, RULE, use_pdl=True, config=config, out=out)
    assert_close(f"h bf16x2 compact={compact}", out, moe_naive(x, weights, RULE), atol=2e-3, rtol=2e-3)
    # Against the tf32x3 products: hi + lo carry h to ~16 bits (hi alone, 8 bits, is ~1e-3 off).
    tf32x3 = moe_fused(x, weights, RULE, use_pdl=True, config=replace(config, union_h_bf16x2=False))
    scale = tf32x3.abs().max().item()
    assert (out - tf32x3).abs().max().item() <= 1e-4 * scale
