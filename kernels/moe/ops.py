"""MoE launchers and public entry points: routing alone, unfused layer (4 launches), fused layer (2 for
one row; a verify window of several rows routes them in parallel, see FusedMoEConfig)."""

from __future__ import annotations

import torch
from bubblescope.kernels._pdl import resolve_pdl
from bubblescope.kernels.gemv.checks import (
    KernelInputError,
    check_dtype,
    check_powers_of_two,
    check_same_device,
    check_shape,
)
from bubblescope.kernels.gemv.ops import check_gemv_inputs
from bubblescope.kernels.moe.launch import (
    launch_fused_moe,
    launch_router_and_routing,
    launch_routing,
    launch_swiglu_experts,
    tma_aligned,
    union_applies,
)
from bubblescope.kernels.moe.params import (
    ROUTING_SITES,
    FusedMoEConfig,
    MoEWeights,
    MoEWorkspace,
    RoutingRule,
)
from bubblescope.kernels.rmsnorm.epilogue import NormEpilogue, check_norm_epilogue

OP = "moe"
MAX_EXPERTS = 4096


def check_rule(rule: RoutingRule, experts: int) -> None:
    if experts > MAX_EXPERTS or experts % rule.n_group:
        raise KernelInputError(
            f"{OP}: E={experts} must be <= {MAX_EXPERTS} and split into n_group={rule.n_group}"
        )
    per_group = experts // rule.n_group
    if per_group < 2 or not 1 <= rule.topk_group <= rule.n_group:
        raise KernelInputError(
            f"{OP}: need >= 2 experts per group and 1 <= topk_group <= n_group; got {rule}"
        )
    if not 1 <= rule.top_k <= rule.topk_group * per_group or rule.top_k > 32:
        raise KernelInputError(f"{OP}: top_k={rule.top_k} must be in 1..min(32, experts in kept groups)")


def route_topk(
    logits: torch.Tensor,
    expert_bias: torch.Tensor,
    rule: RoutingRule,
    use_pdl: bool = False,
    fast_topk: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Grouped top-k routing on device (one launch).

    Args:
        logits: `[M, E]` fp32 router logits (contiguous).
        expert_bias: `[E]` selection bias.
        rule: RoutingRule.
        use_pdl: Programmatic Dependent Launch where supported.
        fast_topk: the packed-key routine (topk_keys.py); same ids and weights.
    Returns:
        (ids `[M, top_k]` int32 in selection order, weights `[M, top_k]` fp32).
    """
    if logits.dim() != 2 or not logits.is_contiguous():
        raise KernelInputError(f"{OP}: logits must be a contiguous [M, E]; got {list(logits.shape)}")
    check_dtype("logits", logits, (torch.float32,), OP)
    check_shape("expert_bias", expert_bias, (logits.shape[1],), OP)
    check_same_device(OP, logits=logits, expert_bias=expert_bias)
    check_rule(rule, logits.shape[1])
    ids = torch.empty(logits.shape[0], rule.top_k, dtype=torch.int32, device=logits.device)
    gains = torch.empty(logits.shape[0], rule.top_k, dtype=torch.float32, device=logits.device)
    launch_routing(logits, expert_bias, ids, gains, rule, resolve_pdl(use_pdl, logits.device), fast_topk)
    return ids, gains


def check_moe_inputs(
    x: torch.Tensor, weights: MoEWeights, rule: RoutingRule, workspace: MoEWorkspace | None
) -> None:
    """Validate x `[M, D]` against the stacked weights and the routing rule."""
    check_gemv_inputs(x, weights.router, op=OP)
    rows, hidden = x.shape
    experts = weights.router.shape[0]
    if weights.w13.dim() != 3 or weights.w2.dim() != 3:
        raise KernelInputError(f"{OP}: w13 must be [S, 2I, D] and w2 [S, D, I]")
    slots_total, two_inter, _ = weights.w13.shape
    check_shape("w13", weights.w13, (slots_total, two_inter, hidden), OP)
    check_shape("w2", weights.w2, (slots_total, hidden, two_inter // 2), OP)
    check_shape("expert_bias", weights.expert_bias, (experts,), OP)
    if two_inter % 2 or slots_total < experts:
        raise KernelInputError(
            f"{OP}: w13 needs an even 2I and >= E={experts} slots; got {list(weights.w13.shape)}"
        )
    if weights.shared_slot is not None and not 0 <= weights.shared_slot < slots_total:
        raise KernelInputError(
            f"{OP}: shared_slot {weights.shared_slot} is not a slot of w13 (0..{slots_total - 1})"
        )
    if not (weights.w13.is_contiguous() and weights.w2.is_contiguous() and x.is_contiguous()):
        raise KernelInputError(f"{OP}: x, w13 and w2 must be contiguous")
    check_same_device(
        OP, x=x, router=weights.router, bias=weights.expert_bias, w13=weights.w13, w2=weights.w2
    )
    check_rule(rule, experts)
    if workspace is not None:
        check_shape("workspace.logits", workspace.logits, (rows, experts), OP)
        check_shape("workspace.ids", workspace.ids, (rows, rule.top_k), OP)
        check_shape("workspace.weights", workspace.weights, (rows, rule.top_k), OP)
        slots = rule.top_k + (weights.shared_slot is not None)
        check_shape("workspace.hidden", workspace.hidden, (rows, slots, two_inter // 2), OP)
        check_shape("workspace.counter", workspace.counter, (1,), OP)
        check_dtype("workspace.ids", workspace.ids, (torch.int32,), OP)
        check_dtype("workspace.counter", workspace.counter, (torch.int32,), OP)


def moe_unfused(
    x: torch.Tensor,
    weights: MoEWeights,
    rule: RoutingRule,
    use_pdl: bool = False,
    workspace: MoEWorkspace | None = None,
    fast_topk: bool = False,
    epilogue: NormEpilogue | None = None,
) -> torch.Tensor:
    """MoE layer in 4 launches: router GEMV (fp32 math on the router's dtype), routing, gate/up +
    SwiGLU of every (token, slot, I-slice), down + weighted sum per output slice (no atomics).

    Args:
        x: `[M, D]` normed activations, M in 1..16.
        weights: MoEWeights (router `[E, D]`, w13 `[S, 2I, D]`, w2 `[S, D, I]`, optional shared slot).
        rule: RoutingRule.
        use_pdl: Programmatic Dependent Launch where supported.
        workspace: reusable buffers; default allocated per call.
        fast_topk: route with the packed-key routine (topk_keys.py); same ids and weights.
        epilogue: the next residual add + RMSNorm, done by the down launch's last program
            (`norm_epilogue`, kernels/rmsnorm/epilogue.py).
    Returns:
        `[M, D]` fp32: sum_i w_i E_i(x) + E_shared(x) (with `epilogue`, also added into its residual,
        and the normed rows in `epilogue.out`).
    """
    check_moe_inputs(x, weights, rule, workspace)
    if epilogue is not None:
        check_norm_epilogue(epilogue, x.shape[0], x.shape[1], x.device, OP)
    ws = workspace or MoEWorkspace.allocate(x.shape[0], weights, rule)
    pdl = resolve_pdl(use_pdl, x.device)
    rows, hidden = x.shape
    launch_router_and_routing(x, weights, rule, ws, pdl, fast_topk)
    out = torch.empty(rows, hidden, dtype=torch.float32, device=x.device)
    launch_swiglu_experts(x, weights, rule, ws, out, pdl, epilogue)
    return out


def check_tma_experts(weights: MoEWeights, cfg: FusedMoEConfig) -> None:
    """What the TMA experts launch needs: descriptors over 16-byte aligned rows, and (tma_dot) tiles
    of at least 16 on every side of a dot."""
    if not tma_aligned(weights):
        raise KernelInputError(
            f"{OP}: tma_experts needs contiguous, 16-byte aligned w13 / w2 rows "
            f"(hidden and inter times {weights.w13.element_size()} bytes a multiple of 16)"
        )
    if min(cfg.tma_block_i, cfg.block_d) * weights.w13.element_size() < 16:
        raise KernelInputError(f"{OP}: tma_experts needs tiles at least 16 bytes wide (tma_block_i, block_d)")
    if cfg.tma_dot and min(cfg.tma_block_i, cfg.block_d, cfg.block_dout) < 16:
        raise KernelInputError(f"{OP}: tma_dot needs tma_block_i, block_d and block_dout >= 16")


def moe_fused(
    x: torch.Tensor,
    weights: MoEWeights,
    rule: RoutingRule,
    use_pdl: bool = False,
    workspace: MoEWorkspace | None = None,
    config: FusedMoEConfig | None = None,
    out: torch.Tensor | None = None,
    epilogue: NormEpilogue | None = None,
) -> torch.Tensor:
    """MoE layer in 2 launches (why two: see fused_kernel.py): [router GEMV + routing by the last
    program + zero y], then [every (token, slot, I-slice): gate/up, SwiGLU, split-K down, atomic add].
    Above `config.serial_route_max_rows` rows the first launch becomes three (zero y, router GEMV,
    one routing program per row), so a verify window's rows are not routed one after another.

    Args: as `moe_unfused` (`epilogue` in the experts launch), plus `config` (tiles) and `out`, an
        optional `[M, D]` fp32 accumulator.
    Returns:
        `[M, D]` fp32 (summation order of the atomics varies: results match to fp32 rounding, not bitwise).
    """
    check_moe_inputs(x, weights, rule, workspace)
    ws = workspace or MoEWorkspace.allocate(x.shape[0], weights, rule)
    cfg = config or FusedMoEConfig()
    check_powers_of_two(
        OP,
        cfg,
        ("block_i", "block_d", "block_dout", "router_block_n", "deep_block_i", "tma_block_i"),
    )
    if cfg.tma_experts:
        check_tma_experts(weights, cfg)
    if cfg.routing_site not in ROUTING_SITES:
        raise KernelInputError(
            f"{OP}: routing_site {cfg.routing_site!r} is not one of {', '.join(ROUTING_SITES)}"
        )
    pdl = resolve_pdl(use_pdl, x.device)
    rows, hidden = x.shape
    if out is None:
        out = torch.empty(rows, hidden, dtype=torch.float32, device=x.device)
    check_shape("out", out, (rows, hidden), OP)
    check_dtype("out", out, (torch.float32,), OP)
    if epilogue is not None:
        check_norm_epilogue(epilogue, rows, hidden, x.device, OP)
        if union_applies(x, weights, cfg):
            raise KernelInputError(f"{OP}: the norm epilogue is not built into the union experts launch")
    launch_fused_moe(x, weights, rule, ws, cfg, out, pdl, epilogue)
    return out
