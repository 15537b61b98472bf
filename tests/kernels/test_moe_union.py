"""expert_union (kernels/moe/union_kernel.py): a window's experts launch that streams each distinct
expert once, against the naive reference, with few experts so that rows share experts."""

from __future__ import annotations

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
from bubblescope.kernels.moe.launch import union_applies

from tests.kernels.helpers import assert_close, poison
from tests.kernels.test_moe import make_weights

# 15 experts in 5 groups of 3, keep 2 groups, top-3: 10 rows pick from 6 experts each, so most are shared.
RULE = RoutingRule(top_k=3, n_group=5, topk_group=2, scale=2.5)
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2e-3}


# deep: the loops through Triton's pipeliner (deep_experts; in the interpreter a plain loop, so the
# GPU run of this file is what checks the pipelined code).
@pytest.mark.parametrize(
    ("rows", "dtype", "early_shared", "deep"),
    [
        (2, torch.float32, False, False),
        (10, torch.bfloat16, True, False),
        (10, torch.float32, False, True),
        (16, torch.bfloat16, False, True),
        (16, torch.float32, True, False),
    ],
    ids=["2-fp32", "10-bf16-early_shared", "10-fp32-deep", "16-bf16-deep", "16-fp32-early_shared"],
)
def test_union_experts_match_naive(device, rows, dtype, early_shared, deep):
    weights = make_weights(15, 37, 20, device, dtype, shared=True, limits=(0.6, 0.8))
    x = torch.randn(rows, 37, device=device).to(dtype)
    config = FusedMoEConfig(expert_union=True, fast_topk=True, early_shared=early_shared, deep_experts=deep)
    assert union_applies(x, weights, config)
    workspace = MoEWorkspace.allocate(rows, weights, RULE)
    want = moe_naive(x, weights, RULE)
    for call in range(2):
        out = poison(torch.empty(rows, 37, device=device))
        moe_fused(x, weights, RULE, use_pdl=True, workspace=workspace, config=config, out=out)
        tol = TOLERANCE[dtype]
        assert_close(f"union rows={rows} {dtype} call {call}", out, want, atol=tol, rtol=tol)
    ids, _ = route_naive(workspace.logits, weights.expert_bias, RULE)
    distinct = ids.unique().numel()
    assert distinct < rows * RULE.top_k or rows == 2, "the case should share experts between rows"


def test_union_with_identical_rows_and_no_shared_expert(device):
    """Every row routes to the same experts (one program per expert serves all), no shared slot,
    and a row count (5) that is not a power of two."""
    weights = make_weights(12, 33, 24, device, torch.float32, shared=False)
    rule = RoutingRule(top_k=3, n_group=4, topk_group=2, scale=1.5)
    x = torch.randn(1, 33, device=device).repeat(5, 1) * torch.arange(1, 6, device=device)[:, None] / 5
    x[:, 0] = 0.0
    out = poison(torch.empty(5, 33, device=device))
    config = FusedMoEConfig(expert_union=True)
    moe_fused(x, weights, rule, config=config, out=out)
    assert_close("union identical rows", out, moe_naive(x, weights, rule), atol=1e-4, rtol=1e-4)


def test_union_falls_back_where_it_does_not_apply(device):
    """One row, or x in another dtype than the weights: the per-(row, slot) launch runs."""
    weights = make_weights(15, 37, 20, device, torch.bfloat16)
    config = FusedMoEConfig(expert_union=True)
    assert not union_applies(torch.randn(1, 37, device=device).bfloat16(), weights, config)
    assert not union_applies(torch.randn(4, 37, device=device), weights, config)
    x = torch.randn(4, 37, device=device)
    out = moe_fused(x, weights, RULE, config=config)
    want = moe_fused(x, weights, RULE, config=FusedMoEConfig())
    assert_close("union fallback fp32 x vs the per-(row, slot) launch", out, want, atol=1e-5, rtol=1e-5)
