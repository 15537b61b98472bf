"""L2 prefetch of a GEMV program's whole weight strip, issued before `gdc_wait` (a benchmark arm: slower).

Why: a decode GEMV's weights never depend on the previous kernel, and under PDL its programs are
resident while that kernel still runs. Loading only the first tile into registers before the wait
leaves HBM idle during the previous kernel's latency-bound tail (KDA decode's chain of round trips,
the MLA glue). A 2560-row projection (2560 x 4096 bf16, 21 MB) fits in the H200's 50 MB L2, so each
program can ask for its whole strip there first: `prefetch.global.L2` per 128-byte line, no
registers held, nothing returned; after the wait the strip's loads hit L2 instead of HBM.

MODE: 0 off, 1 `prefetch.global.L2`, 2 `prefetch.global.L2::evict_last` (the lines stay ahead of
other traffic until read; a benchmark arm). Inline PTX does not run in the CPU interpreter, so the
launchers pass MODE 0 there; the prefetch changes no result, only when bytes arrive.

Measured slower on the H200 (RESULTS.md, issue 27 round 4): the 2560-row GEMV alone +13 % (2560 x 4096)
and +28 % (2560 x 6144), in the KDA block chain +0.95 us per o_proj, in the decode step (as the
`gemv_prefetch` switch, since removed) +0.048 ms per token. Kept as `GemvConfig.l2_prefetch`, off by
default, for the benchmarks (bench_gemv_2560.py, bench_kda_block.py).
"""

from __future__ import annotations

import triton
import triton.language as tl

LINE_BYTES = 128


def prefetch_lines(num_warps: int) -> int:
    """LINES constexpr: lines asked for per loop step, two per thread (independent of the shape, so one
    compile serves every projection)."""
    return 64 * num_warps


@triton.jit
def prefetch_line(p_line, MODE: tl.constexpr):
    """Ask L2 for the 128-byte lines at p_line (elementwise; no value comes back to registers). `$0` is
    a dummy result (inline_asm_elementwise must return one); is_pure=False keeps the instruction."""
    if MODE == 1:
        tl.inline_asm_elementwise(
            "prefetch.global.L2 [$1];\n\tmov.u32 $0, 0;",
            "=r,l",
            [p_line],
            dtype=tl.int32,
            is_pure=False,
            pack=1,
        )
    else:
        tl.inline_asm_elementwise(
            "prefetch.global.L2::evict_last [$1];\n\tmov.u32 $0, 0;",
            "=r,l",
            [p_line],
            dtype=tl.int32,
            is_pure=False,
            pack=1,
        )


@triton.jit
def prefetch_strip_l2(
    p_w, n_start, N, K, stride_wn, BLOCK_N: tl.constexpr, LINES: tl.constexpr, MODE: tl.constexpr
):
    """Prefetch W[n_start : n_start + BLOCK_N, :] line by line, LINES lines a step (row-major over the
    strip). Lines past the strip or N point at the strip's first element instead: always a valid
    address, and no line outside the strip is fetched."""
    if MODE != 0:
        # Elements per 128-byte line (LINE_BYTES * 8 bits).
        line_elems: tl.constexpr = 1024 // p_w.dtype.element_ty.primitive_bitwidth
        per_row = tl.cdiv(K, line_elems)
        lines = BLOCK_N * per_row
        for first in range(0, lines, LINES):
            o_line = first + tl.arange(0, LINES)
            o_row = o_line // per_row
            o_col = (o_line % per_row) * line_elems
            m_line = (o_line < lines) & (n_start + o_row < N)
            p_line = p_w + n_start * stride_wn + tl.where(m_line, o_row * stride_wn + o_col, 0)
            prefetch_line(p_line, MODE)
