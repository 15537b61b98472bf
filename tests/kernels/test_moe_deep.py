"""The `deep_experts` launch (two tiles in flight, or Triton's pipeliner) vs the naive MoE layer."""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.moe import FusedMoEConfig, MoEWorkspace, RoutingRule, moe_fused, moe_naive

from tests.kernels.helpers import assert_close, poison
from tests.kernels.test_moe import make_weights

RULE = RoutingRule(top_k=3, n_group=5, topk_group=2, scale=2.5)


# hidden 300 with 64-wide tiles: 5 tiles, so the pairs loop runs 3 times and its last pair is half
# outside D; inter 20 with block_i 8: the last I-slice is partly outside I.
@pytest.mark.parametrize(
    ("rows", "dtype", "early_shared", "shared", "stages"),
    [
        (1, torch.bfloat16, True, True, 0),
        (3, torch.float32, True, False, 0),
        (1, torch.float32, False, True, 3),
    ],
    ids=["1-bf16-early_shared", "3-fp32-early_shared-no-shared", "1-fp32-pipelined-waited"],
)
def test_deep_experts_match_naive(device, rows, dtype, early_shared, shared, stages):
    weights = make_weights(15, 300, 20, device, dtype, shared=shared, limits=(0.6, 0.8))
    x = torch.randn(rows, 300, device=device).to(dtype)
    want = moe_naive(x, weights, RULE)
    config = FusedMoEConfig(
        deep_experts=True,
        deep_stages=stages,
        fast_topk=True,
        early_shared=early_shared,
        deep_block_i=8,
        block_d=64,
        block_dout=64,
    )
    workspace = MoEWorkspace.allocate(rows, weights, RULE)
    tolerance = 1e-4 if dtype == torch.float32 else 2e-3
    for call in range(2):
        out = poison(torch.empty(rows, 300, device=device))
        moe_fused(x, weights, RULE, use_pdl=True, workspace=workspace, config=config, out=out)
        assert_close(f"deep_experts call {call}", out, want, atol=tolerance, rtol=tolerance)
