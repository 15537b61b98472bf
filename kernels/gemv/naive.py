"""Plain PyTorch GEMV reference: fp32, one output row and column at a time, no tricks."""

from __future__ import annotations

import torch


def gemv_naive(x: torch.Tensor, weight: torch.Tensor, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """y[m, n] = sum_k x[m, k] * weight[n, k] in fp32.

    Args:
        x: activations `[M, K]`.
        weight: `[N, K]` (nn.Linear layout).
        out_dtype: dtype of the result; default x's dtype.
    Returns:
        `[M, N]`.
    """
    x32, w32 = x.float(), weight.float()
    out = torch.empty(x.shape[0], weight.shape[0], dtype=torch.float32, device=x.device)
    for m in range(x.shape[0]):
        # One row of activations against every weight row: a dot product per output.
        out[m] = (w32 * x32[m][None, :]).sum(dim=1)
    return out.to(out_dtype or x.dtype)
