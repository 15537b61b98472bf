"""Grouped top-k routing with packed sort keys (the `fast_topk` switch): same result, fewer reductions.

`grouped_topk` (routing_kernel.py) runs on a flat `[E]` block: per group it masks a `[G, E]`
membership matrix (two reductions over E, one an argmax of (value, index) pairs), keeps the groups
one argmax at a time, ORs the membership of the kept ones (another `[G, E]` reduction), and then
spends two reductions per chosen expert (argmax, then a masked sum to fetch its score). On one
program of 8 warps each reduction over E crosses warps through shared memory and a barrier, and
they run one after another. On the H200 (2026-12-01, e256, bf16 gate, graph + PDL) the fused router
launch took 9.35 us with that routine against 1.88 us for its GEMV alone, and 5.91 us with this one
(benchmarks/bench_routing.py).

Here every candidate is one int64 key, `order(biased score) << 32 | (POS_LIMIT - position)`, where
`order` maps fp32 to int32 preserving the float order; a plain integer `max` then returns the best
score and, on a tie, the lowest position in one reduction (the same tie rule as tl.argmax and as a
stable sort). The logits are laid out `[BLOCK_G, BLOCK_PG]` (group, member), so the group top-2 is
a reduction over the member axis only, the kept groups come from one rank comparison of the
`[BLOCK_G]` group keys, and each chosen expert costs one reduction. Positions are `g * BLOCK_PG + j`
(padded when E / n_group is not a power of two); they order like expert ids, so ties go the same way.
"""

from __future__ import annotations

import triton
import triton.language as tl

# Low half of a key: POS_LIMIT - position, so the larger key is the lower position on equal scores.
POS_LIMIT = tl.constexpr(0x7FFFFFFF)
# Below every real key (a real key's high half is the order of a finite or -inf fp32).
NO_KEY = tl.constexpr(-0x7FFFFFFFFFFFFFFF)


@triton.jit
def order_of(b_value):
    """int32 that sorts like the fp32 `b_value` (negative floats have their magnitude bits flipped)."""
    b_bits = b_value.to(tl.int32, bitcast=True)
    return b_bits ^ ((b_bits >> 31) & 0x7FFFFFFF)


@triton.jit
def value_of_key(b_key):
    """The fp32 score a key was made from (order_of is its own inverse)."""
    b_order = (b_key >> 32).to(tl.int32)
    return (b_order ^ ((b_order >> 31) & 0x7FFFFFFF)).to(tl.float32, bitcast=True)


@triton.jit
def make_keys(b_value, b_position):
    """int64 keys of fp32 values at int positions: larger value first, then lower position."""
    # (tensor first: in the interpreter a constexpr minus a tensor stays a constexpr)
    return (order_of(b_value).to(tl.int64) << 32) | (-b_position.to(tl.int64) + POS_LIMIT)


@triton.jit
def route_row_keys(
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
    BLOCK_G: tl.constexpr,
    BLOCK_PG: tl.constexpr,
    BLOCK_TOPK: tl.constexpr,
):
    """Route token i_m as route_row does: read its E logits, write ids[i_m, :TOP_K] (int32, in
    selection order) and weights[i_m, :TOP_K] (renormalised un-biased scores times `scale`)."""
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
    tl.store(p_ids + i_m * TOP_K + o_k, b_ids, mask=o_k < TOP_K)
    tl.store(p_weights + i_m * TOP_K + o_k, b_weights, mask=o_k < TOP_K)


@triton.jit
def topk_of_row_keys(
    p_logits,
    p_bias,
    i_m,
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
    """(ids `[BLOCK_TOPK]` int32 in selection order, weights `[BLOCK_TOPK]` fp32 times `scale`) of token
    i_m from its E logits; slots past TOP_K hold id 0 and weight 0. Shared by route_row_keys and the
    experts programs that route for themselves (slot_routing.py, `routing_in_experts`)."""
    per_group = E // N_GROUP
    o_g = tl.arange(0, BLOCK_G)
    o_j = tl.arange(0, BLOCK_PG)
    o_k = tl.arange(0, BLOCK_TOPK)
    m_ge = (o_g < N_GROUP)[:, None] & (o_j < per_group)[None, :]
    # [BLOCK_G, BLOCK_PG] expert ids and padded positions (positions order like ids).
    o_e = o_g[:, None] * per_group + o_j[None, :]
    o_pos = o_g[:, None] * BLOCK_PG + o_j[None, :]
    # ".cg": in the fused path other programs wrote these logits; bypass L1 to read them from L2.
    b_logits = tl.load(p_logits + i_m * E + o_e, mask=m_ge, other=0.0, cache_modifier=".cg").to(tl.float32)
    b_bias = tl.load(p_bias + o_e, mask=m_ge, other=0.0).to(tl.float32)
    b_scores = tl.sigmoid(b_logits)
    b_keys = tl.where(m_ge, make_keys(b_scores + b_bias, o_pos), NO_KEY)
    # Group score: the two best biased scores of the group (one reduction each, within the group).
    b_top1 = tl.max(b_keys, axis=1)
    b_top2 = tl.max(tl.where(b_keys == b_top1[:, None], NO_KEY, b_keys), axis=1)
    b_group_score = value_of_key(b_top1) + value_of_key(b_top2)
    b_group_keys = tl.where(o_g < N_GROUP, make_keys(b_group_score, o_g), NO_KEY)
    # A group is kept when fewer than TOPK_GROUP groups rank above it (score, then lower index).
    b_rank = tl.sum((b_group_keys[None, :] > b_group_keys[:, None]).to(tl.int32), axis=1)
    b_keep = (b_rank < TOPK_GROUP) & (o_g < N_GROUP)
    b_candidates = tl.where(b_keep[:, None], b_keys, NO_KEY)
    b_chosen = tl.zeros((BLOCK_TOPK,), dtype=tl.int64)
    for i in tl.static_range(TOP_K):
        b_best = tl.max(tl.max(b_candidates, axis=1), axis=0)
        b_chosen = tl.where(o_k == i, b_best, b_chosen)
        b_candidates = tl.where(b_candidates == b_best, NO_KEY, b_candidates)
    b_pos = -(b_chosen & POS_LIMIT).to(tl.int32) + POS_LIMIT
    m_k = o_k < TOP_K
    b_ids = tl.where(m_k, (b_pos // BLOCK_PG) * per_group + b_pos % BLOCK_PG, 0)
    # The un-biased scores of the chosen experts, exactly (one term of each sum is non-zero): one
    # reduction for all TOP_K instead of one per expert, and no second read of the logits.
    b_hit = o_pos[None, :, :] == tl.where(m_k, b_pos, -1)[:, None, None]
    b_weights = tl.sum(tl.sum(tl.where(b_hit, b_scores[None, :, :], 0.0), axis=2), axis=1)
    if RENORMALIZE:
        b_weights = b_weights / (tl.sum(b_weights, axis=0) + 1e-20)
    return b_ids.to(tl.int32), b_weights * scale


def keys_constants(experts: int, n_group: int) -> dict[str, int]:
    """The constexpr block sizes route_row_keys needs beyond routing_constants."""
    return dict(BLOCK_PG=triton.next_power_of_2(experts // n_group))
