"""Plain PyTorch KDA chain verify: T tokens from a persistent state, every position's state kept.

The reference the Triton verify kernels are checked against, and the CPU path of speculative verify.
A verify runs the KDA recurrence over the anchor token plus the drafted tokens, but must not touch
the persistent state: a rejected draft token would corrupt it. So it writes the recurrent state and
the short-conv window after EVERY position to scratch; the caller commits the one at the accepted
length. Math: shared/notes/ling3_flash.md §3.1 steps 2-6 (projections and output norm stay outside).

Layouts (batch B, tokens T, heads H, head dim K = V, width W = H * K, conv kernel KW):
- `qkv_pre [B, T, 3, W]`: q, k, v projections before the short conv (index 0, 1, 2).
- `conv_weight [3, W, KW]`: depthwise taps; tap KW-1 multiplies the current token.
- conv window `[B, 3, W, KW-1]`: the last KW-1 pre-conv inputs, oldest first.
- recurrent state `[B, H, K, V]`, per-position states `[B, T, H, K, V]`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from bubblescope.kernels.kda.naive import compute_dtype_for, delta_rule_step, l2_normalize_naive
from bubblescope.kernels.kda_verify.common import validate_verify_inputs

# FLA convention: eps inside the square root (notes §3.1 step 3).
L2_EPS = 1e-6


def short_conv_verify(
    qkv_pre: torch.Tensor, conv_weight: torch.Tensor, initial_conv: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal depthwise conv + SiLU over T tokens that continue a conv window.

    Args:
        qkv_pre: `[B, T, 3, W]` pre-conv projections.
        conv_weight: `[3, W, KW]`.
        initial_conv: `[B, 3, W, KW-1]` window before the first token; not modified.

    Returns:
        qkv `[B, T, 3, W]` after conv + SiLU (compute dtype) and the window after each position
        `[B, T, 3, W, KW-1]` in `initial_conv`'s dtype.
    """
    batch, seq_len, _, width = qkv_pre.shape
    taps = conv_weight.shape[-1]
    dtype = compute_dtype_for(qkv_pre, conv_weight)
    # [B, 3, W, KW-1+T]: the old window followed by the new pre-conv inputs
    extended = torch.cat([initial_conv.to(dtype), qkv_pre.to(dtype).permute(0, 2, 3, 1)], dim=-1)
    weight = conv_weight.to(dtype)
    qkv = torch.empty(batch, seq_len, 3, width, dtype=dtype, device=qkv_pre.device)
    windows = torch.empty(batch, seq_len, 3, width, taps - 1, dtype=initial_conv.dtype, device=qkv_pre.device)
    for step in range(seq_len):
        # [B, 3, W, KW]: the inputs the current token's conv sees, oldest first
        span = extended[..., step : step + taps]
        qkv[:, step] = F.silu((span * weight).sum(-1))
        windows[:, step] = span[..., 1:].to(initial_conv.dtype)
    return qkv, windows


def kda_verify_gates(
    qkv: torch.Tensor,
    f_pre: torch.Tensor,
    b_pre: torch.Tensor,
    a_log: torch.Tensor,
    dt_bias: torch.Tensor,
    lower_bound: float,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """L2-normalise q and k per head, scale q, and compute the safe gate and beta.

    Args:
        qkv: `[B, T, 3, W]` after conv + SiLU.
        f_pre: `[B, T, W]` forget-gate projection; b_pre: `[B, T, H]` beta projection.
        a_log: `[H]`; dt_bias: `[W]`; lower_bound: -5 for Ling; scale: multiplies q (K^-1/2).

    Returns:
        q, k `[B, T, H, K]` (normalised, q scaled), v `[B, T, H, V]`, log decay g `[B, T, H, K]`
        in (lower_bound, 0), beta `[B, T, H]`; all in the compute dtype.
    """
    batch, seq_len, _, width = qkv.shape
    heads = b_pre.shape[-1]
    dtype = compute_dtype_for(qkv, f_pre)
    q, k, v = (qkv[:, :, index].to(dtype).reshape(batch, seq_len, heads, -1) for index in range(3))
    q = l2_normalize_naive(q, L2_EPS) * scale
    k = l2_normalize_naive(k, L2_EPS)
    decay_rate = a_log.to(dtype).exp().view(1, 1, heads, 1)
    gate_in = (f_pre.to(dtype) + dt_bias.to(dtype)).reshape(batch, seq_len, heads, -1)
    g = lower_bound * torch.sigmoid(decay_rate * gate_in)
    beta = torch.sigmoid(b_pre.to(dtype))
    return q, k, v, g, beta


def delta_rule_verify(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """T steps of the gated delta rule from `initial_state`, keeping the state after every step.

    Per step: S <- diag(exp(g)) S; u = beta (v - S^T k); S <- S + k u^T; o = S^T q (q pre-scaled).

    Args:
        q, k: `[B, T, H, K]`; v: `[B, T, H, V]`; g: `[B, T, H, K]`; beta: `[B, T, H]`.
        initial_state: `[B, H, K, V]`; not modified.

    Returns:
        o `[B, T, H, V]` and states `[B, T, H, K, V]`, both in `initial_state`'s dtype.
    """
    batch, seq_len, heads, key_dim = q.shape
    state = initial_state.to(q.dtype).clone()
    out = q.new_empty(batch, seq_len, heads, v.shape[-1])
    states = initial_state.new_empty(batch, seq_len, heads, key_dim, v.shape[-1])
    for step in range(seq_len):
        state, out[:, step] = delta_rule_step(
            state, q[:, step], k[:, step], v[:, step], g[:, step], beta[:, step]
        )
        states[:, step] = state.to(initial_state.dtype)
    return out.to(initial_state.dtype), states


def kda_verify_naive(
    qkv_pre: torch.Tensor,
    f_pre: torch.Tensor,
    b_pre: torch.Tensor,
    conv_weight: torch.Tensor,
    a_log: torch.Tensor,
    dt_bias: torch.Tensor,
    initial_state: torch.Tensor,
    initial_conv: torch.Tensor,
    *,
    lower_bound: float = -5.0,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Conv + gating + L2 norm + T delta-rule steps, every position's post-state kept.

    Args: see the module docstring for layouts; `scale` defaults to K^-1/2.

    Returns:
        o `[B, T, H, V]` (qkv_pre's dtype), states `[B, T, H, K, V]` (initial_state's dtype),
        conv windows `[B, T, 3, W, KW-1]` (initial_conv's dtype). The inputs are not modified.
    """
    heads, key_dim = validate_verify_inputs(
        qkv_pre, f_pre, b_pre, conv_weight, a_log, dt_bias, initial_state, initial_conv
    )
    if scale is None:
        scale = key_dim**-0.5
    qkv, windows = short_conv_verify(qkv_pre, conv_weight, initial_conv)
    q, k, v, g, beta = kda_verify_gates(qkv, f_pre, b_pre, a_log, dt_bias, lower_bound, scale)
    out, states = delta_rule_verify(q, k, v, g, beta, initial_state)
    return out.to(qkv_pre.dtype), states, windows


def gated_rms_norm_naive(
    o: torch.Tensor, gate: torch.Tensor, weight: torch.Tensor, eps: float
) -> torch.Tensor:
    """weight * RMSNorm(o) * sigmoid(gate) over the last dim, in fp32 (fp64 for fp64 inputs), returned in
    o's dtype: the reference of kernels/kda_verify/gated_norm.py (as reference_model.kda.gated_rms_norm)."""
    compute = torch.promote_types(o.dtype, torch.float32)
    o32 = o.to(compute)
    normed = o32 * torch.rsqrt(o32.pow(2).mean(-1, keepdim=True) + eps)
    return (normed * weight.to(compute) * torch.sigmoid(gate.to(compute))).to(o.dtype)
