"""Plain PyTorch reference for the KDA block: the existing references composed, nothing new."""

from __future__ import annotations

import torch
from bubblescope.kernels.gemv.naive import gemv_naive
from bubblescope.kernels.kda_decode.naive import kda_decode_naive
from bubblescope.kernels.kda_decode.params import KDALayerState, KDALayerWeights


def kda_block_naive(
    x: torch.Tensor,
    in_proj: torch.Tensor,
    widths: tuple[int, ...],
    weights: KDALayerWeights,
    state: KDALayerState,
    o_proj: torch.Tensor,
    eps: float = 1e-6,
) -> torch.Tensor:
    """o_proj(KDA(in_proj(x))) for one token, rounding each intermediate row to x's dtype.

    Args:
        x: `[1, D]`; in_proj: `[5W + H, D]` rows [q | k | v | f | g | b] with row counts `widths`.
        weights, state: the layer's KDA weights and state (state updated in place).
        o_proj: `[D_out, W]`; eps: L2-norm and output-RMSNorm epsilon.
    Returns:
        `[1, D_out]` in x's dtype.
    """
    proj = gemv_naive(x, in_proj)
    q, k, v, f, g, b = proj.split(list(widths), dim=1)
    attn = kda_decode_naive(q, k, v, f, b, g, weights, state, eps)
    return gemv_naive(attn, o_proj)
