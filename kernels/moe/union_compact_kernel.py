"""The window's union experts launch on a compact grid (`FusedMoEConfig.union_compact`).

`union_experts_kernel` keeps the per-row grid (M * SLOTS, I-slices): at T = 10, E = 256 that is
2160 programs of which only the ~29 distinct experts' (+ the shared one's) 24 slices each work; the
others wait for routing (under PDL they are launched early and sit in `gdc_wait`, holding SM slots
beside the working ones) and exit. Here every program first lists the window's distinct experts in
first-occurrence order (`union_worklist`: the same expert -> program assignment the per-row grid makes,
computed in registers from the [M, TOP_K] ids), then walks work items `item = u * n_slices + slice`
(u < distinct: the u-th distinct expert; u == distinct: the shared expert) from its program id in
steps of the grid size. The grid is either one program per possible item (working programs dense at
the front, the surplus exits) or a persistent grid of `programs` (a few per SM) that loops.

Each item is exactly the per-row grid's work for (expert, slice): the same swiglu_window / down_window
body, so the sum is the same up to the order of the fp32 atomics. No early-shared variant: the shared
expert is an item like the others (the union launch measured it neutral, RESULTS.md).
"""

from __future__ import annotations

import triton
import triton.language as tl
from bubblescope.kernels._pdl import pdl_launch_dependents, pdl_wait
from bubblescope.kernels.moe.experts_kernel import load_w13_tiles
from bubblescope.kernels.moe.union_kernel import down_window, swiglu_window


@triton.jit
def union_worklist(p_ids, M, TOP_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_TOPK: tl.constexpr):
    """The window's ids flattened row-major ([BLOCK_M * BLOCK_TOPK], -1 past M / TOP_K), which entries
    are an expert's first occurrence (no earlier entry holds it: a row's ids are distinct, so this is
    the lowest row, as in union_experts_kernel), and each first occurrence's rank among them."""
    o_j = tl.arange(0, BLOCK_M * BLOCK_TOPK)
    row = o_j // BLOCK_TOPK
    col = o_j % BLOCK_TOPK
    valid = (row < M) & (col < TOP_K)
    ids = tl.load(p_ids + row * TOP_K + col, mask=valid, other=-1)
    earlier_same = (ids[:, None] == ids[None, :]) & (o_j[None, :] < o_j[:, None])
    first = valid & (tl.max(earlier_same.to(tl.int32), axis=1) == 0)
    rank = tl.cumsum(first.to(tl.int32), axis=0) - 1
    return ids, first, rank


@triton.jit
def union_compact_kernel(
    p_x,
    p_ids,
    p_weights,
    p_w13,
    p_w2,
    p_y,
    M,
    stride_xm,
    stride_w13e,
    stride_w2e,
    D,
    INTER,
    shared_slot,
    limit,
    shared_limit,
    HAS_SHARED: tl.constexpr,
    TOP_K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_TOPK: tl.constexpr,
    BLOCK_I: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_DOUT: tl.constexpr,
    USE_PDL: tl.constexpr,
    DOT_FP32: tl.constexpr,
    STAGES: tl.constexpr = 0,
    H_BF16X2: tl.constexpr = False,
):
    """Grid (programs,); see the module docstring. H_BF16X2 as union_experts_kernel."""
    pdl_wait(USE_PDL)
    pdl_launch_dependents(USE_PDL)
    flat_ids, first, rank = union_worklist(p_ids, M, TOP_K, BLOCK_M, BLOCK_TOPK)
    distinct = tl.sum(first.to(tl.int32), axis=0)
    slices = tl.cdiv(INTER, BLOCK_I)
    items = (distinct + HAS_SHARED) * slices
    o_m = tl.arange(0, BLOCK_M)
    m_m = o_m < M
    o_k = tl.arange(0, BLOCK_TOPK)
    m_window = m_m[:, None] & (o_k < TOP_K)[None, :]
    b_ids = tl.load(p_ids + o_m[:, None] * TOP_K + o_k[None, :], mask=m_window, other=-1)
    b_weights = tl.load(p_weights + o_m[:, None] * TOP_K + o_k[None, :], mask=m_window, other=0.0)
    for item in range(tl.program_id(0), items, tl.num_programs(0)):
        u = item // slices
        o_i = (item % slices) * BLOCK_I + tl.arange(0, BLOCK_I)
        m_i = o_i < INTER
        # Branch-free: the shared expert (u == distinct) serves every row at gain 1, a routed one the
        # rows that chose it at their gains.
        is_shared = u == distinct
        routed = tl.sum(tl.where(first & (rank == u), flat_ids, 0), axis=0)
        expert = tl.where(is_shared, shared_slot, routed).to(tl.int64)
        b_hit = b_ids == expert
        m_rows = tl.where(is_shared, m_m, tl.max(b_hit.to(tl.int32), axis=1) > 0)
        b_gains = tl.where(is_shared, m_m.to(tl.float32), tl.sum(tl.where(b_hit, b_weights, 0.0), axis=1))
        p_w13_e = p_w13 + expert * stride_w13e
        b_gate, b_up = load_w13_tiles(p_w13_e, o_i, m_i, 0, D, INTER, BLOCK_D)
        b_h = swiglu_window(
            p_x, p_w13_e, b_gate, b_up, o_m, m_m, o_i, m_i, stride_xm, D, INTER,
            tl.where(is_shared, shared_limit, limit), BLOCK_D, DOT_FP32, STAGES,
        )  # fmt: skip
        down_window(
            p_w2, p_y, b_h * b_gains[:, None], expert, o_m, m_rows, o_i, m_i, stride_w2e, D, INTER,
            BLOCK_DOUT, DOT_FP32, STAGES, H_BF16X2,
        )  # fmt: skip
