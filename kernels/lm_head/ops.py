"""lm_head + greedy argmax launcher and public entry point."""

from __future__ import annotations

import torch
import triton
from bubblescope.kernels._pdl import is_interpreting, launch_options, resolve_pdl
from bubblescope.kernels.gemv.checks import KernelInputError, check_dtype, check_shape
from bubblescope.kernels.gemv.ops import (
    GemvConfig,
    check_config,
    check_gemv_inputs,
    choose_config,
    rows_block,
)
from bubblescope.kernels.lm_head.kernel import argmax_combine_kernel, lm_head_partial_kernel

OP = "lm_head_greedy"
MAX_STRIPS = 65536


def launch_lm_head_greedy(
    x: torch.Tensor,
    weight: torch.Tensor,
    logits: torch.Tensor | None,
    tokens: torch.Tensor,
    cfg: GemvConfig,
    pdl: bool,
) -> None:
    """Strip kernel over the vocab, then the per-row argmax combine, on validated inputs."""
    rows, in_features = x.shape
    vocab = weight.shape[0]
    strips = triton.cdiv(vocab, cfg.block_n)
    # [M, strips] per-strip maxima and their indices
    part_val = torch.empty(rows, strips, dtype=torch.float32, device=x.device)
    part_idx = torch.empty(rows, strips, dtype=torch.int64, device=x.device)
    lm_head_partial_kernel[(strips,)](
        x,
        weight,
        logits if logits is not None else part_val,
        part_val,
        part_idx,
        rows,
        vocab,
        in_features,
        x.stride(0),
        weight.stride(0),
        strips,
        BLOCK_M=rows_block(rows),
        BLOCK_N=cfg.block_n,
        BLOCK_K=cfg.block_k,
        WRITE_LOGITS=logits is not None,
        USE_PDL=pdl,
        DOT_FP32=is_interpreting(),
        num_warps=cfg.num_warps,
        **launch_options(pdl),
    )
    argmax_combine_kernel[(rows,)](
        part_val,
        part_idx,
        tokens,
        strips,
        BLOCK_S=triton.next_power_of_2(strips),
        USE_PDL=pdl,
        num_warps=8 if strips > 1024 else 4,
        **launch_options(pdl),
    )


def lm_head_greedy(
    x: torch.Tensor,
    weight: torch.Tensor,
    use_pdl: bool = False,
    logits: torch.Tensor | None = None,
    tokens: torch.Tensor | None = None,
    config: GemvConfig | None = None,
) -> torch.Tensor:
    """Greedy next tokens on device: lm_head GEMV (fp32 accumulation) + two-stage argmax (2 launches).

    Args:
        x: `[M, K]` final-normed hidden rows, M in 1..16.
        weight: `[N, K]` lm_head (bf16 or fp32: the `bf16_lm_head` switch picks which is passed).
        use_pdl: Programmatic Dependent Launch where supported.
        logits: optional `[M, N]` fp32 tensor that also receives the logits (skip to save the writes).
        tokens: optional `[M]` int64 destination (a static buffer for CUDA graphs).
        config: GEMV tiles; default `choose_config(M, N, K)`.
    Returns:
        tokens `[M]` int64: argmax of each row's logits, lowest index on ties (torch.argmax rule).
    """
    check_gemv_inputs(x, weight, op=OP)
    rows, in_features = x.shape
    vocab = weight.shape[0]
    cfg = config or choose_config(rows, vocab, in_features)
    check_config(cfg, rows)
    strips = triton.cdiv(vocab, cfg.block_n)
    if strips > MAX_STRIPS:
        raise KernelInputError(f"{OP}: {strips} vocab strips exceed {MAX_STRIPS}; use a larger block_n")
    if logits is not None:
        check_shape("logits", logits, (rows, vocab), OP)
        check_dtype("logits", logits, (torch.float32,), OP)
        if not logits.is_contiguous() or logits.device != x.device:
            raise KernelInputError(f"{OP}: logits must be contiguous on {x.device}")
    if tokens is None:
        tokens = torch.empty(rows, dtype=torch.int64, device=x.device)
    check_shape("tokens", tokens, (rows,), OP)
    check_dtype("tokens", tokens, (torch.int64,), OP)
    launch_lm_head_greedy(x, weight, logits, tokens, cfg, resolve_pdl(use_pdl, x.device))
    return tokens
