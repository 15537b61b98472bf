"""MLA over a latent cache addressed by DEVICE positions (speculative verify and drafting).

The eager MLA appends at a host-side length. A verify of T tokens instead writes its latent rows at
positions p..p+T-1 held on the device and attends over a fixed window of the cache with a mask
key_pos <= query_pos, so rejected rows need no rollback: they sit beyond the committed length, are
masked for every later query, and the next verify overwrites them. Nothing here reads the device.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bubblescope.errors import ConfigError

from ..mla import MLAAttention
from ..norm import compute_dtype


def attend_latent_masked(
    attn: MLAAttention, q_nope: torch.Tensor, q_pe: torch.Tensor, rows: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Weight-absorbed MLA (notes §3.2) over cache rows with an explicit visibility mask.

    Args:
        attn: the layer (its kv_b_proj supplies W_UK / W_UV).
        q_nope: [1, T, H, nope]; q_pe: [1, T, H, rope] (rotated).
        rows: [1, S, kv_lora_rank + rope] cache rows (positions 0..S-1).
        mask: [T, S] bool, True where query t may see key s.

    Returns:
        [1, T, H, v_head_dim].
    """
    # [H, nope + v, r] -> W_UK [H, nope, r], W_UV [H, v, r]
    w_kvb = attn.kv_b_proj.weight.unflatten(0, (attn.num_heads, -1))
    w_uk, w_uv = w_kvb.split([attn.nope_dim, attn.v_dim], dim=1)
    latent, k_pe = rows.split([attn.latent_dim, attn.rope_dim], dim=-1)
    q_latent = torch.einsum("bthn,hnr->bthr", q_nope, w_uk)
    scores = torch.einsum("bthr,bsr->bhts", q_latent, latent) + torch.einsum("bthr,bsr->bhts", q_pe, k_pe)
    probs = attn._softmax(scores * attn.scale, mask)
    o_latent = torch.einsum("bhts,bsr->bthr", probs.to(latent.dtype), latent)
    return torch.einsum("bthr,hvr->bthv", o_latent, w_uv)


def mla_forward_at(
    attn: MLAAttention, normed: torch.Tensor, buffer: torch.Tensor, positions: torch.Tensor, key_len: int
) -> torch.Tensor:
    """One MLA block whose new rows go to `buffer` at device `positions`.

    Args:
        attn: the MLA layer.
        normed: [1, T, D] input-normed hidden.
        buffer: [1, capacity, kv_lora_rank + rope] the layer's latent cache, written in place.
        positions: [1, T] int64 on the device: the positions of these tokens (consecutive).
        key_len: host upper bound on positions + 1 (every visible row is below it); the attention
            window, so it costs one extra masked row per unit of slack, never a device read.

    Returns:
        [1, T, D].
    """
    if normed.shape[0] != 1:
        raise ConfigError("speculative decoding runs at batch 1")
    if key_len > buffer.shape[1]:
        raise ConfigError(f"MLA cache full: {key_len} positions needed, capacity {buffer.shape[1]}")
    q_nope, q_pe = attn._queries(normed).split([attn.nope_dim, attn.rope_dim], dim=-1)
    q_pe = attn.rope(q_pe, positions)
    buffer.index_copy_(1, positions[0], attn._latent(normed, positions))
    # [T, S]: a key is visible iff its position is at or before the query's
    mask = torch.arange(key_len, device=buffer.device)[None, :] <= positions[0][:, None]
    heads_out = attend_latent_masked(attn, q_nope, q_pe, buffer[:, :key_len], mask)
    wide = compute_dtype(normed.dtype)
    # Head-wise gate in fp32 (notes §3.2 step 7): [1, T, H, 1]
    gate = torch.sigmoid(F.linear(normed.to(wide), attn.g_proj.weight.to(wide)))[..., None]
    return attn.dense((heads_out.to(wide) * gate).to(normed.dtype).flatten(-2))
