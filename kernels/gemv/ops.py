"""GEMV launcher and public entry point (validation, output allocation, grid choice)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
from bubblescope.kernels._pdl import is_interpreting, launch_options, resolve_pdl
from bubblescope.kernels.gemv.checks import (
    FLOAT_DTYPES,
    KernelInputError,
    check_dtype,
    check_powers_of_two,
    check_same_device,
)
from bubblescope.kernels.gemv.kernel import gemv_kernel
from bubblescope.kernels.gemv.prefetch import prefetch_lines

MAX_ROWS = 16
# M == 1: the widest strip (8 rows down to 1) that still gives this many programs, ~4 per SM of the
# H200's 132. Measured (sweep 2026-11-30, graph + PDL): 4096x2560 bn8 6.9 us, 2560x4096 bn4 7.8 us,
# 1536x2560 bn2 4.1 us, 512x2560 bn1 2.3 us (the old 8-row strips: 9.3, 11.1, 6.0, 4.9 us).
TARGET_PROGRAMS = 512
# Where that rule gives 4-row strips (N in [2048, 4096): the decode step's 2560-row output projections),
# 2 rows x 1024 columns instead: the same 4 KB tile and 56 registers, twice the programs (1280: 9 fit
# per SM, so ~all resident) and half the tiles per program, i.e. about twice the bytes in flight.
# Measured (H200, 2026-12-03, benchmarks/bench_gemv_2560.py, graph + PDL, same run): 2560x4096
# 7.99 -> 7.03 us, 2560x6144 10.67 -> 9.66 us (RESULTS.md, issue 27 round 4).
NARROW_STRIP = (2, 1024)


@dataclass(frozen=True)
class GemvConfig:
    """Tile sizes and warps of one GEMV launch (benchmarks sweep these; the heuristic picks one)."""

    block_n: int
    block_k: int
    num_warps: int = 4
    # M == 1 only: elementwise fp32 accumulation, one reduction at the end (kernel docstring).
    acc_2d: bool = True
    # Streamed weights marked evict-first in L2 (measured neutral on the H200: off by default).
    evict_first: bool = False
    # Where PDL launches the dependent kernel: 0 before gdc_wait, 1 after it, 2 after the main loop.
    pdl_trigger: int = 1
    # Before gdc_wait each program asks L2 for its whole strip (prefetch.py): 0 off, 1 prefetch.global.L2,
    # 2 with evict_last. Off in the CPU interpreter (inline PTX); results are the same either way.
    l2_prefetch: int = 0
    # M == 1 with acc_2d only: two weight tiles in flight per program instead of one (kernel.py).
    pairs: bool = False


def rows_block(rows: int) -> int:
    """BLOCK_M: 1 for a single row (CUDA-core reduction), else 16 (tl.dot needs >= 16 rows)."""
    return 1 if rows == 1 else MAX_ROWS


def choose_config(rows: int, out_features: int, in_features: int) -> GemvConfig:
    """One row: strips of 8..1 rows (>= TARGET_PROGRAMS programs) x 512 columns, 4 warps, but 2 x 1024
    where that gives 4 rows (NARROW_STRIP). Several rows
    (tl.dot): 32 x 256 tiles with 8 warps where N gives >= 128 programs (4096x2560 M=8: 10.5 us against
    13.3 us for 16 x 128), else 16 x 128 with 4 warps."""
    k_cap = max(16, triton.next_power_of_2(in_features))
    if rows == 1:
        block_n = next((bn for bn in (8, 4, 2) if triton.cdiv(out_features, bn) >= TARGET_PROGRAMS), 1)
        if block_n == 4:
            return GemvConfig(block_n=NARROW_STRIP[0], block_k=min(NARROW_STRIP[1], k_cap), num_warps=4)
        return GemvConfig(block_n=block_n, block_k=min(512, k_cap), num_warps=4)
    if triton.cdiv(out_features, 32) >= 128:
        return GemvConfig(block_n=32, block_k=min(256, k_cap), num_warps=8)
    return GemvConfig(block_n=16, block_k=min(128, k_cap), num_warps=4)


def check_gemv_inputs(x: torch.Tensor, weight: torch.Tensor, op: str = "gemv") -> None:
    """Raise KernelInputError unless x is [M<=16, K], weight [N, K], float, one device, unit inner stride."""
    if x.dim() != 2 or weight.dim() != 2:
        raise KernelInputError(
            f"{op}: x must be [M, K] and weight [N, K]; got {list(x.shape)} and {list(weight.shape)}"
        )
    if not 1 <= x.shape[0] <= MAX_ROWS:
        raise KernelInputError(f"{op}: x must have 1..{MAX_ROWS} rows; got {x.shape[0]}")
    if x.shape[1] != weight.shape[1]:
        raise KernelInputError(f"{op}: x has K={x.shape[1]} but weight has K={weight.shape[1]}")
    check_dtype("x", x, FLOAT_DTYPES, op)
    check_dtype("weight", weight, FLOAT_DTYPES, op)
    check_same_device(op, x=x, weight=weight)
    if x.stride(1) != 1 or weight.stride(1) != 1:
        raise KernelInputError(f"{op}: x and weight need a contiguous last dimension")


def check_config(config: GemvConfig, rows: int) -> None:
    """Tiles must be powers of two; tl.dot (rows > 1) needs block_n and block_k >= 16."""
    check_powers_of_two("gemv", config, ("block_n", "block_k"))
    if rows > 1 and min(config.block_n, config.block_k) < 16:
        raise KernelInputError(f"gemv: with {rows} rows block_n and block_k must be >= 16; got {config}")
    if config.pdl_trigger not in (0, 1, 2):
        raise KernelInputError(f"gemv: GemvConfig.pdl_trigger must be 0, 1 or 2; got {config.pdl_trigger}")
    if config.l2_prefetch not in (0, 1, 2):
        raise KernelInputError(f"gemv: GemvConfig.l2_prefetch must be 0, 1 or 2; got {config.l2_prefetch}")


def prefetch_constants(config: GemvConfig) -> dict[str, int]:
    """PREFETCH / PREFETCH_LINES of a launch: the config's mode on a GPU, 0 in the interpreter."""
    if not config.l2_prefetch or is_interpreting():
        return {"PREFETCH": 0, "PREFETCH_LINES": 1}
    return {"PREFETCH": config.l2_prefetch, "PREFETCH_LINES": prefetch_lines(config.num_warps)}


def launch_gemv(
    x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, config: GemvConfig, use_pdl: bool
) -> None:
    """Launch gemv_kernel into a preallocated out [M, N]; inputs already validated."""
    rows, in_features = x.shape
    out_features = weight.shape[0]
    grid = (triton.cdiv(out_features, config.block_n),)
    gemv_kernel[grid](
        x,
        weight,
        out,
        rows,
        out_features,
        in_features,
        x.stride(0),
        weight.stride(0),
        out.stride(0),
        BLOCK_M=rows_block(rows),
        BLOCK_N=config.block_n,
        BLOCK_K=config.block_k,
        USE_PDL=use_pdl,
        DOT_FP32=is_interpreting(),
        ACC_2D=config.acc_2d,
        EVICT_FIRST=config.evict_first,
        PDL_TRIGGER=config.pdl_trigger,
        **prefetch_constants(config),
        PAIRS=config.pairs,
        num_warps=config.num_warps,
        **launch_options(use_pdl),
    )


def gemv(
    x: torch.Tensor,
    weight: torch.Tensor,
    out_dtype: torch.dtype | None = None,
    use_pdl: bool = False,
    config: GemvConfig | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """y = x @ weight^T for 1..16 rows of activations, fp32 accumulation (decode-time nn.Linear).

    Args:
        x: activations `[M, K]`, M in 1..16, fp32/bf16/fp16.
        weight: `[N, K]` row-major (nn.Linear layout), bf16/fp16/fp32.
        out_dtype: result dtype; default x's dtype.
        use_pdl: launch with Programmatic Dependent Launch (ignored where unsupported).
        config: tile sizes; default `choose_config(M, N, K)`.
        out: optional preallocated `[M, N]` result (CUDA-graph friendly).
    Returns:
        `[M, N]` in `out_dtype`.
    """
    check_gemv_inputs(x, weight)
    dtype = out_dtype or x.dtype
    want = (x.shape[0], weight.shape[0])
    if out is None:
        out = torch.empty(want, dtype=dtype, device=x.device)
    elif tuple(out.shape) != want or out.dtype != dtype or out.device != x.device or out.stride(1) != 1:
        raise KernelInputError(
            f"gemv: out must be {list(want)} {dtype} on {x.device}; got {list(out.shape)} {out.dtype}"
        )
    config = config or choose_config(x.shape[0], weight.shape[0], x.shape[1])
    check_config(config, x.shape[0])
    launch_gemv(x, weight, out, config, resolve_pdl(use_pdl, x.device))
    return out
