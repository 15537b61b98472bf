"""Plain PyTorch residual-add + RMSNorm reference: fp32, one row at a time."""

from __future__ import annotations

import torch


def add_rmsnorm_naive(
    x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    """r = x + residual; y = weight * r / sqrt(mean(r^2) + eps), all in fp32.

    Args:
        x: `[M, D]` (e.g. the attention or MoE output of one token).
        residual: `[M, D]` running hidden state, or None (then r = x).
        weight: `[D]`.
        eps: added to the mean square.
    Returns:
        (normed `[M, D]` in x's dtype, new residual `[M, D]` in residual's dtype, x's when None).
    """
    res_dtype = residual.dtype if residual is not None else x.dtype
    normed = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    new_residual = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    for m in range(x.shape[0]):
        row = x[m].float() + (residual[m].float() if residual is not None else 0.0)
        new_residual[m] = row
        normed[m] = weight.float() * row / torch.sqrt((row * row).mean() + eps)
    return normed.to(x.dtype), new_residual.to(res_dtype)


def epilogue_add_rmsnorm_naive(
    y: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float, out_dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """What a `norm_epilogue` launch leaves after producing y `[M, D]` (as the producer stored it):
    r = y + residual in fp32; (normed = weight * r / sqrt(mean(r^2) + eps) in out_dtype, r in
    residual's dtype)."""
    row = y.float() + residual.float()
    normed = weight.float() * row / torch.sqrt((row * row).mean(dim=-1, keepdim=True) + eps)
    return normed.to(out_dtype), row.to(residual.dtype)
