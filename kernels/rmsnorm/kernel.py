"""Triton residual-add + RMSNorm: one program per row, the whole row in registers (D <= 16384)."""

from __future__ import annotations

import triton
import triton.language as tl
from bubblescope.kernels._pdl import pdl_launch_dependents, pdl_wait


@triton.jit
def add_rmsnorm_kernel(
    p_x,
    p_res,
    p_w,
    p_y,
    p_res_out,
    D,
    eps,
    HAS_RESIDUAL: tl.constexpr,
    BLOCK_D: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    """Grid (M,): r = x + res (fp32), y = w * r * rsqrt(mean(r^2) + eps); writes y and r.

    p_res_out may alias p_res (in-place residual update): each element is read before it is written
    by the same program.
    """
    i_m = tl.program_id(0).to(tl.int64)
    o_d = tl.arange(0, BLOCK_D)
    m_d = o_d < D
    # The norm weight does not depend on the previous kernel: fetch it before waiting.
    b_w = tl.load(p_w + o_d, mask=m_d, other=0.0).to(tl.float32)
    pdl_wait(USE_PDL)
    # After the wait: an earlier trigger lets a chain of kernels cascade (see gemv/kernel.py).
    pdl_launch_dependents(USE_PDL)
    b_r = tl.load(p_x + i_m * D + o_d, mask=m_d, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        b_r += tl.load(p_res + i_m * D + o_d, mask=m_d, other=0.0).to(tl.float32)
    tl.store(p_res_out + i_m * D + o_d, b_r.to(p_res_out.dtype.element_ty), mask=m_d)
    rstd = 1.0 / tl.sqrt(tl.sum(b_r * b_r, axis=0) / D + eps)
    tl.store(p_y + i_m * D + o_d, (b_w * b_r * rstd).to(p_y.dtype.element_ty), mask=m_d)
