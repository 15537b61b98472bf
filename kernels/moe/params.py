"""Routing rule and stacked expert weights of one MoE layer, as the MoE kernels take them."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class RoutingRule:
    """Grouped top-k routing (notes §3.3): sigmoid scores, + expert_bias for selection only, groups of
    E/n_group consecutive experts scored by their top-2 sum, keep topk_group groups (others -inf),
    top_k experts, renormalise the un-biased scores (+1e-20) when `renormalize`, times `scale`."""

    top_k: int = 8
    n_group: int = 8
    topk_group: int = 4
    scale: float = 2.5
    renormalize: bool = True


@dataclass
class MoEWeights:
    """Stacked weights of one MoE layer.

    Attributes:
        router: `[E, D]` gate weight, fp32 (HF numerics) or bf16 (`bf16_gate`).
        expert_bias: `[E]` fp32 selection bias.
        w13: `[S, 2*I, D]` gate rows [0, I) then up rows [I, 2I) of every expert slot (not interleaved).
        w2: `[S, D, I]` down projections.
        shared_slot: index in w13/w2 of the shared expert (usually S - 1 == E), or None. The router
            only scores slots 0..E-1.
        swiglu_limit: clamp L of the routed experts (0: none): min(SiLU(gate), L) * clamp(up, -L, L).
        shared_swiglu_limit: the same for the shared expert.
    """

    router: torch.Tensor
    expert_bias: torch.Tensor
    w13: torch.Tensor
    w2: torch.Tensor
    shared_slot: int | None = None
    swiglu_limit: float = 0.0
    shared_swiglu_limit: float = 0.0


@dataclass
class MoEWorkspace:
    """Buffers reused across calls (allocate once per layer shape for CUDA graphs).

    Attributes:
        logits: `[M, E]` fp32 router logits.
        ids: `[M, top_k]` int32 chosen experts; weights: `[M, top_k]` fp32 gains.
        hidden: `[M, slots, I]` fp32 SwiGLU outputs (unfused path only).
        counter: `[1]` int32 ticket counter of the fused router launch; starts at 0, the kernel re-arms it.
    """

    logits: torch.Tensor
    ids: torch.Tensor
    weights: torch.Tensor
    hidden: torch.Tensor
    counter: torch.Tensor

    @classmethod
    def allocate(cls, rows: int, weights: MoEWeights, rule: RoutingRule) -> MoEWorkspace:
        device = weights.w13.device
        slots = rule.top_k + (weights.shared_slot is not None)
        return cls(
            logits=torch.empty(rows, weights.router.shape[0], dtype=torch.float32, device=device),
            ids=torch.empty(rows, rule.top_k, dtype=torch.int32, device=device),
            weights=torch.empty(rows, rule.top_k, dtype=torch.float32, device=device),
            hidden=torch.empty(rows, slots, weights.w2.shape[2], dtype=torch.float32, device=device),
            counter=torch.zeros(1, dtype=torch.int32, device=device),
        )


@dataclass(frozen=True)
class FusedMoEConfig:
    """Tiles of the fused path. Defaults measured on the H200 (sweep 2026-11-30, e256, graph + PDL):
    block_i 32, block_d 128, block_dout 128, 8 warps, 2D accumulation: 51.2 us per layer against
    59.4 us for the earlier guess (32, 128, 64, 4 warps, per-tile reduction); 10 candidates tried."""

    block_i: int = 32
    block_d: int = 128
    block_dout: int = 128
    # One router row per program (256 programs at E = 256) with 2D accumulation, as the 512-row
    # gemv measured best (bn1: 2.3 us against 4.9 us for 8-row strips).
    router_block_n: int = 1
    # Up to this many rows the router launch's last program routes them one after another (one launch
    # fewer: the decode step). Above it (verify windows) the rows are routed in parallel by their own
    # grid-(M) launch after the tuned GEMV: at T = 10 the serial path took 72 us per layer (bf16 gate)
    # and 160 us (fp32) on the H200, ~7 us per routed row plus a router strip of T rows that spills.
    serial_route_max_rows: int = 1
    num_warps: int = 8
    # Gate/up: elementwise accumulation reduced once (see swiglu_rows) instead of per tile.
    acc_2d: bool = True
    # Routing by the packed-key routine (topk_keys.py, the `fast_topk` switch) instead of grouped_topk.
    fast_topk: bool = False
    # The shared expert's gate/up + SwiGLU before the experts launch waits for routing (the
    # `early_shared` switch; see fused_kernel.early_shared_h): it streams while the router launch routes.
    early_shared: bool = False
    # Warps of the router launch (0: num_warps); with fewer, the routing program's reductions cross
    # fewer warps. H200 2026-12-01 (bench_routing.py, fast_topk, e256): the router launch took 5.57 us
    # with 4 warps vs 5.91 with 8 under PDL, but the whole MoE layer without PDL 46.25 vs 45.80 us: 0.
    router_num_warps: int = 0
    # A window of 2..16 rows (a verify): each distinct expert streamed once for every row that chose
    # it (union_kernel.py, the `expert_union` switch) instead of once per (row, slot).
    expert_union: bool = False
    # The experts launch with more bytes in flight per program (paired_kernel.py, the `deep_experts`
    # switch): deep_stages 0 = tiles in pairs, >= 2 = Triton's pipeliner with that many stages; its own
    # I-slice (deep_block_i replaces block_i). H200 sweep 2026-12-01 (bench_routing.py, e256 layer, graph
    # + PDL, 11 candidates): pairs at 64 x 128 tiles, 8 warps 38.0 us per layer against 44.0 us for the
    # fused launch (32 x 128); the pipeliner at 3 stages 37.7 (within noise; pairs kept: no shared memory).
    deep_experts: bool = False
    deep_stages: int = 0
    deep_block_i: int = 64
    # The experts launch with its weight tiles brought by TMA copies into shared memory (tma_kernel.py):
    # Triton's pipeliner keeps tma_stages - 1 copies in flight per program (shared memory, not
    # registers); tma_dot feeds the tiles to tensor-core dots straight from shared memory instead of
    # multiplying them in registers; its own I-slice (tma_block_i replaces block_i / deep_block_i) and
    # warps (tma_num_warps; the router launch keeps num_warps).
    # Takes precedence over deep_experts for the serial (decode) experts launch; the union launch is not
    # affected. Needs 16-byte aligned rows (hidden and inter times the element size).
    tma_experts: bool = False
    tma_dot: bool = False
    tma_stages: int = 4
    tma_block_i: int = 64
    tma_num_warps: int = 4
    # The token's row by TMA too, pipelined with the weight tiles (where x's rows are 16-byte aligned;
    # else plain loads, each waiting an L2 round trip inside the loop).
    tma_x: bool = True
    # Under deep_experts the union launch of a window (expert_union) hands its loops, whose tiles feed
    # tensor-core dots, to Triton's pipeliner with this many stages.
    union_stages: int = 3
    # The union launch's own tiles and warps (the decode launches' block_i / block_d / block_dout /
    # num_warps do not apply to it). H200 sweep 2026-12-03 (bench_verify_union.py: the launch alone, 29
    # distinct experts + shared, 354 MB, graph + PDL, 10 candidates): 4 warps 121.7 us against 133.1 for
    # the 8 it ran with before (2.91 vs 2.66 TB/s); 64-row I-slices 124.6, 4 stages 126.3, one tile ahead
    # 137.5.
    union_block_i: int = 32
    union_block_d: int = 128
    union_block_dout: int = 128
    union_num_warps: int = 4
    # The union launch's grid (union_compact_kernel.py): False = one program per (row, slot, I-slice),
    # the ones not holding an expert's first occurrence exit; True = the distinct experts' work items
    # listed in every program, on `union_programs_per_sm` programs per SM that loop over them (0: one
    # program per possible item, the working ones first). Measured slower (same sweep): 153.4 us dense
    # (4 warps), 144.3 persistent at 4 per SM, 182.7-200.9 with 8 warps: a benchmark arm, off.
    union_compact: bool = False
    union_programs_per_sm: int = 0
    # The union launch's down products with h as bf16 hi + lo (two bf16 tensor-core products on the w2
    # tile as loaded) instead of tf32x3 on the tile converted to fp32; bf16 expert weights only. Same
    # sweep: 121.7 us against 133.1 (8 warps each); with 4 warps not measured alone (call 2 times both in
    # the DSpark step: bench_spec_vs_decode.py --moe-alt).
    union_h_bf16x2: bool = True
    # The router GEMV of a window (rows > serial_route_max_rows: the verify), on top of choose_config's
    # tiles (16 x 128, 4 warps at T = 10, E = 256: 16 programs walking 20 K-tiles each); 0 keeps its.
    # H200 2026-12-03 (bench_verify_router.py, T = 10, 40 routers, graph + PDL): 512-column K-tiles
    # 6.74 us per layer against 11.96 (256: 8.23; 512 with 8 warps 8.34; 1024 x 8 warps 19.98; the L2
    # prefetch before the wait 6.99 at 512, 9.26 at 128).
    window_router_block_k: int = 512
    window_router_warps: int = 0
    window_router_prefetch: int = 0
    # Where the serial path (rows <= serial_route_max_rows) routes, one of ROUTING_SITES:
    # "router_launch": the router launch's last program by ticket (fused_kernel.py);
    # "experts": every experts program routes its own row after its wait (slot_routing.py, the
    #   `routing_in_experts` switch; always the packed-key routine);
    # "own_launch": a routing launch of its own between the router GEMV and the experts, chained
    #   under PDL (measured against the other two in bench_routing.py; not a switch).
    routing_site: str = "router_launch"


ROUTING_SITES = ("router_launch", "experts", "own_launch")
