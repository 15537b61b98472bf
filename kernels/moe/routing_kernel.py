"""Triton grouped top-k routing (notes §3.3 steps 2-5) for one token, on one program.

Routing needs all E logits of a token before any expert can be chosen, so it cannot start until
the router GEMV has finished everywhere: it is either its own launch (unfused path) or run by the
last program of the router launch (fused path, see fused_kernel.py).
"""

from __future__ import annotations

import triton
import triton.language as tl
from bubblescope.kernels._pdl import pdl_launch_dependents, pdl_wait
from bubblescope.kernels.moe.topk_keys import route_row_keys


@triton.jit
def grouped_topk(
    b_logits,
    b_bias,
    E,
    scale,
    TOP_K: tl.constexpr,
    N_GROUP: tl.constexpr,
    TOPK_GROUP: tl.constexpr,
    RENORMALIZE: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_TOPK: tl.constexpr,
):
    """From `[BLOCK_E]` fp32 logits and bias, return (ids `[BLOCK_TOPK]` int32, weights `[BLOCK_TOPK]` fp32).

    Ties pick the lowest index (tl.argmax), like a stable sort; slots past TOP_K hold id 0, weight 0.
    """
    o_e = tl.arange(0, BLOCK_E)
    o_g = tl.arange(0, BLOCK_G)
    o_k = tl.arange(0, BLOCK_TOPK)
    m_e = o_e < E
    b_scores = tl.sigmoid(b_logits)
    b_biased = tl.where(m_e, b_scores + b_bias, float("-inf"))
    # [BLOCK_G, BLOCK_E] membership of expert e in group g (groups are consecutive blocks).
    b_member = ((o_e // (E // N_GROUP))[None, :] == o_g[:, None]) & m_e[None, :]
    b_in_group = tl.where(b_member, b_biased[None, :], float("-inf"))
    b_first = tl.argmax(b_in_group, axis=1)
    b_top1 = tl.max(b_in_group, axis=1)
    b_top2 = tl.max(tl.where(o_e[None, :] == b_first[:, None], float("-inf"), b_in_group), axis=1)
    b_group_score = tl.where(o_g < N_GROUP, b_top1 + b_top2, float("-inf"))
    b_keep = tl.zeros((BLOCK_G,), dtype=tl.int1)
    for _ in tl.static_range(TOPK_GROUP):
        i_best = tl.argmax(b_group_score, axis=0)
        b_keep = b_keep | (o_g == i_best)
        b_group_score = tl.where(o_g == i_best, float("-inf"), b_group_score)
    b_allowed = tl.max(tl.where(b_member & b_keep[:, None], 1, 0), axis=0) > 0
    # -inf (not 0) outside kept groups: biased scores can be negative.
    b_candidates = tl.where(b_allowed, b_biased, float("-inf"))
    b_ids = tl.zeros((BLOCK_TOPK,), dtype=tl.int32)
    b_weights = tl.zeros((BLOCK_TOPK,), dtype=tl.float32)
    for i in tl.static_range(TOP_K):
        i_best = tl.argmax(b_candidates, axis=0)
        b_ids = tl.where(o_k == i, i_best.to(tl.int32), b_ids)
        b_weights = tl.where(o_k == i, tl.sum(tl.where(o_e == i_best, b_scores, 0.0), axis=0), b_weights)
        b_candidates = tl.where(o_e == i_best, float("-inf"), b_candidates)
    if RENORMALIZE:
        b_weights = b_weights / (tl.sum(b_weights, axis=0) + 1e-20)
    return b_ids, b_weights * scale


@triton.jit
def route_row(
    p_logits,
    p_bias,
    p_ids,
    p_weights,
    i_m,
    E,
    scale,
    TOP_K: tl.constexpr,
    N_GROUP: tl.constexpr,
    TOPK_GROUP: tl.constexpr,
    RENORMALIZE: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_TOPK: tl.constexpr,
    FAST_TOPK: tl.constexpr = False,
    BLOCK_PG: tl.constexpr = 1,
):
    """Route token i_m: read its E logits, write ids[i_m, :TOP_K] and weights[i_m, :TOP_K].
    FAST_TOPK: the packed-key routine of topk_keys.py (same result, fewer reductions)."""
    if FAST_TOPK:
        route_row_keys(
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
            BLOCK_G,
            BLOCK_PG,
            BLOCK_TOPK,
        )
    else:
        o_e = tl.arange(0, BLOCK_E)
        o_k = tl.arange(0, BLOCK_TOPK)
        # ".cg": in the fused path other programs wrote these logits; bypass L1 to read them from L2.
        b_logits = tl.load(p_logits + i_m * E + o_e, mask=o_e < E, other=0.0, cache_modifier=".cg").to(
            tl.float32
        )
        b_bias = tl.load(p_bias + o_e, mask=o_e < E, other=0.0).to(tl.float32)
        b_ids, b_weights = grouped_topk(
            b_logits, b_bias, E, scale, TOP_K, N_GROUP, TOPK_GROUP, RENORMALIZE, BLOCK_E, BLOCK_G, BLOCK_TOPK
        )
        tl.store(p_ids + i_m * TOP_K + o_k, b_ids, mask=o_k < TOP_K)
        tl.store(p_weights + i_m * TOP_K + o_k, b_weights, mask=o_k < TOP_K)


@triton.jit
def routing_kernel(
    p_logits,
    p_bias,
    p_ids,
    p_weights,
    E,
    scale,
    TOP_K: tl.constexpr,
    N_GROUP: tl.constexpr,
    TOPK_GROUP: tl.constexpr,
    RENORMALIZE: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_TOPK: tl.constexpr,
    USE_PDL: tl.constexpr,
    FAST_TOPK: tl.constexpr = False,
    BLOCK_PG: tl.constexpr = 1,
):
    """Grid (M,): unfused routing, one token per program."""
    i_m = tl.program_id(0).to(tl.int64)
    pdl_wait(USE_PDL)
    # After the wait: an earlier trigger lets a chain of kernels cascade (see gemv/kernel.py).
    pdl_launch_dependents(USE_PDL)
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
