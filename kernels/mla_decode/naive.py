"""Plain PyTorch reference for absorbed-MLA decode attention over the latent cache (fp32, loops)."""

from __future__ import annotations

import torch


def mla_decode_naive(
    q_latent: torch.Tensor, q_pe: torch.Tensor, cache: torch.Tensor, seq_lens: torch.Tensor, scale: float
) -> torch.Tensor:
    """o[b, h] = softmax_s(scale * (q_latent[b,h].c[b,s] + q_pe[b,h].pe[b,s])) @ c[b, s], s < seq_lens[b].

    Args:
        q_latent: `[B, H, C]` absorbed queries (W_UK^T q_nope), C = kv_lora_rank (512).
        q_pe: `[B, H, R]` rotated rope queries (R = 64).
        cache: `[B, S_max, C + R]` rows [c_norm (C) ; rotated k_pe (R)].
        seq_lens: `[B]` valid rows per sequence.
        scale: softmax scale (Ling: 1/sqrt(qk_nope + qk_rope) = 1/sqrt(192)).
    Returns:
        `[B, H, C]` fp32 (zeros where seq_lens is 0).
    """
    batch, heads, latent = q_latent.shape
    out = torch.zeros(batch, heads, latent, dtype=torch.float32, device=q_latent.device)
    for i_b in range(batch):
        length = int(seq_lens[i_b])
        if length == 0:
            continue
        # [S, C] values double as the latent part of the keys.
        latent_rows = cache[i_b, :length, :latent].float()
        pe_rows = cache[i_b, :length, latent:].float()
        for i_h in range(heads):
            scores = (latent_rows @ q_latent[i_b, i_h].float() + pe_rows @ q_pe[i_b, i_h].float()) * scale
            probs = torch.softmax(scores, dim=0)
            out[i_b, i_h] = probs @ latent_rows
    return out
