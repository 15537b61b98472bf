"""Who routes the fused MoE layer (FusedMoEConfig.routing_site): the experts programs themselves
(`routing_in_experts`, slot_routing.py) or a routing launch of its own, against the plain PyTorch
reference (`moe_naive`, `route_naive`) on random inputs: small shapes on the CPU interpreter, the
ling3-flash-e256 layer on a GPU (eager, PDL, and a CUDA graph replay)."""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.gemv import KernelInputError
from bubblescope.kernels.moe import (
    FusedMoEConfig,
    MoEWorkspace,
    RoutingRule,
    moe_fused,
    moe_naive,
    route_naive,
)

from tests.kernels.helpers import assert_close, poison
from tests.kernels.test_moe import SMALL_RULE, make_weights

SITES = ("experts", "own_launch")
# 15 experts in 5 groups of 3 (a padded member axis), keep 2 groups, top-3.
ODD_RULE = RoutingRule(top_k=3, n_group=5, topk_group=2, scale=2.5)


def check_layer(weights, rule, x, config, tolerance, calls=2):
    """moe_fused under `config` equals moe_naive on every call, and the workspace holds route_naive's
    ids of the layer's own logits afterwards (the experts programs publish them)."""
    rows, hidden = x.shape
    want = moe_naive(x, weights, rule)
    workspace = MoEWorkspace.allocate(rows, weights, rule)
    for call in range(calls):  # the second call runs on a workspace the first one wrote
        poison(workspace.ids)
        out = poison(torch.empty(rows, hidden, device=x.device))
        moe_fused(x, weights, rule, use_pdl=True, workspace=workspace, config=config, out=out)
        assert_close(f"{config.routing_site} call {call}", out, want, atol=tolerance, rtol=tolerance)
        want_ids, want_gains = route_naive(workspace.logits, weights.expert_bias, rule)
        assert torch.equal(workspace.ids.long(), want_ids), (
            f"ids {workspace.ids.tolist()} != {want_ids.tolist()}"
        )
        assert_close("published gains", workspace.weights, want_gains, atol=1e-6, rtol=1e-5)
    # Neither site takes the router launch's ticket: the counter is never touched.
    assert int(workspace.counter.item()) == 0


# Every experts kernel (fused / deep pairs), with and without early_shared and a shared expert, fp32
# and bf16; several rows go through the serial path too when serial_route_max_rows allows it. The
# routing launch of its own reuses the existing kernels unchanged: one case. The several-row cases (not
# the decode step's one row) run under `slow`.
@pytest.mark.parametrize(
    ("site", "rows", "dtype", "deep", "early_shared", "shared"),
    [
        ("experts", 1, torch.float32, False, False, True),
        ("experts", 1, torch.bfloat16, True, True, True),
        pytest.param("experts", 2, torch.float32, True, False, False, marks=pytest.mark.slow),
        pytest.param("experts", 2, torch.float32, False, True, True, marks=pytest.mark.slow),
        ("own_launch", 2, torch.bfloat16, True, True, True),
    ],
    ids=["1-fp32-fused", "1-bf16-deep-early", "2-fp32-deep-no-shared", "2-fp32-fused-early", "own-launch"],
)
def test_routing_site_layer_matches_naive(device, site, rows, dtype, deep, early_shared, shared):
    weights = make_weights(15, 40, 16, device, dtype, shared=shared, limits=(0.6, 0.8))
    x = torch.randn(rows, 40, device=device).to(dtype)
    config = FusedMoEConfig(
        routing_site=site,
        serial_route_max_rows=16,
        fast_topk=True,
        early_shared=early_shared,
        deep_experts=deep,
        block_i=8,
        deep_block_i=8,
        block_d=16,
        block_dout=16,
    )
    check_layer(weights, ODD_RULE, x, config, 1e-4 if dtype == torch.float32 else 2e-3)


def test_routing_in_experts_follows_the_group_mask_and_ties(device):
    """All-negative biases with equal logits: the kept groups must come from -inf masking, ties go to
    the lowest id (as test_route_topk_masks_groups_with_minus_inf), and every slot program agrees:
    the layer equals the router launch's (ticket) routing of the same inputs."""
    weights = make_weights(8, 16, 8, device, torch.float32)
    weights.router.zero_()
    weights.expert_bias = torch.tensor([-3.0, -3.0, -9.0, -9.0, -1.0, -1.0, -9.0, -9.0], device=device)
    rule = RoutingRule(top_k=3, n_group=4, topk_group=2, scale=1.0)
    x = torch.randn(1, 16, device=device)
    outs = {}
    for site in ("router_launch", "experts"):
        config = FusedMoEConfig(routing_site=site, fast_topk=True, block_i=8, block_d=16, block_dout=16)
        workspace = MoEWorkspace.allocate(1, weights, rule)
        outs[site] = moe_fused(x, weights, rule, workspace=workspace, config=config)
        assert workspace.ids[0].tolist() == [4, 5, 0], (
            f"{site} picked {workspace.ids.tolist()}, want [4, 5, 0]"
        )
    assert_close("in experts vs router launch", outs["experts"], outs["router_launch"], atol=1e-6, rtol=1e-6)


def test_windows_above_the_serial_rows_keep_their_routing_launch(device):
    """Above serial_route_max_rows the parallel routing launch routes, whatever the site says."""
    weights = make_weights(12, 40, 24, device, torch.float32)
    x = torch.randn(3, 40, device=device)
    config = FusedMoEConfig(routing_site="experts", serial_route_max_rows=1)
    check_layer(weights, SMALL_RULE, x, config, 1e-4, calls=1)


def test_unknown_routing_site_is_refused():
    weights = make_weights(12, 16, 8, torch.device("cpu"), torch.float32)
    with pytest.raises(KernelInputError, match="routing_site 'everywhere'"):
        moe_fused(torch.randn(1, 16), weights, SMALL_RULE, config=FusedMoEConfig(routing_site="everywhere"))


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["eager", "pdl", "graph_pdl"])
@pytest.mark.parametrize("site", ("router_launch", *SITES))
def test_routing_site_at_e256_shapes(site, mode):
    """ling3-flash-e256's layer (256 experts, D 2560, I 768, bf16 gate, 8 groups keep 4, top-8) on the
    all-on tiles (fast_topk, early_shared, deep_experts): layer vs moe_naive, ids vs route_naive."""
    from tests.kernels.test_kernels_gpu import FP32_TOL, flash_moe_weights, run_mode

    rule = RoutingRule(top_k=8, n_group=8, topk_group=4, scale=2.5)
    weights = flash_moe_weights(torch.bfloat16)
    x = torch.randn(1, 2560, device="cuda", dtype=torch.bfloat16)
    config = FusedMoEConfig(routing_site=site, fast_topk=True, early_shared=True, deep_experts=True)
    workspace = MoEWorkspace.allocate(1, weights, rule)
    out = torch.empty(1, 2560, device="cuda")

    def launch(pdl):
        return moe_fused(x, weights, rule, use_pdl=pdl, workspace=workspace, config=config, out=out)

    run_mode(mode, launch, (out, workspace.ids))
    assert_close(f"e256 layer, {site}, {mode}", out, moe_naive(x, weights, rule), FP32_TOL, FP32_TOL)
    want_ids, _ = route_naive(workspace.logits, weights.expert_bias, rule)
    assert torch.equal(workspace.ids.long(), want_ids), f"{site} {mode}: ids differ from route_naive"
