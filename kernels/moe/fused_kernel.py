"""Fused MoE layer in TWO launches — the fewest the math allows without a grid-wide barrier.

Dependencies: (a) routing needs all E router logits of a token, i.e. the whole router GEMV, before
any expert is known; (b) an expert's down projection needs its whole intermediate vector h.
- (b) is removed by splitting the down projection over I (split-K): the program that computes
  h[i-slice] multiplies it straight into w2[:, i-slice] and atomically adds the [D] partial into
  an fp32 accumulator. No program ever waits for another inside the expert launch.
- (a) stays a grid-wide dependency. Within the router launch it is handled without a barrier:
  every program writes its slice of logits, then takes a ticket from an atomic counter; the program
  that draws the last ticket has seen every other program's writes (acq_rel) and routes all tokens.
  The experts cannot join that launch: they would have to spin-wait for routing, which deadlocks
  unless every program is co-resident (not guaranteed by the launch model). SGLang stops at the
  same place and chains the two launches with PDL, as here: under PDL the shared-expert programs
  of launch 2 load their first weight tiles before `gdc_wait` (they do not depend on routing).
Launch 1 also zeroes the accumulator, so no memset node is needed. With EARLY_SHARED (the
`early_shared` switch) the shared expert's programs go further before the wait: its whole gate/up and
SwiGLU (early_shared_h); only its down projection, whose atomics need the zeroed y, waits.
With ROUTE=False (the `routing_in_experts` switch) launch 1 takes no ticket and routes nothing: the
grid-wide dependency is then met by the experts launch's own `gdc_wait`, after which each experts
program routes its token itself (slot_routing.py), so the ticket and the ids' hand-off leave the chain.
"""

from __future__ import annotations

import triton
import triton.language as tl
from bubblescope.kernels._pdl import pdl_launch_dependents, pdl_wait
from bubblescope.kernels.gemv.kernel import gemv_strip
from bubblescope.kernels.moe.experts_kernel import load_w13_tiles, swiglu_rows
from bubblescope.kernels.moe.routing_kernel import route_row
from bubblescope.kernels.moe.slot_routing import expert_and_gain
from bubblescope.kernels.rmsnorm.epilogue import last_program_add_rmsnorm


@triton.jit
def load_w2_tile(p_w2_e, m_i, d_start, D, INTER, BLOCK_DOUT: tl.constexpr):
    """w2[e, d_start : d_start + BLOCK_DOUT, i-slice] as `[BLOCK_DOUT, BLOCK_I]`; p_w2_e already holds
    the expert and column offsets `[1, BLOCK_I]`; zero past D and outside m_i (no traffic there)."""
    o_d = d_start + tl.arange(0, BLOCK_DOUT)
    return tl.load(p_w2_e + o_d[:, None] * INTER, mask=(o_d < D)[:, None] & m_i[None, :], other=0.0)


@triton.jit
def router_route_kernel(
    p_x,
    p_router,
    p_bias,
    p_logits,
    p_ids,
    p_weights,
    p_counter,
    p_y,
    M,
    E,
    D,
    stride_xm,
    stride_rn,
    scale,
    TOP_K: tl.constexpr,
    N_GROUP: tl.constexpr,
    TOPK_GROUP: tl.constexpr,
    RENORMALIZE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_TOPK: tl.constexpr,
    BLOCK_Z: tl.constexpr,
    USE_PDL: tl.constexpr,
    DOT_FP32: tl.constexpr,
    FAST_TOPK: tl.constexpr = False,
    BLOCK_PG: tl.constexpr = 1,
    ROUTE: tl.constexpr = True,
):
    """Launch 1. Grid (cdiv(E, BLOCK_N),): router logits strip + zero a share of y; last program routes.
    Without ROUTE only the logits and the zeroed y (the experts route, or a routing launch follows)."""
    i_n = tl.program_id(0).to(tl.int64)
    num_programs = tl.num_programs(0)
    b_logits = gemv_strip(
        p_x, p_router, i_n, M, E, D, stride_xm, stride_rn, BLOCK_M, BLOCK_N, BLOCK_K, USE_PDL, DOT_FP32, True
    )
    o_m = tl.arange(0, BLOCK_M)
    o_n = i_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(
        p_logits + o_m[:, None] * E + o_n[None, :], b_logits, mask=(o_m < M)[:, None] & (o_n < E)[None, :]
    )
    zero_span = tl.cdiv(M * D, num_programs)
    for z_start in range(i_n * zero_span, tl.minimum((i_n + 1) * zero_span, M * D), BLOCK_Z):
        o_z = z_start + tl.arange(0, BLOCK_Z)
        tl.store(
            p_y + o_z,
            tl.zeros((BLOCK_Z,), dtype=tl.float32),
            mask=o_z < tl.minimum((i_n + 1) * zero_span, M * D),
        )
    if ROUTE:
        last_program_routes(
            p_logits,
            p_bias,
            p_ids,
            p_weights,
            p_counter,
            num_programs,
            M,
            E,
            scale,
            TOP_K,
            N_GROUP,
            TOPK_GROUP,
            RENORMALIZE,
            BLOCK_E,
            BLOCK_G,
            BLOCK_TOPK,
            FAST_TOPK,
            BLOCK_PG,
        )


@triton.jit
def last_program_routes(
    p_logits,
    p_bias,
    p_ids,
    p_weights,
    p_counter,
    num_programs,
    M,
    E,
    scale,
    TOP_K: tl.constexpr,
    N_GROUP: tl.constexpr,
    TOPK_GROUP: tl.constexpr,
    RENORMALIZE: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_TOPK: tl.constexpr,
    FAST_TOPK: tl.constexpr,
    BLOCK_PG: tl.constexpr,
):
    """The router launch's ticket: the program that draws the last one has seen every program's
    logits (acq_rel) and routes every row; it then re-arms the counter."""
    # Every thread's logits must be written before this program's ticket is taken.
    tl.debug_barrier()
    ticket = tl.atomic_add(p_counter, 1, sem="acq_rel")
    if ticket == num_programs - 1:
        for i_m in range(0, M):
            route_row(
                p_logits,
                p_bias,
                p_ids,
                p_weights,
                i_m,
                E,
                scale,
                TOP_K,
                N_GROUP,
                TOPK_GROUP,
                RENORMALIZE,
                BLOCK_E,
                BLOCK_G,
                BLOCK_TOPK,
                FAST_TOPK,
                BLOCK_PG,
            )
        # Re-arm for the next call (or the next CUDA-graph replay).
        tl.atomic_xchg(p_counter, 0, sem="relaxed")


@triton.jit
def fused_experts_kernel(
    p_x,
    p_ids,
    p_weights,
    p_w13,
    p_w2,
    p_y,
    stride_xm,
    stride_w13e,
    stride_w2e,
    D,
    INTER,
    shared_slot,
    limit,
    shared_limit,
    p_logits,
    p_bias,
    E,
    scale,
    TOP_K: tl.constexpr,
    SLOTS: tl.constexpr,
    BLOCK_I: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_DOUT: tl.constexpr,
    USE_PDL: tl.constexpr,
    ACC_2D: tl.constexpr = False,
    EARLY_SHARED: tl.constexpr = False,
    ROUTE_HERE: tl.constexpr = False,
    N_GROUP: tl.constexpr = 1,
    TOPK_GROUP: tl.constexpr = 1,
    RENORMALIZE: tl.constexpr = True,
    BLOCK_G: tl.constexpr = 1,
    BLOCK_PG: tl.constexpr = 1,
    BLOCK_TOPK: tl.constexpr = 1,
    NORM_EPILOGUE: tl.constexpr = False,
    p_res=None,
    p_norm_w=None,
    p_normed=None,
    p_norm_counter=None,
    eps=0.0,
    NORM_CHUNK: tl.constexpr = 1,
    NORM_CHUNKS: tl.constexpr = 1,
):
    """Launch 2. Grid (M * SLOTS, cdiv(I, BLOCK_I)): gate/up + SwiGLU of an I-slice, then its share of
    the down projection, scaled by the routing weight, atomically added into y[m] (fp32).
    NORM_EPILOGUE (`norm_epilogue`): the last program by ticket then adds y into p_res and writes the
    next block's normed rows (kernels/rmsnorm/epilogue.py; p_res .. NORM_CHUNKS are its arguments).
    EARLY_SHARED (`early_shared`): the shared slot's gate/up + SwiGLU run before `gdc_wait`.
    ROUTE_HERE (`routing_in_experts`): each program routes its row from p_logits after the wait
    (slot_routing.py) instead of reading ids / weights; N_GROUP .. BLOCK_TOPK are routing's."""
    i_ms = tl.program_id(0).to(tl.int64)
    i_blk = tl.program_id(1).to(tl.int64)
    i_m = i_ms // SLOTS
    slot = i_ms % SLOTS
    o_i = i_blk * BLOCK_I + tl.arange(0, BLOCK_I)
    m_i = o_i < INTER
    if EARLY_SHARED:
        expert, b_h = early_shared_h(
            p_x + i_m * stride_xm,
            p_ids,
            p_weights,
            p_w13,
            i_m,
            slot,
            o_i,
            m_i,
            stride_w13e,
            D,
            INTER,
            shared_slot,
            limit,
            shared_limit,
            TOP_K,
            BLOCK_D,
            USE_PDL,
            ACC_2D,
            i_blk,
            p_logits,
            p_bias,
            E,
            scale,
            ROUTE_HERE,
            N_GROUP,
            TOPK_GROUP,
            RENORMALIZE,
            BLOCK_G,
            BLOCK_PG,
            BLOCK_TOPK,
        )
    else:
        expert, b_h = waited_h(
            p_x + i_m * stride_xm,
            p_ids,
            p_weights,
            p_w13,
            i_m,
            slot,
            o_i,
            m_i,
            stride_w13e,
            D,
            INTER,
            shared_slot,
            limit,
            shared_limit,
            TOP_K,
            BLOCK_D,
            USE_PDL,
            ACC_2D,
            i_blk,
            p_logits,
            p_bias,
            E,
            scale,
            ROUTE_HERE,
            N_GROUP,
            TOPK_GROUP,
            RENORMALIZE,
            BLOCK_G,
            BLOCK_PG,
            BLOCK_TOPK,
        )
    p_w2_e = p_w2 + expert * stride_w2e + o_i[None, :]
    b_w2 = load_w2_tile(p_w2_e, m_i, 0, D, INTER, BLOCK_DOUT)
    for d_start in range(0, D, BLOCK_DOUT):
        # Prefetch the next [BLOCK_DOUT, BLOCK_I] tile before the reduction and the atomics.
        b_w2_next = load_w2_tile(p_w2_e, m_i, d_start + BLOCK_DOUT, D, INTER, BLOCK_DOUT)
        o_d = d_start + tl.arange(0, BLOCK_DOUT)
        b_part = tl.sum(b_w2.to(tl.float32) * b_h[None, :], axis=1)
        tl.atomic_add(p_y + i_m * D + o_d, b_part, mask=o_d < D, sem="relaxed")
        b_w2 = b_w2_next
    if NORM_EPILOGUE:
        programs = tl.num_programs(0) * tl.num_programs(1)
        last_program_add_rmsnorm(
            p_y, p_res, p_norm_w, p_normed, p_norm_counter, programs, tl.num_programs(0) // SLOTS, D, eps,
            NORM_CHUNK, NORM_CHUNKS,
        )  # fmt: skip


@triton.jit
def waited_h(
    p_x_row,
    p_ids,
    p_weights,
    p_w13,
    i_m,
    slot,
    o_i,
    m_i,
    stride_w13e,
    D,
    INTER,
    shared_slot,
    limit,
    shared_limit,
    TOP_K: tl.constexpr,
    BLOCK_D: tl.constexpr,
    USE_PDL: tl.constexpr,
    ACC_2D: tl.constexpr,
    i_blk,
    p_logits,
    p_bias,
    E,
    scale,
    ROUTE_HERE: tl.constexpr,
    N_GROUP: tl.constexpr,
    TOPK_GROUP: tl.constexpr,
    RENORMALIZE: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_PG: tl.constexpr,
    BLOCK_TOPK: tl.constexpr,
):
    """(expert, gain * h[o_i]) of this slot; every slot waits for routing first, the shared one
    having loaded its first weight tiles before the wait."""
    # Only with a shared expert is there a slot past TOP_K (SLOTS = TOP_K + 1).
    # (broadcast to a block: the CPU interpreter rejects a scalar bool inside a mask)
    m_shared = (tl.zeros(o_i.shape, dtype=tl.int64) + slot) >= TOP_K
    is_shared = slot >= TOP_K
    # The shared expert does not depend on routing: fetch its first tiles before waiting.
    b_gate_pre, b_up_pre = load_w13_tiles(
        p_w13 + shared_slot * stride_w13e, o_i, m_i & m_shared, 0, D, INTER, BLOCK_D
    )
    pdl_wait(USE_PDL)
    # After the wait: an earlier trigger lets a chain of kernels cascade (see gemv/kernel.py).
    pdl_launch_dependents(USE_PDL)
    expert, gain = expert_and_gain(
        p_ids,
        p_weights,
        p_logits,
        p_bias,
        i_m,
        slot,
        i_blk,
        shared_slot,
        E,
        scale,
        TOP_K,
        ROUTE_HERE,
        N_GROUP,
        TOPK_GROUP,
        RENORMALIZE,
        BLOCK_G,
        BLOCK_PG,
        BLOCK_TOPK,
    )
    p_w13_e = p_w13 + expert * stride_w13e
    b_gate, b_up = load_w13_tiles(p_w13_e, o_i, m_i & ~m_shared, 0, D, INTER, BLOCK_D)
    b_gate = tl.where(is_shared, b_gate_pre, b_gate)
    b_up = tl.where(is_shared, b_up_pre, b_up)
    slot_limit = tl.where(slot < TOP_K, limit, shared_limit)
    b_h = swiglu_rows(p_x_row, p_w13_e, b_gate, b_up, o_i, m_i, D, INTER, slot_limit, BLOCK_D, ACC_2D) * gain
    return expert, b_h


@triton.jit
def early_shared_h(
    p_x_row,
    p_ids,
    p_weights,
    p_w13,
    i_m,
    slot,
    o_i,
    m_i,
    stride_w13e,
    D,
    INTER,
    shared_slot,
    limit,
    shared_limit,
    TOP_K: tl.constexpr,
    BLOCK_D: tl.constexpr,
    USE_PDL: tl.constexpr,
    ACC_2D: tl.constexpr,
    i_blk,
    p_logits,
    p_bias,
    E,
    scale,
    ROUTE_HERE: tl.constexpr,
    N_GROUP: tl.constexpr,
    TOPK_GROUP: tl.constexpr,
    RENORMALIZE: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_PG: tl.constexpr,
    BLOCK_TOPK: tl.constexpr,
):
    """(expert, gain * h[o_i]) of this slot, the shared slot's h computed BEFORE `gdc_wait`.

    The shared expert needs x but not routing, and x is complete when this grid starts: under PDL
    this launch begins only once every program of the router launch has called
    `gdc_launch_dependents`, which each does after its own `gdc_wait` on the kernel that wrote x.
    So 2/3 of the shared expert's bytes (gate and up) stream while the router launch still routes.
    The routed slots wait as before; y is zeroed by the router launch, so every atomic stays after
    the wait."""
    if slot >= TOP_K:
        p_w13_e = p_w13 + shared_slot * stride_w13e
        b_gate, b_up = load_w13_tiles(p_w13_e, o_i, m_i, 0, D, INTER, BLOCK_D)
        b_h = swiglu_rows(p_x_row, p_w13_e, b_gate, b_up, o_i, m_i, D, INTER, shared_limit, BLOCK_D, ACC_2D)
        pdl_wait(USE_PDL)
        pdl_launch_dependents(USE_PDL)
        expert = slot * 0 + shared_slot
    else:
        pdl_wait(USE_PDL)
        pdl_launch_dependents(USE_PDL)
        expert, gain = expert_and_gain(
            p_ids,
            p_weights,
            p_logits,
            p_bias,
            i_m,
            slot,
            i_blk,
            shared_slot,
            E,
            scale,
            TOP_K,
            ROUTE_HERE,
            N_GROUP,
            TOPK_GROUP,
            RENORMALIZE,
            BLOCK_G,
            BLOCK_PG,
            BLOCK_TOPK,
        )
        p_w13_e = p_w13 + expert * stride_w13e
        b_gate, b_up = load_w13_tiles(p_w13_e, o_i, m_i, 0, D, INTER, BLOCK_D)
        b_h = swiglu_rows(p_x_row, p_w13_e, b_gate, b_up, o_i, m_i, D, INTER, limit, BLOCK_D, ACC_2D) * gain
    return expert, b_h
