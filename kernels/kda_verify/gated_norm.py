"""KDA's output norm of a verify window as one Triton launch (the `verify_gated_norm` switch).

After the KDA verify kernel, each (token, head) row of the attention output o `[T, H, V]` is
RMS-normalised, scaled by the shared norm weight `[V]` and gated by sigmoid(g) (FLA's
FusedRMSNormGated; reference_model.kda.gated_rms_norm). Eager, that is ~11 PyTorch kernels per KDA
layer (casts, pow, mean, add, rsqrt, three multiplies, sigmoid, the cast back): 25 us per layer of a
DSpark verify on the H200 for ~0 bytes (RESULTS.md, issue 27 round 4). Here one program normalises
ROWS rows in registers, fp32 throughout, and writes o's dtype once.
Reference: `gated_rms_norm_naive` (kernels/kda_verify/naive.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from bubblescope.kernels._pdl import launch_options, pdl_launch_dependents, pdl_wait, resolve_pdl
from bubblescope.kernels.kda_verify.common import KDAVerifyInputError

# Rows per program: a 10-token window of 32 heads is 320 rows, 40 programs.
ROWS = 8


@triton.jit
def gated_norm_kernel(
    p_o,
    p_gate,
    p_w,
    p_y,
    n_rows,
    V,
    eps,
    ROWS: tl.constexpr,
    BLOCK_V: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    """Grid (cdiv(n_rows, ROWS),): y = w * o * rsqrt(mean(o^2) + eps) * sigmoid(gate), per row."""
    o_r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    o_v = tl.arange(0, BLOCK_V)
    m_v = o_v < V
    m = (o_r < n_rows)[:, None] & m_v[None, :]
    offsets = o_r[:, None] * V + o_v[None, :]
    # The norm weight does not depend on the previous kernels: fetched before the wait.
    b_w = tl.load(p_w + o_v, mask=m_v, other=0.0).to(tl.float32)
    pdl_wait(USE_PDL)
    pdl_launch_dependents(USE_PDL)
    b_o = tl.load(p_o + offsets, mask=m, other=0.0).to(tl.float32)
    b_g = tl.load(p_gate + offsets, mask=m, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(b_o * b_o, axis=1) / V + eps)
    b_y = b_o * rstd[:, None] * b_w[None, :] * tl.sigmoid(b_g)
    tl.store(p_y + offsets, b_y.to(p_y.dtype.element_ty), mask=m)


def gated_rms_norm_rows(
    o: torch.Tensor, gate: torch.Tensor, weight: torch.Tensor, eps: float, use_pdl: bool = False
) -> torch.Tensor:
    """weight * RMSNorm(o) * sigmoid(gate) over the last dim, as one launch.

    Args:
        o: `[..., V]` attention output; gate: the gate pre-activations, same shape; weight: `[V]`.
        eps: added to mean(o^2) inside the square root.
        use_pdl: Programmatic Dependent Launch where supported.
    Returns:
        o's shape and dtype.
    Raises:
        KDAVerifyInputError: shapes that do not match, or tensors on different devices.
    """
    width = o.shape[-1]
    if gate.shape != o.shape or weight.shape != (width,):
        raise KDAVerifyInputError(
            f"gated norm: gate {list(gate.shape)} must match o {list(o.shape)}, weight must be [{width}]"
        )
    if not (o.device == gate.device == weight.device):
        raise KDAVerifyInputError("gated norm: o, gate and weight must be on one device")
    rows_o, rows_g = o.reshape(-1, width).contiguous(), gate.reshape(-1, width).contiguous()
    out = torch.empty_like(rows_o)
    pdl = resolve_pdl(use_pdl, o.device)
    n_rows = rows_o.shape[0]
    gated_norm_kernel[(triton.cdiv(n_rows, ROWS),)](
        rows_o,
        rows_g,
        weight.contiguous(),
        out,
        n_rows,
        width,
        float(eps),
        ROWS=ROWS,
        BLOCK_V=triton.next_power_of_2(width),
        USE_PDL=pdl,
        **launch_options(pdl),
    )
    return out.view(o.shape)
