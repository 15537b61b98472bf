"""bench_routing.py's cases for issue 27's question: where should the decode MoE layer route?

One layer on the all-on tiles (fast_topk, early_shared, deep_experts), same weights and tokens for
every case, so the ratios are same-run ratios:
- the router launch alone, with its ticket and routing program vs logits only (what the ticket and
  the routing program add to that launch);
- the layer with each FusedMoEConfig.routing_site: "router_launch" (today: the last program by ticket
  routes), "experts" (`routing_in_experts`: every experts program routes its row after its wait),
  "own_launch" (a routing launch of its own between the router GEMV and the experts, under PDL);
- the layer with routing precomputed (router launch without routing, experts reading ids a previous
  call wrote): what the layer would take if routing cost nothing, the bound of any routing design.

`shape` is (experts, hidden, inter): ling3-flash-e256's on the GPU, a tiny one for `--dry-run` on the
CPU interpreter (correctness only). Each case returns {bytes, ok, err, calls(pdl)} as bench_routing's.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import torch
from bench_kernels import BF16, max_rel_diff
from bubblescope.kernels._pdl import resolve_pdl
from bubblescope.kernels.moe import (
    FusedMoEConfig,
    MoEWeights,
    MoEWorkspace,
    RoutingRule,
    moe_naive,
    route_naive,
)
from bubblescope.kernels.moe.launch import launch_experts, launch_router_route
from bubblescope.kernels.moe.ops import moe_fused
from bubblescope.kernels.moe.params import ROUTING_SITES

E256_SHAPE = (256, 2560, 768)
DRY_SHAPE = (16, 64, 32)
RULE = RoutingRule(top_k=8, n_group=8, topk_group=4, scale=2.5)
# Different tokens route to different experts, so consecutive calls in the graph do not hit L2.
TOKENS = 16


def site_config(shape: tuple[int, int, int], site: str) -> FusedMoEConfig:
    """The all-on decode tiles at e256; tiles that fit the tiny shape (and few interpreter programs)."""
    if shape == E256_SHAPE:
        return FusedMoEConfig(fast_topk=True, early_shared=True, deep_experts=True, routing_site=site)
    return FusedMoEConfig(
        fast_topk=True,
        early_shared=True,
        deep_experts=True,
        routing_site=site,
        router_block_n=16,
        block_i=16,
        deep_block_i=16,
        block_d=32,
        block_dout=32,
    )


@lru_cache(maxsize=1)
def layer(shape: tuple[int, int, int], device: str) -> tuple[MoEWeights, tuple[torch.Tensor, ...]]:
    """One MoE layer (bf16 gate and experts, shared expert, the Flash clamps) and TOKENS rows, built
    once per run so every case streams the same bytes."""
    experts, hidden, inter = shape
    torch.manual_seed(0)
    weights = MoEWeights(
        router=(torch.randn(experts, hidden, device=device) / hidden**0.5).to(BF16),
        expert_bias=torch.randn(experts, device=device) * 0.01,
        w13=torch.randn(experts + 1, 2 * inter, hidden, device=device, dtype=BF16) / hidden**0.5,
        w2=torch.randn(experts + 1, hidden, inter, device=device, dtype=BF16) / inter**0.5,
        shared_slot=experts,
        swiglu_limit=4.0,
        shared_swiglu_limit=5.0,
    )
    tokens = tuple(torch.randn(1, hidden, device=device, dtype=BF16) for _ in range(TOKENS))
    return weights, tokens


def check_pdl(device: str) -> bool:
    """PDL for the correctness call where the device runs it (as the timed calls do)."""
    return resolve_pdl(True, torch.device(device))


def layer_bytes(shape: tuple[int, int, int]) -> int:
    """HBM bytes of one decode layer: the bf16 router and 8 routed + 1 shared bf16 experts."""
    experts, hidden, inter = shape
    return experts * hidden * 2 + (RULE.top_k + 1) * 3 * hidden * inter * 2


def case_router_alone(shape: tuple[int, int, int], device: str, route: bool) -> dict:
    """The router launch alone: with its ticket and routing program (route) or writing logits only."""
    weights, tokens = layer(shape, device)
    config = site_config(shape, "router_launch")
    workspace = MoEWorkspace.allocate(1, weights, RULE)
    out = torch.empty(1, shape[1], device=device)
    # Checked with PDL where the device has it: the variant the timing runs (and one compile fewer).
    launch_router_route(tokens[0], weights, RULE, workspace, config, out, check_pdl(device), route=route)
    logits = workspace.logits.clone()
    err = max_rel_diff(logits, tokens[0].float() @ weights.router.float().T)
    ok = err < 1e-3 and bool((out == 0).all())
    if route:
        want_ids, _ = route_naive(logits, weights.expert_bias, RULE)
        ok = ok and bool(torch.equal(workspace.ids.long(), want_ids))

    def calls(pdl: bool) -> list[Callable[[], None]]:
        return [
            lambda x=x: launch_router_route(x, weights, RULE, workspace, config, out, pdl, route=route)
            for x in tokens
        ]

    return dict(bytes=shape[0] * shape[1] * 2, ok=ok, err=err, calls=calls)


def case_layer(
    shape: tuple[int, int, int], device: str, site: str, config: FusedMoEConfig | None = None
) -> dict:
    """The whole layer (moe_fused) with this routing site (and config: site_config's by default);
    checked against moe_naive and route_naive."""
    weights, tokens = layer(shape, device)
    config = config or site_config(shape, site)
    workspace = MoEWorkspace.allocate(1, weights, RULE)
    out = torch.empty(1, shape[1], device=device)
    moe_fused(tokens[0], weights, RULE, use_pdl=True, workspace=workspace, config=config, out=out)
    err = max_rel_diff(out, moe_naive(tokens[0], weights, RULE))
    want_ids, _ = route_naive(workspace.logits, weights.expert_bias, RULE)
    ok = err < 1e-3 and bool(torch.equal(workspace.ids.long(), want_ids))

    def calls(pdl: bool) -> list[Callable[[], None]]:
        return [
            lambda x=x: moe_fused(x, weights, RULE, use_pdl=pdl, workspace=workspace, config=config, out=out)
            for x in tokens
        ]

    return dict(bytes=layer_bytes(shape), ok=ok, err=err, calls=calls)


def case_layer_routing_free(shape: tuple[int, int, int], device: str) -> dict:
    """The layer with routing off the chain entirely: each token's ids routed beforehand into its own
    workspace; the timed calls run the router launch without routing, then the experts reading them."""
    weights, tokens = layer(shape, device)
    config = site_config(shape, "router_launch")
    workspaces = [MoEWorkspace.allocate(1, weights, RULE) for _ in tokens]
    outs = [torch.empty(1, shape[1], device=device) for _ in tokens]
    for x, workspace, out in zip(tokens, workspaces, outs, strict=True):
        moe_fused(x, weights, RULE, use_pdl=True, workspace=workspace, config=config, out=out)

    def run(index: int, pdl: bool) -> None:
        x, workspace, out = tokens[index], workspaces[index], outs[index]
        launch_router_route(x, weights, RULE, workspace, config, out, pdl, route=False)
        launch_experts(x, weights, RULE, workspace, config, out, pdl, route_here=False)

    run(0, check_pdl(device))
    err = max_rel_diff(outs[0], moe_naive(tokens[0], weights, RULE))
    return dict(
        bytes=layer_bytes(shape),
        ok=err < 1e-3,
        err=err,
        calls=lambda pdl: [lambda i=i: run(i, pdl) for i in range(len(tokens))],
    )


def routing_site_cases(shape: tuple[int, int, int], device: str) -> dict[str, Callable[[], dict]]:
    """Name -> case builder, every name starting "route sites <tag>" (bench_routing --only selects them)."""
    tag = "e256" if shape == E256_SHAPE else "tiny"
    cases: dict[str, Callable[[], dict]] = {
        f"route sites {tag} router launch, ticket + routing": lambda: case_router_alone(shape, device, True),
        f"route sites {tag} router launch, logits only": lambda: case_router_alone(shape, device, False),
    }
    for site in ROUTING_SITES:
        cases[f"route sites {tag} layer, routing_site={site}"] = lambda s=site: case_layer(shape, device, s)
    cases[f"route sites {tag} layer, routing precomputed (bound)"] = lambda: case_layer_routing_free(
        shape, device
    )
    return cases
