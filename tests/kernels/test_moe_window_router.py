"""The router GEMV of a window (the verify's rows) with FusedMoEConfig's window_router_* tiles."""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.moe import FusedMoEConfig, MoEWorkspace, RoutingRule, moe_fused, moe_naive
from bubblescope.kernels.moe.launch import window_router_config

from tests.kernels.helpers import assert_close
from tests.kernels.test_moe import make_weights

RULE = RoutingRule(top_k=3, n_group=5, topk_group=2, scale=2.5)


@pytest.mark.parametrize(
    ("block_k", "warps"), [(0, 0), (64, 8), (32, 2)], ids=["default", "bk64-w8", "bk32-w2"]
)
def test_window_router_tiles_give_the_same_layer(device, block_k, warps):
    weights = make_weights(15, 100, 20, device, torch.float32, shared=True)
    x = torch.randn(10, 100, device=device)
    config = FusedMoEConfig(expert_union=True, window_router_block_k=block_k, window_router_warps=warps)
    workspace = MoEWorkspace.allocate(10, weights, RULE)
    out = moe_fused(x, weights, RULE, workspace=workspace, config=config)
    assert_close(
        f"window router bk{block_k} w{warps}", out, moe_naive(x, weights, RULE), atol=1e-4, rtol=1e-4
    )
    # The logits are the router's, whatever the tiles.
    assert_close("router logits", workspace.logits, x @ weights.router.T, atol=1e-5, rtol=1e-5)


def test_window_router_config_overrides_only_what_is_set():
    router = torch.empty(256, 2560)
    base = window_router_config(10, router, None)
    assert (base.block_n, base.block_k, base.num_warps, base.l2_prefetch) == (16, 128, 4, 0)
    tuned = window_router_config(
        10, router, FusedMoEConfig(window_router_block_k=512, window_router_prefetch=1)
    )
    assert (tuned.block_n, tuned.block_k, tuned.num_warps, tuned.l2_prefetch) == (16, 512, 4, 1)
