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


def gemv_head_norm_naive(
    x: torch.Tensor, gate: torch.Tensor, o_norm: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> torch.Tensor:
    """KDA's o_proj after its gated head RMSNorm: y = round(headnorm(x)) @ weight^T, in fp32.

    Args:
        x: `[M, H*V]` un-normed head rows; gate: `[M, H*V]`; o_norm: `[V]`; weight: `[N, H*V]`.
        eps: RMSNorm epsilon.
    Returns:
        `[M, N]` in gate's dtype; the normed rows are rounded to gate's dtype before the product, as
        kda_decode stores them.
    """
    value_dim = o_norm.numel()
    normed = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    for m in range(x.shape[0]):
        for start in range(0, x.shape[1], value_dim):
            # One head's V-chunk: its own RMS, then the shared weight and its gate's sigmoid.
            head = x[m, start : start + value_dim].float()
            rstd = 1.0 / torch.sqrt((head * head).mean() + eps)
            gate_sig = torch.sigmoid(gate[m, start : start + value_dim].float())
            normed[m, start : start + value_dim] = head * rstd * o_norm.float() * gate_sig
    return gemv_naive(normed.to(gate.dtype), weight, out_dtype=gate.dtype)
