"""Plain PyTorch reference of the absorbed-MLA head products: the ops the fast path ran before."""

from __future__ import annotations

import torch


def mla_q_absorb_naive(q: torch.Tensor, w_uk: torch.Tensor) -> torch.Tensor:
    """q_latent `[1, H, r]` = bmm(q[:, None, :nope].to(dtype), w_uk), dtype = w_uk's.

    Args:
        q: `[H, >= nope]` queries (only the first nope columns are read).
        w_uk: `[H, nope, r]`.
    Returns:
        `[1, H, r]` in w_uk's dtype.
    """
    heads, nope, latent = w_uk.shape
    # [H, 1, nope] @ [H, nope, r] -> [1, H, r]
    return torch.bmm(q[:, None, :nope].to(w_uk.dtype), w_uk).view(1, heads, latent)


def mla_out_gate_naive(o_latent: torch.Tensor, w_uv_t: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    """gated `[1, H*v]` = ((o_latent @ w_uv_t per head) in dtype, then fp32 * sigmoid(gate)) in dtype.

    Args:
        o_latent: `[1, H, r]` (or `[H, r]`) attention output before W_UV.
        w_uv_t: `[H, r, v]`.
        gate: the H head-gate logits (`[1, H]`).
    Returns:
        `[1, H*v]` in w_uv_t's dtype.
    """
    heads, latent, _ = w_uv_t.shape
    # [H, 1, r] @ [H, r, v] -> [1, H, v], in the weight dtype like any bmm
    heads_out = torch.bmm(o_latent.reshape(heads, 1, latent).to(w_uv_t.dtype), w_uv_t).view(1, heads, -1)
    weights = torch.sigmoid(gate.reshape(1, heads).float())
    return (heads_out.float() * weights[..., None]).to(w_uv_t.dtype).view(1, -1)
