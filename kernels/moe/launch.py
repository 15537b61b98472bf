"""MoE launchers: allocate nothing, validate nothing; pick tiles and grids for validated inputs."""

from __future__ import annotations

from dataclasses import replace

import torch
import triton
from bubblescope.kernels._pdl import is_interpreting, launch_options
from bubblescope.kernels.gemv.ops import GemvConfig, choose_config, launch_gemv, rows_block
from bubblescope.kernels.moe.experts_kernel import down_kernel, gate_up_kernel
from bubblescope.kernels.moe.fused_kernel import fused_experts_kernel, router_route_kernel
from bubblescope.kernels.moe.paired_kernel import deep_experts_kernel
from bubblescope.kernels.moe.params import FusedMoEConfig, MoEWeights, MoEWorkspace, RoutingRule
from bubblescope.kernels.moe.routing_kernel import routing_kernel
from bubblescope.kernels.moe.tma_kernel import tma_experts_kernel
from bubblescope.kernels.moe.union_compact_kernel import union_compact_kernel
from bubblescope.kernels.moe.union_kernel import union_experts_kernel
from bubblescope.kernels.rmsnorm.epilogue import NormEpilogue
from triton.tools.tensor_descriptor import TensorDescriptor


def norm_epilogue_arguments(epilogue: NormEpilogue | None, out: torch.Tensor) -> dict[str, object]:
    """The experts launches' NORM_EPILOGUE keywords; off, the pointers are `out` (never read): the
    launch signature stays the same whether the epilogue is on or not."""
    if epilogue is None:
        return dict(
            NORM_EPILOGUE=False,
            p_res=out,
            p_norm_w=out,
            p_normed=out,
            p_norm_counter=out,
            eps=0.0,
            NORM_CHUNK=1,
            NORM_CHUNKS=1,
        )
    chunk, chunks = epilogue.chunks()
    return dict(
        NORM_EPILOGUE=True,
        p_res=epilogue.residual,
        p_norm_w=epilogue.weight,
        p_normed=epilogue.out,
        p_norm_counter=epilogue.counter,
        eps=epilogue.eps,
        NORM_CHUNK=chunk,
        NORM_CHUNKS=chunks,
    )


# The union kernel's row tile: tl.dot needs >= 16 rows, and the MoE kernels take at most 16 (verify_moe).
UNION_BLOCK_M = 16


def routing_constants(experts: int, rule: RoutingRule, fast_topk: bool = False) -> dict[str, object]:
    """Routing constexprs; fast_topk picks the packed-key routine (topk_keys.py)."""
    return dict(
        TOP_K=rule.top_k,
        N_GROUP=rule.n_group,
        TOPK_GROUP=rule.topk_group,
        RENORMALIZE=rule.renormalize,
        BLOCK_E=triton.next_power_of_2(experts),
        BLOCK_G=triton.next_power_of_2(rule.n_group),
        BLOCK_TOPK=triton.next_power_of_2(rule.top_k),
        FAST_TOPK=fast_topk,
        BLOCK_PG=triton.next_power_of_2(experts // rule.n_group),
    )


def launch_routing(
    logits: torch.Tensor,
    expert_bias: torch.Tensor,
    ids: torch.Tensor,
    gains: torch.Tensor,
    rule: RoutingRule,
    pdl: bool,
    fast_topk: bool = False,
) -> None:
    """Grid (M,) launch of routing_kernel."""
    routing_kernel[(logits.shape[0],)](
        logits,
        expert_bias,
        ids,
        gains,
        logits.shape[1],
        rule.scale,
        USE_PDL=pdl,
        num_warps=4,
        **routing_constants(logits.shape[1], rule, fast_topk),
        **launch_options(pdl),
    )


def launch_router_and_routing(
    x: torch.Tensor,
    weights: MoEWeights,
    rule: RoutingRule,
    ws: MoEWorkspace,
    pdl: bool,
    fast_topk: bool = False,
    cfg: FusedMoEConfig | None = None,
) -> None:
    """Router GEMV into ws.logits (tuned for the row count, cfg's window_router_* on top), then one
    routing program per row."""
    launch_gemv(x, weights.router, ws.logits, window_router_config(x.shape[0], weights.router, cfg), pdl)
    launch_routing(ws.logits, weights.expert_bias, ws.ids, ws.weights, rule, pdl, fast_topk)


def window_router_config(rows: int, router: torch.Tensor, cfg: FusedMoEConfig | None) -> GemvConfig:
    """The router GEMV's tiles for a window of several rows: choose_config's, with cfg's
    window_router_block_k / window_router_warps / window_router_prefetch where set (non-zero)."""
    base = choose_config(rows, *router.shape)
    if cfg is None:
        return base
    return replace(
        base,
        block_k=cfg.window_router_block_k or base.block_k,
        num_warps=cfg.window_router_warps or base.num_warps,
        l2_prefetch=cfg.window_router_prefetch,
    )


def launch_swiglu_experts(
    x: torch.Tensor,
    weights: MoEWeights,
    rule: RoutingRule,
    ws: MoEWorkspace,
    out: torch.Tensor,
    pdl: bool,
    epilogue: NormEpilogue | None = None,
) -> None:
    """Unfused expert launches: gate/up + SwiGLU into ws.hidden, then down + weighted sum into out (and,
    with `epilogue`, the next add + RMSNorm in the down launch's last program)."""
    rows, hidden = x.shape
    inter = weights.w2.shape[2]
    slots = rule.top_k + (weights.shared_slot is not None)
    shared = weights.shared_slot if weights.shared_slot is not None else 0
    block_i = min(32, triton.next_power_of_2(inter))
    gate_up_kernel[(rows * slots, triton.cdiv(inter, block_i))](
        x,
        ws.ids,
        ws.weights,
        weights.w13,
        ws.hidden,
        x.stride(0),
        weights.w13.stride(0),
        hidden,
        inter,
        shared,
        float(weights.swiglu_limit),
        float(weights.shared_swiglu_limit),
        TOP_K=rule.top_k,
        SLOTS=slots,
        BLOCK_I=block_i,
        BLOCK_D=min(128, triton.next_power_of_2(hidden)),
        USE_PDL=pdl,
        num_warps=4,
        **launch_options(pdl),
    )
    block_dout = min(32, triton.next_power_of_2(hidden))
    down_kernel[(rows, triton.cdiv(hidden, block_dout))](
        ws.hidden,
        ws.ids,
        ws.weights,
        weights.w2,
        out,
        weights.w2.stride(0),
        out.stride(0),
        hidden,
        inter,
        shared,
        TOP_K=rule.top_k,
        SLOTS=slots,
        BLOCK_DOUT=block_dout,
        BLOCK_I=min(256, triton.next_power_of_2(inter)),
        USE_PDL=pdl,
        num_warps=4,
        **norm_epilogue_arguments(epilogue, out),
        **launch_options(pdl),
    )


def launch_router_route(
    x: torch.Tensor,
    weights: MoEWeights,
    rule: RoutingRule,
    ws: MoEWorkspace,
    cfg: FusedMoEConfig,
    out: torch.Tensor,
    pdl: bool,
    route: bool = True,
) -> None:
    """One launch: router logits, out zeroed, and (route) the last program routing every row in turn."""
    rows, hidden = x.shape
    experts = weights.router.shape[0]
    router_block_n = cfg.router_block_n if rows == 1 else max(16, cfg.router_block_n)
    router_route_kernel[(triton.cdiv(experts, router_block_n),)](
        x,
        weights.router,
        weights.expert_bias,
        ws.logits,
        ws.ids,
        ws.weights,
        ws.counter,
        out,
        rows,
        experts,
        hidden,
        x.stride(0),
        weights.router.stride(0),
        rule.scale,
        BLOCK_M=rows_block(rows),
        BLOCK_N=router_block_n,
        BLOCK_K=min(512, triton.next_power_of_2(hidden)),
        BLOCK_Z=1024,
        USE_PDL=pdl,
        DOT_FP32=is_interpreting(),
        ROUTE=route,
        num_warps=cfg.router_num_warps or cfg.num_warps,
        **routing_constants(experts, rule, cfg.fast_topk),
        **launch_options(pdl),
    )


def launch_fused_moe(
    x: torch.Tensor,
    weights: MoEWeights,
    rule: RoutingRule,
    ws: MoEWorkspace,
    cfg: FusedMoEConfig,
    out: torch.Tensor,
    pdl: bool,
    epilogue: NormEpilogue | None = None,
) -> None:
    """Router + routing (+ zero out), then the experts accumulating into out: two launches up to
    cfg.serial_route_max_rows rows, four above (zero, router GEMV, parallel routing, experts).
    Up to that row count cfg.routing_site says who routes (params.py): the router launch's last
    program, the experts programs themselves, or a routing launch of its own (three launches).
    With cfg.expert_union and several rows the experts launch is union_experts_kernel. `epilogue`: the
    experts launch ends with the next add + RMSNorm (not built into the union launch: moe_fused refuses)."""
    rows = x.shape[0]
    site = serial_routing_site(x, weights, cfg)
    if rows > cfg.serial_route_max_rows:
        out.zero_()
        launch_router_and_routing(x, weights, rule, ws, pdl, cfg.fast_topk, cfg)
    else:
        launch_router_route(x, weights, rule, ws, cfg, out, pdl, route=site == "router_launch")
        if site == "own_launch":
            launch_routing(ws.logits, weights.expert_bias, ws.ids, ws.weights, rule, pdl, cfg.fast_topk)
    if union_applies(x, weights, cfg):
        launch_union_experts(x, weights, rule, ws, cfg, out, pdl)
        return
    launch_experts(x, weights, rule, ws, cfg, out, pdl, route_here=site == "experts", epilogue=epilogue)


def launch_experts(
    x: torch.Tensor,
    weights: MoEWeights,
    rule: RoutingRule,
    ws: MoEWorkspace,
    cfg: FusedMoEConfig,
    out: torch.Tensor,
    pdl: bool,
    route_here: bool,
    epilogue: NormEpilogue | None = None,
) -> None:
    """The experts launch of the fused layer (fused or deep kernel) into the zeroed out: slots read
    ws.ids / ws.weights, or (route_here) route from ws.logits themselves; `epilogue` as launch_fused_moe."""
    if cfg.tma_experts:
        launch_tma_experts(x, weights, rule, ws, cfg, out, pdl, route_here, epilogue)
        return
    rows, hidden = x.shape
    inter = weights.w2.shape[2]
    kernel, extra, block_i = fused_experts_kernel, dict(ACC_2D=cfg.acc_2d), cfg.block_i
    if cfg.deep_experts:
        kernel, extra, block_i = deep_experts_kernel, dict(STAGES=cfg.deep_stages), cfg.deep_block_i
    slots = rule.top_k + (weights.shared_slot is not None)
    kernel[(rows * slots, triton.cdiv(inter, block_i))](
        x,
        ws.ids,
        ws.weights,
        weights.w13,
        weights.w2,
        out,
        x.stride(0),
        weights.w13.stride(0),
        weights.w2.stride(0),
        *experts_slot_arguments(weights, rule, ws),
        BLOCK_I=block_i,
        num_warps=cfg.num_warps,
        **experts_constants(weights, rule, cfg, out, pdl, route_here, epilogue),
        **extra,
    )


def experts_slot_arguments(weights: MoEWeights, rule: RoutingRule, ws: MoEWorkspace) -> tuple:
    """The positional arguments every experts kernel (fused, deep, TMA) takes after its weights and
    strides: D, I, the shared slot, the clamps, and what routing in the experts reads."""
    return (
        weights.w2.shape[1],
        weights.w2.shape[2],
        weights.shared_slot if weights.shared_slot is not None else 0,
        float(weights.swiglu_limit),
        float(weights.shared_swiglu_limit),
        ws.logits,
        weights.expert_bias,
        weights.router.shape[0],
        rule.scale,
    )


def experts_constants(
    weights: MoEWeights,
    rule: RoutingRule,
    cfg: FusedMoEConfig,
    out: torch.Tensor,
    pdl: bool,
    route_here: bool,
    epilogue: NormEpilogue | None,
) -> dict[str, object]:
    """The keywords every experts kernel takes: slots, output tiles, PDL, early shared expert, routing
    constexprs, the norm epilogue's arguments and the launch options (each kernel adds its own tiles)."""
    return dict(
        SLOTS=rule.top_k + (weights.shared_slot is not None),
        BLOCK_D=cfg.block_d,
        BLOCK_DOUT=cfg.block_dout,
        USE_PDL=pdl,
        EARLY_SHARED=cfg.early_shared,
        **experts_routing_constants(weights.router.shape[0], rule, route_here),
        **norm_epilogue_arguments(epilogue, out),
        **launch_options(pdl),
    )


def tma_rows_aligned(tensor: torch.Tensor) -> bool:
    """A TMA descriptor can take `tensor` as 2D rows: contiguous rows, 16-byte aligned base and rows."""
    size = tensor.element_size()
    return (
        tensor.stride(-1) == 1
        and all((stride * size) % 16 == 0 for stride in tensor.stride()[:-1])
        and tensor.data_ptr() % 16 == 0
    )


def tma_aligned(weights: MoEWeights) -> bool:
    """TMA descriptors need 16-byte aligned rows of w13 `[S, 2I, D]` and w2 `[S, D, I]` (and bases)."""
    return all(t.is_contiguous() and tma_rows_aligned(t) for t in (weights.w13, weights.w2))


def tma_fits(weights: MoEWeights, cfg: FusedMoEConfig) -> bool:
    """Where the decoder runs the TMA experts launch: aligned rows (tma_aligned) and whole tiles, as
    every measured shape had (e256: D 2560, I 768). Partial tiles pass on the CPU interpreter, but the
    H200 run of the tiny-shape tests (2026-12-03, call 1) failed with no traceback returned, so the
    decoder keeps them on the register path until a GPU run says more."""
    hidden, inter = weights.w2.shape[1], weights.w2.shape[2]
    whole = hidden % cfg.block_d == 0 and hidden % cfg.block_dout == 0 and inter % cfg.tma_block_i == 0
    return whole and tma_aligned(weights)


def launch_tma_experts(
    x: torch.Tensor,
    weights: MoEWeights,
    rule: RoutingRule,
    ws: MoEWorkspace,
    cfg: FusedMoEConfig,
    out: torch.Tensor,
    pdl: bool,
    route_here: bool,
    epilogue: NormEpilogue | None = None,
) -> None:
    """The experts launch with TMA weight tiles (tma_kernel.py; cfg.tma_*), arguments as launch_experts.
    The descriptors are built here, on the host, over the stacked weights as 2D: the expert is a row."""
    rows, hidden = x.shape
    inter = weights.w2.shape[2]
    slots = rule.top_k + (weights.shared_slot is not None)
    block_i = cfg.tma_block_i
    x_desc = cfg.tma_x and tma_rows_aligned(x)
    x_src = TensorDescriptor.from_tensor(x, [1, cfg.block_d]) if x_desc else x
    w13 = TensorDescriptor.from_tensor(weights.w13.view(-1, hidden), [block_i, cfg.block_d])
    w2 = TensorDescriptor.from_tensor(weights.w2.view(-1, inter), [cfg.block_dout, block_i])
    tma_experts_kernel[(rows * slots, triton.cdiv(inter, block_i))](
        x_src,
        ws.ids,
        ws.weights,
        w13,
        w2,
        out,
        x.stride(0),
        *experts_slot_arguments(weights, rule, ws),
        BLOCK_I=block_i,
        STAGES=cfg.tma_stages,
        DOT=cfg.tma_dot,
        # The interpreter's bf16 dot is unreliable (union_kernel.dot_rows); fp32 weights want exact dots.
        DOT_FP32=is_interpreting() or weights.w13.dtype == torch.float32,
        X_DESC=x_desc,
        num_warps=cfg.tma_num_warps,
        **experts_constants(weights, rule, cfg, out, pdl, route_here, epilogue),
    )


def serial_routing_site(x: torch.Tensor, weights: MoEWeights, cfg: FusedMoEConfig) -> str:
    """cfg.routing_site where it applies (the serial path, experts launch not the union one); else the
    router launch's ticket, which is also what the union launch and the parallel routing path read."""
    if x.shape[0] > cfg.serial_route_max_rows or union_applies(x, weights, cfg):
        return "router_launch"
    return cfg.routing_site


def experts_routing_constants(experts: int, rule: RoutingRule, route_here: bool) -> dict[str, object]:
    """The experts launches' routing constexprs: ROUTE_HERE and what the packed-key routine needs."""
    keys = routing_constants(experts, rule, fast_topk=True)
    names = ("TOP_K", "N_GROUP", "TOPK_GROUP", "RENORMALIZE", "BLOCK_G", "BLOCK_PG", "BLOCK_TOPK")
    return dict(ROUTE_HERE=route_here, **{name: keys[name] for name in names})


def union_applies(x: torch.Tensor, weights: MoEWeights, cfg: FusedMoEConfig) -> bool:
    """expert_union runs for 2..16 rows (one row streams each expert once already) when x and the
    expert weights share a dtype (the tensor-core dot takes x in the weights' dtype)."""
    return cfg.expert_union and 1 < x.shape[0] <= UNION_BLOCK_M and x.dtype == weights.w13.dtype


def launch_union_experts(
    x: torch.Tensor,
    weights: MoEWeights,
    rule: RoutingRule,
    ws: MoEWorkspace,
    cfg: FusedMoEConfig,
    out: torch.Tensor,
    pdl: bool,
) -> None:
    """The experts launch of a window, each distinct expert streamed once (union_kernel.py; on the
    compact grid of union_compact_kernel.py with cfg.union_compact)."""
    rows, hidden = x.shape
    inter = weights.w2.shape[2]
    has_shared = weights.shared_slot is not None
    slots = rule.top_k + has_shared
    block_i = max(16, cfg.union_block_i)
    common = dict(
        BLOCK_M=UNION_BLOCK_M,
        BLOCK_TOPK=triton.next_power_of_2(rule.top_k),
        BLOCK_I=block_i,
        BLOCK_D=max(16, cfg.union_block_d),
        BLOCK_DOUT=max(16, cfg.union_block_dout),
        USE_PDL=pdl,
        DOT_FP32=is_interpreting(),
        STAGES=cfg.union_stages if cfg.deep_experts else 0,
        H_BF16X2=cfg.union_h_bf16x2 and weights.w2.dtype == torch.bfloat16,
        num_warps=cfg.union_num_warps,
        **launch_options(pdl),
    )
    args = (
        x,
        ws.ids,
        ws.weights,
        weights.w13,
        weights.w2,
        out,
        rows,
        x.stride(0),
        weights.w13.stride(0),
        weights.w2.stride(0),
        hidden,
        inter,
        weights.shared_slot if has_shared else 0,
        float(weights.swiglu_limit),
        float(weights.shared_swiglu_limit),
    )
    if cfg.union_compact:
        grid = union_compact_programs(rows * rule.top_k + has_shared, inter, block_i, cfg, x.device)
        union_compact_kernel[(grid,)](*args, HAS_SHARED=has_shared, TOP_K=rule.top_k, **common)
        return
    union_experts_kernel[(rows * slots, triton.cdiv(inter, block_i))](
        *args, TOP_K=rule.top_k, SLOTS=slots, EARLY_SHARED=cfg.early_shared, **common
    )


def union_compact_programs(
    experts_most: int, inter: int, block_i: int, cfg: FusedMoEConfig, device: torch.device
) -> int:
    """The compact grid's size: one program per possible work item (every (expert, I-slice) of
    `experts_most` distinct experts), or at most union_programs_per_sm per SM of the device."""
    items = experts_most * triton.cdiv(inter, block_i)
    if cfg.union_programs_per_sm <= 0:
        return items
    return min(items, cfg.union_programs_per_sm * sm_count(device))


def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of a CUDA device; on the CPU (the interpreter) 2, so a persistent grid
    is small enough there that its programs loop over several items."""
    if device.type != "cuda":
        return 2
    return torch.cuda.get_device_properties(device).multi_processor_count
