"""Absorbed-MLA decode launcher and public entry point."""

from __future__ import annotations

import torch
import triton
from bubblescope.kernels._pdl import is_interpreting, launch_options, resolve_pdl
from bubblescope.kernels.gemv.checks import (
    FLOAT_DTYPES,
    KernelInputError,
    check_dtype,
    check_same_device,
    check_shape,
)
from bubblescope.kernels.mla_decode.kernel import LOG2E, mla_combine_kernel, mla_split_kernel

OP = "mla_decode"
MAX_SPLITS = 128
# Rows of context per split below which splitting further only adds combine work.
MIN_ROWS_PER_SPLIT = 256
# The split kernel takes PDL only up to this many programs. Measured on the H200 (sweep 2026-11-30):
# 128 one-per-SM programs at 131072 rows ran 134 us plain and 215 us under PDL, while 32 programs
# (8192 rows) gained 1.5 us. Likely cause: launched early, the programs are placed beside the still
# resident combine programs and some SMs get two, and each program is bound by its SM's bandwidth.
# The split kernel loads nothing before gdc_wait, so leaving PDL off costs only the launch overlap.
MAX_PDL_SPLIT_PROGRAMS = 64
TARGET_PROGRAMS = 2 * 132


def choose_num_splits(batch: int, cache_rows: int) -> int:
    """Splits per sequence from the cache capacity (static, so one CUDA graph serves every length)."""
    by_length = triton.cdiv(cache_rows, MIN_ROWS_PER_SPLIT)
    return max(1, min(by_length, triton.cdiv(TARGET_PROGRAMS, batch), MAX_SPLITS))


def check_mla_inputs(
    q_latent: torch.Tensor, q_pe: torch.Tensor, cache: torch.Tensor, seq_lens: torch.Tensor
) -> None:
    if q_latent.dim() != 3 or cache.dim() != 3:
        raise KernelInputError(
            f"{OP}: need q_latent [B, H, C], cache [B, S, C+R]; "
            f"got {list(q_latent.shape)}, {list(cache.shape)}"
        )
    batch, heads, latent = q_latent.shape
    check_shape("q_pe", q_pe, (batch, heads, -1), OP)
    check_shape("cache", cache, (batch, -1, latent + q_pe.shape[2]), OP)
    check_shape("seq_lens", seq_lens, (batch,), OP)
    if heads > 128 or latent > 1024 or q_pe.shape[2] > 256:
        raise KernelInputError(
            f"{OP}: needs H <= 128, C <= 1024, R <= 256; got {heads}, {latent}, {q_pe.shape[2]}"
        )
    for name, tensor in (("q_latent", q_latent), ("q_pe", q_pe), ("cache", cache)):
        check_dtype(name, tensor, FLOAT_DTYPES, OP)
        if tensor.stride(-1) != 1:
            raise KernelInputError(f"{OP}: {name} needs a contiguous last dimension")
    check_dtype("seq_lens", seq_lens, (torch.int32, torch.int64), OP)
    check_same_device(OP, q_latent=q_latent, q_pe=q_pe, cache=cache, seq_lens=seq_lens)


def launch_mla_decode(
    q_latent: torch.Tensor,
    q_pe: torch.Tensor,
    cache: torch.Tensor,
    seq_lens: torch.Tensor,
    out: torch.Tensor,
    scale: float,
    splits: int,
    pdl: bool,
    num_warps: int | None,
) -> None:
    """Split kernel over (B, splits), then the combine over (B, H), on validated inputs."""
    batch, heads, latent = q_latent.shape
    rope = q_pe.shape[2]
    # [B, splits, H, C] and [B, splits, H]: per-slice results for the combine.
    o_part = torch.empty(batch, splits, heads, latent, dtype=torch.float32, device=q_latent.device)
    lse_part = torch.empty(batch, splits, heads, dtype=torch.float32, device=q_latent.device)
    block_c = max(16, triton.next_power_of_2(latent))
    split_pdl = pdl and batch * splits <= MAX_PDL_SPLIT_PROGRAMS
    mla_split_kernel[(batch, splits)](
        q_latent,
        q_pe,
        cache,
        seq_lens,
        o_part,
        lse_part,
        heads,
        latent,
        rope,
        cache.shape[1],
        q_latent.stride(0),
        q_latent.stride(1),
        q_pe.stride(0),
        q_pe.stride(1),
        cache.stride(0),
        cache.stride(1),
        scale * LOG2E,
        NUM_SPLITS=splits,
        BLOCK_H=max(16, triton.next_power_of_2(heads)),
        BLOCK_C=block_c,
        BLOCK_R=max(16, triton.next_power_of_2(rope)),
        BLOCK_S=32 if block_c <= 512 else 16,
        USE_PDL=split_pdl,
        # fp32 caches get fp32 dots (a GPU's default tl.dot on fp32 is TF32, ~1e-3 off); the bf16
        # production cache keeps the tensor-core path.
        DOT_FP32=is_interpreting() or cache.dtype == torch.float32,
        num_warps=num_warps or 8,
        **launch_options(split_pdl),
    )
    mla_combine_kernel[(batch, heads)](
        o_part,
        lse_part,
        out,
        heads,
        latent,
        out.stride(0),
        out.stride(1),
        NUM_SPLITS=splits,
        BLOCK_SPLITS=triton.next_power_of_2(splits),
        BLOCK_C=block_c,
        USE_PDL=pdl,
        num_warps=4,
        **launch_options(pdl),
    )


def mla_decode(
    q_latent: torch.Tensor,
    q_pe: torch.Tensor,
    cache: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    num_splits: int | None = None,
    use_pdl: bool = False,
    out: torch.Tensor | None = None,
    num_warps: int | None = None,
) -> torch.Tensor:
    """Decode attention of absorbed MLA over the latent cache: split over the context + combine (2 launches).

    Args:
        q_latent: `[B, H, C]` absorbed queries W_UK^T q_nope (C = 512 for Ling).
        q_pe: `[B, H, R]` rotated rope queries (R = 64).
        cache: `[B, S_max, C + R]` rows [normed latent c ; rotated k_pe]; the latent doubles as value.
        seq_lens: `[B]` int32/int64 on the device: rows to attend (read on device, never on the host).
        scale: softmax scale; Ling uses 1/sqrt(qk_nope + qk_rope) = 1/sqrt(192).
        num_splits: context slices per sequence; default `choose_num_splits(B, S_max)`.
        use_pdl: Programmatic Dependent Launch where supported.
        out: optional `[B, H, C]` destination.
        num_warps: warps of the split kernel; default 8.
    Returns:
        `[B, H, C]` (q_latent's dtype unless `out` is given): softmax-weighted latent, before W_UV.
    """
    check_mla_inputs(q_latent, q_pe, cache, seq_lens)
    batch, heads, latent = q_latent.shape
    splits = num_splits or choose_num_splits(batch, cache.shape[1])
    if not 1 <= splits <= MAX_SPLITS:
        raise KernelInputError(f"{OP}: num_splits must be in 1..{MAX_SPLITS}; got {splits}")
    if out is None:
        out = torch.empty(batch, heads, latent, dtype=q_latent.dtype, device=q_latent.device)
    check_shape("out", out, (batch, heads, latent), OP)
    launch_mla_decode(
        q_latent, q_pe, cache, seq_lens, out, scale, splits, resolve_pdl(use_pdl, out.device), num_warps
    )
    return out
