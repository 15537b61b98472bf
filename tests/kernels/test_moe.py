"""MoE kernels vs the naive reference: routing, unfused and fused layers."""

from __future__ import annotations

import pytest
import torch
from bubblescope.kernels.gemv import KernelInputError
from bubblescope.kernels.moe import (
    FusedMoEConfig,
    MoEWeights,
    MoEWorkspace,
    RoutingRule,
    moe_fused,
    moe_naive,
    moe_unfused,
    route_naive,
    route_topk,
)

from tests.kernels.helpers import assert_close, poison

# 12 experts in 4 groups of 3, keep 2 groups, top-3: group masking decides the result.
SMALL_RULE = RoutingRule(top_k=3, n_group=4, topk_group=2, scale=2.5)


def make_weights(experts, hidden, inter, device, dtype, shared=True, limits=(0.0, 0.0)):
    slots = experts + (1 if shared else 0)
    return MoEWeights(
        router=(torch.randn(experts, hidden, device=device) / hidden**0.5).to(dtype),
        # Negative biases too: excluded groups must be masked with -inf, not 0.
        expert_bias=torch.randn(experts, device=device) * 0.5,
        w13=(torch.randn(slots, 2 * inter, hidden, device=device) / hidden**0.5).to(dtype),
        w2=(torch.randn(slots, hidden, inter, device=device) / inter**0.5).to(dtype),
        shared_slot=experts if shared else None,
        swiglu_limit=limits[0],
        shared_swiglu_limit=limits[1],
    )


@pytest.mark.parametrize("rows", [1, 3])
def test_route_topk_matches_naive(device, rows):
    logits = torch.randn(rows, 24, device=device)
    bias = torch.randn(24, device=device) * 0.5
    rule = RoutingRule(top_k=4, n_group=4, topk_group=2, scale=1.5)
    ids, gains = route_topk(logits, bias, rule)
    want_ids, want_gains = route_naive(logits, bias, rule)
    assert torch.equal(ids.long().cpu(), want_ids.cpu()), f"ids {ids.tolist()} != {want_ids.tolist()}"
    assert_close("routing weights", gains, want_gains, atol=1e-6, rtol=1e-5)


def test_route_topk_masks_groups_with_minus_inf(device):
    """All-negative biases: zero-masking would let an excluded group win; -inf must not."""
    logits = torch.zeros(1, 8, device=device)
    bias = torch.tensor([-3.0, -3.0, -9.0, -9.0, -1.0, -1.0, -9.0, -9.0], device=device)
    ids, _ = route_topk(logits, bias, RoutingRule(top_k=3, n_group=4, topk_group=2, scale=1.0))
    # Kept groups 2 and 0 (top-2 sums -1 and -5); inside them 4 and 5 lead, then the 0/1 tie goes to 0.
    assert ids[0].tolist() == [4, 5, 0], f"picked {ids.tolist()}, want [4, 5, 0]"


@pytest.mark.parametrize(
    ("rows", "hidden", "inter", "dtype", "shared", "limits"),
    [
        (1, 40, 24, torch.float32, True, (0.6, 0.8)),
        (2, 33, 20, torch.bfloat16, False, (0.0, 0.0)),
        (5, 40, 24, torch.float32, True, (0.6, 0.8)),
    ],
)
def test_moe_layers_match_naive(device, rows, hidden, inter, dtype, shared, limits):
    weights = make_weights(12, hidden, inter, device, dtype, shared, limits)
    x = torch.randn(rows, hidden, device=device).to(dtype)
    want = moe_naive(x, weights, SMALL_RULE)
    tol = 1e-4 if dtype == torch.float32 else 2e-3
    assert_close("moe unfused", moe_unfused(x, weights, SMALL_RULE), want, atol=tol, rtol=tol)
    # serial_route_max_rows 1: several rows take the parallel routing launch; 16: the router launch's
    # last program routes every row (the one-row decode path, forced here for several rows too).
    for serial_max in (1, 16):
        config = FusedMoEConfig(serial_route_max_rows=serial_max)
        workspace = MoEWorkspace.allocate(rows, weights, SMALL_RULE)
        for call in range(2):  # the second call checks the ticket counter was re-armed
            out = poison(torch.empty(rows, hidden, device=device))
            moe_fused(x, weights, SMALL_RULE, workspace=workspace, config=config, out=out)
            label = f"moe fused (serial <= {serial_max} rows) call {call}"
            assert_close(label, out, want, atol=tol, rtol=tol)
        assert int(workspace.counter.item()) == 0


def test_moe_rejects_bad_weights():
    weights = make_weights(12, 16, 8, torch.device("cpu"), torch.float32)
    weights.w2 = weights.w2[:, :, :4].contiguous()
    with pytest.raises(KernelInputError, match="w2 must have shape"):
        moe_fused(torch.randn(1, 16), weights, SMALL_RULE)
    with pytest.raises(KernelInputError, match="n_group"):
        moe_unfused(
            torch.randn(1, 16), make_weights(10, 16, 8, torch.device("cpu"), torch.float32), SMALL_RULE
        )


# fast_topk (kernels/moe/topk_keys.py): same routing from packed keys. Shapes: experts per group not a
# power of two (6, 3, 12: padded member axis), groups not a power of two (3, 5), the Flash rule's 8/4/8.
FAST_TOPK_CASES = [
    (24, RoutingRule(top_k=4, n_group=4, topk_group=2, scale=1.5)),
    (12, SMALL_RULE),
    (15, RoutingRule(top_k=3, n_group=5, topk_group=3, scale=1.0)),
    (96, RoutingRule(top_k=8, n_group=8, topk_group=4, scale=2.5)),
    (36, RoutingRule(top_k=5, n_group=3, topk_group=1, scale=2.5, renormalize=False)),
]


@pytest.mark.parametrize(("experts", "rule"), FAST_TOPK_CASES, ids=lambda case: str(case))
def test_fast_topk_routes_like_naive_and_like_the_scan(device, experts, rule):
    rows = 7
    logits = torch.randn(rows, experts, device=device)
    bias = torch.randn(experts, device=device) * 0.5
    want_ids, want_gains = route_naive(logits, bias, rule)
    scan_ids, scan_gains = route_topk(logits, bias, rule)
    fast_ids, fast_gains = route_topk(logits, bias, rule, fast_topk=True)
    assert torch.equal(fast_ids.long().cpu(), want_ids.cpu()), (
        f"ids {fast_ids.tolist()} != {want_ids.tolist()}"
    )
    assert torch.equal(fast_ids, scan_ids), "fast_topk picked other experts than the scan routine"
    assert_close("fast_topk weights vs naive", fast_gains, want_gains, atol=1e-6, rtol=1e-5)
    # Same fp32 scores; only the renormalising sum's order may differ (1 ulp of the gain).
    assert_close("fast_topk weights vs scan", fast_gains, scan_gains, atol=0.0, rtol=3e-7)


def test_fast_topk_breaks_ties_like_the_scan(device):
    """Equal scores everywhere: lowest group indices, then lowest expert ids, in order; excluded groups
    never win even though every biased score is negative."""
    logits = torch.zeros(2, 8, device=device)
    bias = torch.tensor([-3.0, -3.0, -9.0, -9.0, -1.0, -1.0, -9.0, -9.0], device=device)
    rule = RoutingRule(top_k=3, n_group=4, topk_group=2, scale=1.0)
    ids, gains = route_topk(logits, bias, rule, fast_topk=True)
    assert ids.tolist() == [[4, 5, 0], [4, 5, 0]], f"picked {ids.tolist()}, want [4, 5, 0] per row"
    flat_ids, _ = route_topk(logits, torch.zeros_like(bias), rule, fast_topk=True)
    assert flat_ids[0].tolist() == [0, 1, 2], f"all tied: picked {flat_ids[0].tolist()}, want [0, 1, 2]"
    assert_close("tied weights", gains, torch.full_like(gains, 1.0 / 3.0), atol=1e-7, rtol=0.0)


def test_fast_topk_orders_negative_zero_and_infinite_logits(device):
    """The packed key must order negative scores, -inf and +inf like floats (sign-magnitude flip)."""
    logits = torch.tensor([[-50.0, -1.0, float("-inf"), 3.0, 0.5, float("inf"), -0.0, 2.0]], device=device)
    bias = torch.tensor([0.0, -2.0, 0.0, -1.5, 0.0, -3.0, 0.0, 0.0], device=device)
    rule = RoutingRule(top_k=4, n_group=2, topk_group=2, scale=1.0, renormalize=False)
    fast_ids, fast_gains = route_topk(logits, bias, rule, fast_topk=True)
    want_ids, want_gains = route_naive(logits, bias, rule)
    assert fast_ids[0].tolist() == want_ids[0].tolist(), f"{fast_ids.tolist()} != {want_ids.tolist()}"
    assert_close("weights", fast_gains, want_gains, atol=1e-7, rtol=1e-6)


@pytest.mark.parametrize(("rows", "serial_max"), [(1, 1), (3, 1), (3, 16)])
@pytest.mark.parametrize(("fast_topk", "early_shared"), [(True, False), (False, True), (True, True)])
def test_moe_layers_with_new_switches_match_naive(device, rows, serial_max, fast_topk, early_shared):
    """fast_topk and early_shared (with PDL where the device has it: on the CPU it resolves to off)."""
    weights = make_weights(15, 37, 20, device, torch.float32, shared=True, limits=(0.6, 0.8))
    rule = RoutingRule(top_k=3, n_group=5, topk_group=2, scale=2.5)
    x = torch.randn(rows, 37, device=device)
    want = moe_naive(x, weights, rule)
    if fast_topk and not early_shared:
        got = moe_unfused(x, weights, rule, use_pdl=True, fast_topk=True)
        assert_close("moe unfused fast_topk", got, want, atol=1e-4, rtol=1e-4)
    config = FusedMoEConfig(serial_route_max_rows=serial_max, fast_topk=fast_topk, early_shared=early_shared)
    workspace = MoEWorkspace.allocate(rows, weights, rule)
    for call in range(2):
        out = poison(torch.empty(rows, 37, device=device))
        workspace.ids.fill_(-1)
        moe_fused(x, weights, rule, use_pdl=True, workspace=workspace, config=config, out=out)
        assert_close(f"moe fused {config} call {call}", out, want, atol=1e-4, rtol=1e-4)
    assert int(workspace.counter.item()) == 0


def test_early_shared_without_a_shared_expert_matches_naive(device):
    weights = make_weights(12, 33, 20, device, torch.bfloat16, shared=False)
    x = torch.randn(1, 33, device=device).to(torch.bfloat16)
    out = poison(torch.empty(1, 33, device=device))
    moe_fused(x, weights, SMALL_RULE, use_pdl=True, config=FusedMoEConfig(early_shared=True), out=out)
    assert_close(
        "moe fused early_shared, no shared slot", out, moe_naive(x, weights, SMALL_RULE), atol=2e-3, rtol=2e-3
    )
