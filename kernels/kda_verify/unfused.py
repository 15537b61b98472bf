"""Unfused KDA chain verify: conv, gating and the T-step delta rule as three launches per layer.

This is what `fused_kda_verify` off runs (the stock engine shape): the conv output and the gated,
normalised q/k/g/beta make an HBM round trip between launches. Same math as fused.py.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from bubblescope.kernels._pdl import launch_options, pdl_launch_dependents, pdl_wait, resolve_pdl
from bubblescope.kernels.kda_verify.common import delta_rule_step, l2_normalize, safe_gate
from bubblescope.kernels.kda_verify.conv_span import conv_silu_at, load_conv_weight, store_window_after


@triton.jit
def _short_conv_verify_kernel(
    qkv_pre,
    conv_weight,
    conv0,
    qkv_post,
    windows,
    T,
    s_x_b,
    s_x_t,
    s_x_s,
    s_x_c,
    W: tl.constexpr,
    KW: tl.constexpr,
    BC: tl.constexpr,
    BW: tl.constexpr,
    USE_PDL: tl.constexpr,
    STORE_ALL: tl.constexpr,
):
    """Grid (W blocks, 3 streams, B): conv + SiLU into qkv_post [B, T, 3, W] fp32, each post-window."""
    i_c, i_s, i_b = tl.program_id(0), tl.program_id(1), tl.program_id(2).to(tl.int64)
    o_c = i_c * BC + tl.arange(0, BC)
    m_c = o_c < W
    o_w = tl.arange(0, BW)
    b_w = load_conv_weight(conv_weight, i_s, o_c, m_c, o_w, W, KW)
    pdl_wait(USE_PDL)
    pdl_launch_dependents(USE_PDL)
    for i_t in range(T):
        b_y = conv_silu_at(
            conv0, qkv_pre, b_w, i_b, i_s, o_c, m_c, i_t, o_w, s_x_b, s_x_t, s_x_s, s_x_c, W, KW
        )
        tl.store(qkv_post + ((i_b * T + i_t) * 3 + i_s) * W + o_c, b_y, mask=m_c)
        if STORE_ALL:
            store_window_after(
                conv0,
                qkv_pre,
                windows,
                i_b,
                i_s,
                o_c,
                m_c,
                i_t,
                i_t,
                T,
                o_w,
                s_x_b,
                s_x_t,
                s_x_s,
                s_x_c,
                W,
                KW,
            )
    if not STORE_ALL:
        store_window_after(
            conv0, qkv_pre, windows, i_b, i_s, o_c, m_c, T - 1, 0, 1, o_w, s_x_b, s_x_t, s_x_s, s_x_c, W, KW
        )


@triton.jit
def _kda_gates_kernel(
    qkv_post,
    f_pre,
    b_pre,
    a_log,
    dt_bias,
    q_out,
    k_out,
    g_out,
    beta_out,
    T,
    scale,
    s_f_b,
    s_f_t,
    s_f_c,
    s_b_b,
    s_b_t,
    s_b_h,
    H: tl.constexpr,
    K: tl.constexpr,
    BK: tl.constexpr,
    LOWER_BOUND: tl.constexpr,
    L2_EPS: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    """Grid (T, H, B): L2-normalised q (scaled) and k, log decay g [B, T, H, K], beta [B, T, H]."""
    i_t, i_h, i_b = (
        tl.program_id(0).to(tl.int64),
        tl.program_id(1).to(tl.int64),
        tl.program_id(2).to(tl.int64),
    )
    W: tl.constexpr = H * K
    o_k = tl.arange(0, BK)
    m_k = o_k < K
    o_c = i_h * K + o_k
    decay_rate = tl.exp(tl.load(a_log + i_h).to(tl.float32))
    b_dt = tl.load(dt_bias + o_c, mask=m_k, other=0.0).to(tl.float32)
    pdl_wait(USE_PDL)
    pdl_launch_dependents(USE_PDL)
    p_row = qkv_post + (i_b * T + i_t) * 3 * W
    b_q = tl.load(p_row + o_c, mask=m_k, other=0.0)
    b_k = tl.load(p_row + W + o_c, mask=m_k, other=0.0)
    b_f = tl.load(f_pre + i_b * s_f_b + i_t * s_f_t + o_c * s_f_c, mask=m_k, other=0.0).to(tl.float32)
    b_b = tl.load(b_pre + i_b * s_b_b + i_t * s_b_t + i_h * s_b_h).to(tl.float32)
    i_bth = (i_b * T + i_t) * H + i_h
    tl.store(q_out + i_bth * K + o_k, l2_normalize(b_q, L2_EPS) * scale, mask=m_k)
    tl.store(k_out + i_bth * K + o_k, l2_normalize(b_k, L2_EPS), mask=m_k)
    tl.store(g_out + i_bth * K + o_k, safe_gate(b_f, b_dt, decay_rate, LOWER_BOUND), mask=m_k)
    tl.store(beta_out + i_bth, tl.sigmoid(b_b))


@triton.jit
def _delta_rule_verify_kernel(
    q_in,
    k_in,
    qkv_post,
    g_in,
    beta_in,
    state0,
    out,
    states,
    T,
    H: tl.constexpr,
    K: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_PDL: tl.constexpr,
    STORE_ALL: tl.constexpr,
):
    """Grid (V blocks, B*H): T delta-rule steps on a [BK, BV] state tile; every or the last state stored."""
    i_v, i_bh = tl.program_id(0), tl.program_id(1).to(tl.int64)
    i_b = i_bh // H
    i_h = i_bh % H
    W: tl.constexpr = H * K
    o_k = tl.arange(0, BK)
    m_k = o_k < K
    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < K
    m_state = m_k[:, None] & m_v[None, :]
    o_state = o_k[:, None] * K + o_v[None, :]
    pdl_wait(USE_PDL)
    pdl_launch_dependents(USE_PDL)
    b_state = tl.load(state0 + i_bh * K * K + o_state, mask=m_state, other=0.0).to(tl.float32)
    for i_t in range(T):
        i_bth = (i_b * T + i_t) * H + i_h
        b_q = tl.load(q_in + i_bth * K + o_k, mask=m_k, other=0.0)
        b_k = tl.load(k_in + i_bth * K + o_k, mask=m_k, other=0.0)
        b_g = tl.load(g_in + i_bth * K + o_k, mask=m_k, other=0.0)
        b_v = tl.load(qkv_post + ((i_b * T + i_t) * 3 + 2) * W + i_h * K + o_v, mask=m_v, other=0.0)
        b_beta = tl.load(beta_in + i_bth)
        b_state, b_out = delta_rule_step(b_state, b_q, b_k, b_v, b_g, b_beta)
        tl.store(out + i_bth * K + o_v, b_out.to(out.dtype.element_ty), mask=m_v)
        if STORE_ALL:
            tl.store(states + i_bth * K * K + o_state, b_state.to(states.dtype.element_ty), mask=m_state)
    if not STORE_ALL:
        tl.store(states + i_bh * K * K + o_state, b_state.to(states.dtype.element_ty), mask=m_state)


def launch_kda_verify_unfused(
    qkv_pre: torch.Tensor,
    f_pre: torch.Tensor,
    b_pre: torch.Tensor,
    conv_weight: torch.Tensor,
    a_log: torch.Tensor,
    dt_bias: torch.Tensor,
    initial_state: torch.Tensor,
    initial_conv: torch.Tensor,
    out: torch.Tensor,
    states: torch.Tensor,
    windows: torch.Tensor,
    *,
    heads: int,
    key_dim: int,
    lower_bound: float,
    scale: float,
    use_pdl: bool,
    block_v: int,
    store_all: bool = True,
) -> None:
    """Three launches with fp32 scratch between them; same contract as launch_kda_verify_fused."""
    batch, seq_len, _, width = qkv_pre.shape
    taps = conv_weight.shape[-1]
    device = qkv_pre.device
    use_pdl = resolve_pdl(use_pdl, device)
    block_k = triton.next_power_of_2(key_dim)
    # [B, T, 3, W] conv output; [B, T, H, K] q, k, g; [B, T, H] beta: the HBM round trip fusion removes
    qkv_post = torch.empty(batch, seq_len, 3, width, dtype=torch.float32, device=device)
    q_n, k_n, g = (
        torch.empty(batch, seq_len, heads, key_dim, dtype=torch.float32, device=device) for _ in range(3)
    )
    beta = torch.empty(batch, seq_len, heads, dtype=torch.float32, device=device)
    block_c = min(256, triton.next_power_of_2(width))
    _short_conv_verify_kernel[(triton.cdiv(width, block_c), 3, batch)](
        qkv_pre,
        conv_weight,
        initial_conv,
        qkv_post,
        windows,
        seq_len,
        *qkv_pre.stride(),
        W=width,
        KW=taps,
        BC=block_c,
        BW=triton.next_power_of_2(taps),
        USE_PDL=use_pdl,
        STORE_ALL=store_all,
        num_warps=4,
        **launch_options(use_pdl),
    )
    _kda_gates_kernel[(seq_len, heads, batch)](
        qkv_post,
        f_pre,
        b_pre,
        a_log,
        dt_bias,
        q_n,
        k_n,
        g,
        beta,
        seq_len,
        float(scale),
        *f_pre.stride(),
        *b_pre.stride(),
        H=heads,
        K=key_dim,
        BK=block_k,
        LOWER_BOUND=float(lower_bound),
        L2_EPS=1e-6,
        USE_PDL=use_pdl,
        num_warps=1,
        **launch_options(use_pdl),
    )
    _delta_rule_verify_kernel[(triton.cdiv(key_dim, block_v), batch * heads)](
        q_n,
        k_n,
        qkv_post,
        g,
        beta,
        initial_state,
        out,
        states,
        seq_len,
        H=heads,
        K=key_dim,
        BK=block_k,
        BV=block_v,
        USE_PDL=use_pdl,
        STORE_ALL=store_all,
        num_warps=4,
        **launch_options(use_pdl),
    )
