"""The experts of one MoE layer as two GEMV-shaped launches (`split_experts`): many short row strips.

Why: the fused experts launch (fused_kernel.py) gives each of 216 programs one expert's I-slice to
stream end to end (gate/up, then its down slice, ~491 KB one tile after another) and measured 2.8 TB/s
on the H200: each program is bound by its own round trips. The decode GEMVs, which give each program
an 8-row strip and launch thousands of them, reach 4.0 TB/s on the same bytes (RESULTS.md, issue 17).
Here the experts are laid out the same way:
- gate_up_strips_kernel: grid (M * SLOTS, I / BLOCK_I) with a small BLOCK_I (4 gate + 4 up rows of an
  expert): gate/up, SwiGLU, times the routing gain, into the fp32 workspace h `[M, SLOTS, I]`;
- down_strips_kernel: grid (M, D / BLOCK_N): each program owns BLOCK_N output rows of y and walks K over
  every slot's expert (y[d] = sum over slots and i of w2[e_slot, d, i] * h[slot, i]), so y is written
  once: no atomics, no zeroing, and a deterministic summation order.
The price is one launch more than the fused layer (three: router, gate/up, down); under PDL the down
launch fetches its first weight tile before it waits.
"""

from __future__ import annotations

import triton
import triton.language as tl
from bubblescope.kernels._pdl import pdl_launch_dependents, pdl_wait
from bubblescope.kernels.moe.fused_kernel import early_shared_h, waited_h


@triton.jit
def gate_up_strips_kernel(
    p_x,
    p_ids,
    p_weights,
    p_w13,
    p_h,
    stride_xm,
    stride_w13e,
    D,
    INTER,
    shared_slot,
    limit,
    shared_limit,
    TOP_K: tl.constexpr,
    SLOTS: tl.constexpr,
    BLOCK_I: tl.constexpr,
    BLOCK_K: tl.constexpr,
    USE_PDL: tl.constexpr,
    EARLY_SHARED: tl.constexpr = False,
):
    """Grid (M * SLOTS, cdiv(I, BLOCK_I)): h[m, slot, i-slice] = gain * SwiGLU of the slot's expert.
    EARLY_SHARED: the shared slot computes before gdc_wait (x is complete then: see
    fused_kernel.early_shared_h)."""
    i_ms = tl.program_id(0).to(tl.int64)
    i_blk = tl.program_id(1).to(tl.int64)
    i_m = i_ms // SLOTS
    slot = i_ms % SLOTS
    o_i = i_blk * BLOCK_I + tl.arange(0, BLOCK_I)
    m_i = o_i < INTER
    p_x_row = p_x + i_m * stride_xm
    if EARLY_SHARED:
        _expert, b_h = early_shared_h(
            p_x_row, p_ids, p_weights, p_w13, i_m, slot, o_i, m_i, stride_w13e, D, INTER,
            shared_slot, limit, shared_limit, TOP_K, BLOCK_K, USE_PDL, True,
        )  # fmt: skip
    else:
        _expert, b_h = waited_h(
            p_x_row, p_ids, p_weights, p_w13, i_m, slot, o_i, m_i, stride_w13e, D, INTER,
            shared_slot, limit, shared_limit, TOP_K, BLOCK_K, USE_PDL, True,
        )  # fmt: skip
    tl.store(p_h + i_ms * INTER + o_i, b_h, mask=m_i)


@triton.jit
def slot_expert(p_ids, i_m, slot, shared_slot, TOP_K: tl.constexpr):
    """Expert index of slot `slot` of row i_m (the shared slot past TOP_K). The ids are read through L2
    (.cg): the down launch may read them before gdc_wait, and an SM's L1 may hold a previous step's."""
    routed = tl.load(p_ids + i_m * TOP_K + tl.minimum(slot, TOP_K - 1), cache_modifier=".cg")
    return tl.where(slot < TOP_K, routed.to(tl.int64), shared_slot)


@triton.jit
def load_w2_strip(p_w2, p_ids, i_m, tile, k_tiles, n_tiles, o_n, m_n, stride_w2e, INTER, shared_slot,
                  TOP_K: tl.constexpr, SLOTS: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    """w2[e_slot, o_n, i-tile] `[BLOCK_N, BLOCK_K]` of flat tile index `tile` (slot-major over the
    k_tiles tiles of I); all-masked past the last tile (no traffic)."""
    slot = tl.minimum(tile // k_tiles, SLOTS - 1)
    o_k = (tile % k_tiles) * BLOCK_K + tl.arange(0, BLOCK_K)
    # (broadcast to a block: the CPU interpreter rejects a scalar bool inside a mask)
    m_k = (o_k < INTER) & ((tl.zeros(o_k.shape, dtype=tl.int64) + tile) < n_tiles)
    expert = slot_expert(p_ids, i_m, slot, shared_slot, TOP_K)
    p_tile = p_w2 + expert * stride_w2e + o_n[:, None] * INTER + o_k[None, :]
    return tl.load(p_tile, mask=m_n[:, None] & m_k[None, :], other=0.0)


@triton.jit
def down_strips_kernel(
    p_h,
    p_ids,
    p_w2,
    p_y,
    stride_w2e,
    stride_ym,
    D,
    INTER,
    shared_slot,
    TOP_K: tl.constexpr,
    SLOTS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    """Grid (M, cdiv(D, BLOCK_N)): y[m, o_n] = sum over slots of w2[e_slot, o_n, :] . h[m, slot, :] (fp32,
    gains already in h). Elementwise accumulation, one reduction at the end (as the GEMV's ACC_2D).

    Before gdc_wait the program loads its first w2 tile, which needs the routing ids: they were written
    by the router launch, and this grid starts only after every gate/up program has passed its own
    gdc_wait on that launch and triggered, so they are complete; h is read only after the wait."""
    i_m = tl.program_id(0).to(tl.int64)
    i_n = tl.program_id(1).to(tl.int64)
    o_n = i_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_n = o_n < D
    k_tiles = tl.cdiv(INTER, BLOCK_K)
    n_tiles = SLOTS * k_tiles
    b_w = load_w2_strip(p_w2, p_ids, i_m, 0, k_tiles, n_tiles, o_n, m_n, stride_w2e, INTER, shared_slot,
                        TOP_K, SLOTS, BLOCK_K)  # fmt: skip
    pdl_wait(USE_PDL)
    # After the wait: an earlier trigger lets a chain of kernels cascade (see gemv/kernel.py).
    pdl_launch_dependents(USE_PDL)
    b_acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for tile in range(0, n_tiles):
        b_w_next = load_w2_strip(p_w2, p_ids, i_m, tile + 1, k_tiles, n_tiles, o_n, m_n, stride_w2e, INTER,
                                 shared_slot, TOP_K, SLOTS, BLOCK_K)  # fmt: skip
        slot = tile // k_tiles
        o_k = (tile % k_tiles) * BLOCK_K + tl.arange(0, BLOCK_K)
        b_h = tl.load(p_h + (i_m * SLOTS + slot) * INTER + o_k, mask=o_k < INTER, other=0.0)
        b_acc += b_w.to(tl.float32) * b_h[None, :]
        b_w = b_w_next
    tl.store(p_y + i_m * stride_ym + o_n, tl.sum(b_acc, axis=1), mask=m_n)
