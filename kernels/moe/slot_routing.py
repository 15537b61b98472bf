"""Routing in the experts launch's prologue (the `routing_in_experts` switch).

Why: in the fused layer (fused_kernel.py) the router launch's last program by ticket routes the token
and stores ids / weights; the experts launch's `gdc_wait` then returns only once that one program has
finished, and each experts program reads its slot's id back. On the H200 (RESULTS.md, issue 17) the
router GEMV alone took 1.88 us per layer under PDL and the router launch with routing 5.91 us: 4 us
of ticket, routing chain and hand-off sit between the last router row and the first expert weight
load, all on the critical path. Here the router launch only writes logits (no ticket, no routing),
and every experts program, after its wait, routes its own row from those logits and keeps the id of
its slot: the routing chain remains (the experts cannot know their weights before it), but the
256-way ticket on one counter, the routing program's tail inside the router grid, and the ids' store
and re-read leave the chain. The redundant work (each of the ~100 experts programs of a row runs the
same few reductions over 256 logits read from L2) costs no HBM bytes.
"""

from __future__ import annotations

import triton
import triton.language as tl
from bubblescope.kernels.moe.experts_kernel import expert_of_slot
from bubblescope.kernels.moe.topk_keys import topk_of_row_keys


@triton.jit
def routed_expert_of_slot(
    p_logits,
    p_bias,
    p_ids,
    p_weights,
    i_m,
    slot,
    i_blk,
    shared_slot,
    E,
    scale,
    TOP_K: tl.constexpr,
    N_GROUP: tl.constexpr,
    TOPK_GROUP: tl.constexpr,
    RENORMALIZE: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_PG: tl.constexpr,
    BLOCK_TOPK: tl.constexpr,
):
    """(expert index, gain) of slot `slot` of token i_m, as expert_of_slot returns them, but routed
    in this program from the router logits (call after `gdc_wait`). The shared slot (slot == TOP_K)
    has gain 1. Program (slot 0, I-slice 0) of each row also stores the row's ids and weights, so the
    workspace holds the routing afterwards as on the other paths (nobody in the launch waits for it)."""
    b_ids, b_weights = topk_of_row_keys(
        p_logits,
        p_bias,
        i_m,
        E,
        scale,
        TOP_K,
        N_GROUP,
        TOPK_GROUP,
        RENORMALIZE,
        BLOCK_G,
        BLOCK_PG,
        BLOCK_TOPK,
    )
    o_k = tl.arange(0, BLOCK_TOPK)
    is_routed = slot < TOP_K
    expert = tl.where(is_routed, tl.sum(tl.where(o_k == slot, b_ids, 0), axis=0).to(tl.int64), shared_slot)
    gain = tl.where(is_routed, tl.sum(tl.where(o_k == slot, b_weights, 0.0), axis=0), 1.0)
    # (broadcast to a block: the CPU interpreter rejects a scalar bool inside a mask)
    m_publish = (o_k < TOP_K) & ((tl.zeros(o_k.shape, dtype=tl.int64) + slot + i_blk) == 0)
    tl.store(p_ids + i_m * TOP_K + o_k, b_ids, mask=m_publish)
    tl.store(p_weights + i_m * TOP_K + o_k, b_weights, mask=m_publish)
    return expert, gain


@triton.jit
def expert_and_gain(
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
    TOP_K: tl.constexpr,
    ROUTE_HERE: tl.constexpr,
    N_GROUP: tl.constexpr,
    TOPK_GROUP: tl.constexpr,
    RENORMALIZE: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_PG: tl.constexpr,
    BLOCK_TOPK: tl.constexpr,
):
    """The experts launches' one call for their slot's (expert, gain): read back from ids / weights
    (the router launch routed), or ROUTE_HERE, routed in this program (routed_expert_of_slot)."""
    if ROUTE_HERE:
        expert, gain = routed_expert_of_slot(
            p_logits,
            p_bias,
            p_ids,
            p_weights,
            i_m,
            slot,
            i_blk,
            shared_slot,
            E,
            scale,
            TOP_K,
            N_GROUP,
            TOPK_GROUP,
            RENORMALIZE,
            BLOCK_G,
            BLOCK_PG,
            BLOCK_TOPK,
        )
    else:
        expert, gain = expert_of_slot(p_ids, p_weights, i_m, slot, shared_slot, TOP_K)
    return expert, gain
