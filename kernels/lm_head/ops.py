"""lm_head + greedy argmax launcher and public entry point."""

from __future__ import annotations

import torch
import triton
from bubblescope.kernels._pdl import is_interpreting, launch_options, resolve_pdl
from bubblescope.kernels.gemv.checks import KernelInputError, check_dtype, check_shape
from bubblescope.kernels.gemv.ops import GemvConfig, check_config, check_gemv_inputs, rows_block
from bubblescope.kernels.lm_head.kernel import argmax_combine_kernel, lm_head_partial_kernel

OP = "lm_head_greedy"
MAX_PARTS = 65536
# Persistent stage 1: a few programs per SM of the H200 (132 SMs), each walking many strips.
DEFAULT_PROGRAMS = 4 * 132
# Weight elements per [BLOCK_N, BLOCK_K] tile for 4 warps: 32 per thread, twice (prefetch), no spills.
TILE_ELEMENTS = 4096


def choose_lm_head_config(rows: int, vocab: int, in_features: int, weight_bytes: int) -> GemvConfig:
    """Tiles sized by register budget, not by strip count (the persistent grid supplies parallelism):
    8 rows x 512 bf16 (or 256 fp32) columns for one row; 16 x 128 (64 fp32) tl.dot tiles for several."""
    block_n = 8 if rows == 1 else 16
    block_k = TILE_ELEMENTS // block_n * 2 // weight_bytes if rows == 1 else 256 // weight_bytes
    block_k = min(block_k, max(16, triton.next_power_of_2(in_features)))
    return GemvConfig(block_n=block_n, block_k=block_k, num_warps=4)


def launch_lm_head_greedy(
    x: torch.Tensor,
    weight: torch.Tensor,
    logits: torch.Tensor | None,
    tokens: torch.Tensor,
    cfg: GemvConfig,
    pdl: bool,
    programs: int,
) -> None:
    """Persistent strip kernel over the vocab, then the per-row argmax combine, on validated inputs."""
    rows, in_features = x.shape
    vocab = weight.shape[0]
    strips = triton.cdiv(vocab, cfg.block_n)
    strips_per_program = triton.cdiv(strips, min(programs, strips))
    parts = triton.cdiv(strips, strips_per_program)
    # [M, parts] per-program maxima and their indices
    part_val = torch.empty(rows, parts, dtype=torch.float32, device=x.device)
    part_idx = torch.empty(rows, parts, dtype=torch.int64, device=x.device)
    lm_head_partial_kernel[(parts,)](
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
        parts,
        strips_per_program,
        BLOCK_M=rows_block(rows),
        BLOCK_N=cfg.block_n,
        BLOCK_K=cfg.block_k,
        WRITE_LOGITS=logits is not None,
        USE_PDL=pdl,
        DOT_FP32=is_interpreting(),
        ACC_2D=cfg.acc_2d,
        EVICT_FIRST=cfg.evict_first,
        num_warps=cfg.num_warps,
        **launch_options(pdl),
    )
    argmax_combine_kernel[(rows,)](
        part_val,
        part_idx,
        tokens,
        parts,
        BLOCK_S=triton.next_power_of_2(parts),
        USE_PDL=pdl,
        num_warps=8 if parts > 1024 else 4,
        **launch_options(pdl),
    )


def lm_head_greedy(
    x: torch.Tensor,
    weight: torch.Tensor,
    use_pdl: bool = False,
    logits: torch.Tensor | None = None,
    tokens: torch.Tensor | None = None,
    config: GemvConfig | None = None,
    programs: int | None = None,
) -> torch.Tensor:
    """Greedy next tokens on device: lm_head GEMV (fp32 accumulation) + two-stage argmax (2 launches).

    Args:
        x: `[M, K]` final-normed hidden rows, M in 1..16.
        weight: `[N, K]` lm_head (bf16 or fp32: the `bf16_lm_head` switch picks which is passed).
        use_pdl: Programmatic Dependent Launch where supported.
        logits: optional `[M, N]` fp32 tensor that also receives the logits (skip to save the writes).
        tokens: optional `[M]` int64 destination (a static buffer for CUDA graphs).
        config: GEMV tiles; default `choose_lm_head_config(M, N, K, weight.element_size())`.
        programs: stage-1 programs (each walks a run of strips); default DEFAULT_PROGRAMS.
    Returns:
        tokens `[M]` int64: argmax of each row's logits, lowest index on ties (torch.argmax rule).
    """
    check_gemv_inputs(x, weight, op=OP)
    rows, in_features = x.shape
    vocab = weight.shape[0]
    cfg = config or choose_lm_head_config(rows, vocab, in_features, weight.element_size())
    check_config(cfg, rows)
    programs = DEFAULT_PROGRAMS if programs is None else programs
    if not 1 <= programs <= MAX_PARTS:
        raise KernelInputError(f"{OP}: programs must be in 1..{MAX_PARTS}; got {programs}")
    if logits is not None:
        check_shape("logits", logits, (rows, vocab), OP)
        check_dtype("logits", logits, (torch.float32,), OP)
        if not logits.is_contiguous() or logits.device != x.device:
            raise KernelInputError(f"{OP}: logits must be contiguous on {x.device}")
    if tokens is None:
        tokens = torch.empty(rows, dtype=torch.int64, device=x.device)
    check_shape("tokens", tokens, (rows,), OP)
    check_dtype("tokens", tokens, (torch.int64,), OP)
    launch_lm_head_greedy(x, weight, logits, tokens, cfg, resolve_pdl(use_pdl, x.device), programs)
    return tokens
