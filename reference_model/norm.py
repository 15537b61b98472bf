"""RMSNorm as the HF reference computes it (notes §3.0), and the precision helpers the blocks share."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype numerically sensitive math runs in: fp32, or wider when the input already is (fp64 tests)."""
    return torch.promote_types(dtype, torch.float32)


def linear_wide_out(hidden: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """hidden @ weight.T with inputs in weight's dtype and the result in fp32 (or wider).

    For a bf16 weight this is a bf16 GEMM with fp32 accumulation AND fp32 output (no rounding of the
    result to bf16), as serving engines run the router and lm_head.

    Args:
        hidden: [..., in]; weight: [out, in].

    Returns:
        [..., out] in compute_dtype(weight.dtype).
    """
    wide = compute_dtype(weight.dtype)
    if weight.dtype == wide:
        return F.linear(hidden.to(wide), weight)
    narrow = hidden.to(weight.dtype)
    if weight.is_cuda:
        try:
            flat = torch.mm(narrow.flatten(0, -2), weight.T, out_dtype=wide)
        except (RuntimeError, TypeError):
            # A torch build without the mixed-output GEMM: same bf16 products, result rounded to bf16.
            return F.linear(narrow, weight).to(wide)
        return flat.unflatten(0, narrow.shape[:-1])
    # CPU has no mixed-output GEMM; upcasting the bf16 values gives the same products exactly.
    return F.linear(narrow.to(wide), weight.to(wide))


class RMSNorm(nn.Module):
    """y = weight * (x / sqrt(mean(x^2) + eps)), the normalisation done in fp32.

    Args:
        dim: size of the normalised (last) axis.
        eps: added inside the square root (config.rms_norm_eps).
    """

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        # Trained norm gains scatter around 1; never exactly ones so a wrong-weight bug shows in tests.
        with torch.no_grad():
            noise = torch.randn(self.weight.shape, generator=generator, device=self.weight.device)
            self.weight.copy_(1.0 + 0.1 * noise)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden [..., dim] -> [..., dim] in hidden's dtype."""
        wide = hidden.to(compute_dtype(hidden.dtype))
        normed = wide * torch.rsqrt(wide.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return self.weight * normed.to(hidden.dtype)
