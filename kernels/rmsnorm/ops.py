"""Residual-add + RMSNorm launcher and public entry point."""

from __future__ import annotations

import torch
import triton
from bubblescope.kernels._pdl import launch_options, resolve_pdl
from bubblescope.kernels.gemv.checks import (
    FLOAT_DTYPES,
    KernelInputError,
    check_contiguous,
    check_dtype,
    check_same_device,
)
from bubblescope.kernels.rmsnorm.kernel import add_rmsnorm_kernel

MAX_WIDTH = 16384


def check_rmsnorm_inputs(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor) -> None:
    op = "add_rmsnorm"
    if x.dim() != 2 or weight.dim() != 1 or weight.shape[0] != x.shape[1]:
        raise KernelInputError(
            f"{op}: x must be [M, D] and weight [D]; got {list(x.shape)} and {list(weight.shape)}"
        )
    if not 1 <= x.shape[1] <= MAX_WIDTH:
        raise KernelInputError(f"{op}: D must be in 1..{MAX_WIDTH}; got {x.shape[1]}")
    tensors = {"x": x, "weight": weight}
    if residual is not None:
        if residual.shape != x.shape:
            raise KernelInputError(f"{op}: residual {list(residual.shape)} must match x {list(x.shape)}")
        tensors["residual"] = residual
    for name, tensor in tensors.items():
        check_dtype(name, tensor, FLOAT_DTYPES, op)
    check_same_device(op, **tensors)
    check_contiguous(op, **tensors)


def add_rmsnorm(
    x: torch.Tensor,
    residual: torch.Tensor | None,
    weight: torch.Tensor,
    eps: float = 1e-6,
    use_pdl: bool = False,
    out: torch.Tensor | None = None,
    residual_out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fused residual add + RMSNorm in fp32 (the pre-norm of every decoder block).

    Args:
        x: `[M, D]` new contribution (fp32/bf16/fp16; an fp32 MoE accumulator is fine).
        residual: `[M, D]` running hidden state, or None (first layer: r = x).
        weight: `[D]` norm weight.
        eps: added to mean(r^2) (1e-6 for Ling).
        use_pdl: Programmatic Dependent Launch where supported.
        out: optional `[M, D]` destination for the normed rows (default: x's dtype).
        residual_out: optional `[M, D]` destination for r; may be `residual` itself (in place).
            Default: a new tensor in residual's dtype (x's when residual is None).
    Returns:
        (normed `[M, D]`, new residual `[M, D]`).
    """
    check_rmsnorm_inputs(x, residual, weight)
    res_dtype = residual.dtype if residual is not None else x.dtype
    out = torch.empty_like(x) if out is None else out
    residual_out = (
        torch.empty(x.shape, dtype=res_dtype, device=x.device) if residual_out is None else residual_out
    )
    for name, tensor in (("out", out), ("residual_out", residual_out)):
        if tensor.shape != x.shape or tensor.device != x.device or not tensor.is_contiguous():
            raise KernelInputError(
                f"add_rmsnorm: {name} must be a contiguous {list(x.shape)} tensor on {x.device}"
            )
    pdl = resolve_pdl(use_pdl, x.device)
    add_rmsnorm_kernel[(x.shape[0],)](
        x,
        residual if residual is not None else x,
        weight,
        out,
        residual_out,
        x.shape[1],
        eps,
        HAS_RESIDUAL=residual is not None,
        BLOCK_D=triton.next_power_of_2(x.shape[1]),
        USE_PDL=pdl,
        num_warps=8 if x.shape[1] >= 2048 else 4,
        **launch_options(pdl),
    )
    return out, residual_out
