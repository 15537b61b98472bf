"""The `split_experts` launches (gate/up strips, then down strips without atomics) vs the naive layer."""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.moe import FusedMoEConfig, MoEWorkspace, RoutingRule, moe_fused, moe_naive

from tests.kernels.helpers import assert_close, poison
from tests.kernels.test_moe import make_weights

RULE = RoutingRule(top_k=3, n_group=5, topk_group=2, scale=2.5)


# hidden 37 / inter 20 with 8-row gate/up strips, 16-wide K tiles and 4-row down strips: the last strip
# of I, of D and of K are all partly outside, and the down walk crosses slots mid-way (20 = 16 + 4).
@pytest.mark.parametrize(
    ("rows", "dtype", "early_shared", "shared"),
    [(1, torch.float32, False, True), (1, torch.bfloat16, True, True), (3, torch.float32, True, False)],
    ids=["1-fp32", "1-bf16-early_shared", "3-fp32-early_shared-no-shared"],
)
def test_split_experts_match_naive(device, rows, dtype, early_shared, shared):
    weights = make_weights(15, 37, 20, device, dtype, shared=shared, limits=(0.6, 0.8))
    x = torch.randn(rows, 37, device=device).to(dtype)
    want = moe_naive(x, weights, RULE)
    config = FusedMoEConfig(
        split_experts=True,
        fast_topk=True,
        early_shared=early_shared,
        strip_i=8,
        strip_k=16,
        down_n=4,
        down_k=16,
    )
    workspace = MoEWorkspace.allocate(rows, weights, RULE)
    tolerance = 1e-4 if dtype == torch.float32 else 2e-3
    for call in range(2):
        out = poison(torch.empty(rows, 37, device=device))
        workspace.hidden.fill_(float("nan"))
        moe_fused(x, weights, RULE, use_pdl=True, workspace=workspace, config=config, out=out)
        assert_close(f"split_experts call {call}", out, want, atol=tolerance, rtol=tolerance)
