"""What every KDA verify path shares: input checks, and the gate, L2 norm and delta-rule step in Triton."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from bubblescope.errors import BubblescopeError


class KDAVerifyInputError(BubblescopeError):
    """KDA verify inputs with inconsistent shapes, dtypes or devices."""


def _expect(tensor: torch.Tensor, name: str, shape: tuple[int, ...]) -> None:
    if tuple(tensor.shape) != shape:
        raise KDAVerifyInputError(f"KDA verify: {name} must be {shape}; got {tuple(tensor.shape)}")


def validate_verify_inputs(
    qkv_pre: torch.Tensor,
    f_pre: torch.Tensor,
    b_pre: torch.Tensor,
    conv_weight: torch.Tensor,
    a_log: torch.Tensor,
    dt_bias: torch.Tensor,
    initial_state: torch.Tensor,
    initial_conv: torch.Tensor,
) -> tuple[int, int]:
    """Check the documented layouts (kernels/kda_verify/naive.py) and return (H, K).

    Raises:
        KDAVerifyInputError: one line naming the first tensor that does not fit.
    """
    if qkv_pre.dim() != 4 or qkv_pre.shape[2] != 3:
        raise KDAVerifyInputError(f"KDA verify: qkv_pre must be [B, T, 3, W]; got {tuple(qkv_pre.shape)}")
    batch, seq_len, _, width = qkv_pre.shape
    if seq_len < 1:
        raise KDAVerifyInputError("KDA verify: needs at least one token (T >= 1)")
    if b_pre.dim() != 3:
        raise KDAVerifyInputError(f"KDA verify: b_pre must be [B, T, H]; got {tuple(b_pre.shape)}")
    heads = b_pre.shape[-1]
    if heads < 1 or width % heads:
        raise KDAVerifyInputError(f"KDA verify: width {width} does not split into {heads} heads")
    key_dim = width // heads
    taps = conv_weight.shape[-1] if conv_weight.dim() == 3 else 0
    if taps < 2:
        raise KDAVerifyInputError(
            f"KDA verify: conv_weight must be [3, W, KW>=2]; got {tuple(conv_weight.shape)}"
        )
    _expect(b_pre, "b_pre", (batch, seq_len, heads))
    _expect(f_pre, "f_pre", (batch, seq_len, width))
    _expect(conv_weight, "conv_weight", (3, width, taps))
    _expect(a_log, "A_log", (heads,))
    _expect(dt_bias, "dt_bias", (width,))
    _expect(initial_state, "initial_state", (batch, heads, key_dim, key_dim))
    _expect(initial_conv, "initial_conv", (batch, 3, width, taps - 1))
    tensors = (qkv_pre, f_pre, b_pre, conv_weight, a_log, dt_bias, initial_state, initial_conv)
    if len({x.device for x in tensors}) != 1:
        raise KDAVerifyInputError(
            f"KDA verify: inputs on several devices {sorted({str(x.device) for x in tensors})}"
        )
    if not all(x.is_floating_point() for x in tensors):
        raise KDAVerifyInputError("KDA verify: inputs must be floating point")
    return heads, key_dim


@triton.jit
def delta_rule_step(b_state, b_q, b_k, b_v, b_g, b_beta):
    """One gated delta-rule step on a [BK, BV] state tile; returns (new state, output [BV]).

    S <- diag(exp(g)) S; u = beta (v - S^T k); S <- S + k u^T; o = S^T q (q already scaled).
    """
    b_state = b_state * tl.exp(b_g)[:, None]
    b_predicted = tl.sum(b_state * b_k[:, None], axis=0)
    b_update = b_beta * (b_v - b_predicted)
    b_state = b_state + b_k[:, None] * b_update[None, :]
    b_out = tl.sum(b_state * b_q[:, None], axis=0)
    return b_state, b_out


@triton.jit
def safe_gate(b_f, b_dt_bias, decay_rate, LOWER_BOUND: tl.constexpr):
    """Log decay g = lower_bound * sigmoid(exp(A_log) * (f + dt_bias)), in (lower_bound, 0)."""
    return LOWER_BOUND * tl.sigmoid(decay_rate * (b_f + b_dt_bias))


@triton.jit
def l2_normalize(b_x, L2_EPS: tl.constexpr):
    """x / sqrt(sum(x^2) + eps): FLA's convention, eps inside the square root."""
    return b_x / tl.sqrt(tl.sum(b_x * b_x, axis=0) + L2_EPS)
