"""Fused KDA chain verify: conv + SiLU + gating + L2 norm + T delta-rule steps in ONE launch per layer.

Each program owns one (batch, head) and one block of BV value channels. It recomputes the conv of
the head's q and k channels (K of them; cheap next to the [K, BV] state tile it streams), convs its
own v channels, and walks the T tokens keeping the state tile in registers, writing the output,
the state after every token, and the conv window after every token. Program V-block 0 writes the
q/k windows, every V block its own v windows. The persistent state and window are only read.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from bubblescope.kernels._pdl import launch_options, pdl_launch_dependents, pdl_wait, resolve_pdl
from bubblescope.kernels.kda_verify.common import delta_rule_step, l2_normalize, safe_gate
from bubblescope.kernels.kda_verify.conv_span import conv_silu_at, load_conv_weight, store_window_after


@triton.jit
def _store_windows(
    conv0,
    qkv_pre,
    windows,
    i_b,
    i_v,
    o_qk,
    m_k,
    o_vc,
    m_v,
    i_t,
    i_slot,
    n_slots,
    o_w,
    s_x_b,
    s_x_t,
    s_x_s,
    s_x_c,
    W: tl.constexpr,
    KW: tl.constexpr,
):
    """V-block 0 writes the head's q/k windows; every V block writes its own v channels' window."""
    if i_v == 0:
        store_window_after(
            conv0,
            qkv_pre,
            windows,
            i_b,
            0,
            o_qk,
            m_k,
            i_t,
            i_slot,
            n_slots,
            o_w,
            s_x_b,
            s_x_t,
            s_x_s,
            s_x_c,
            W,
            KW,
        )
        store_window_after(
            conv0,
            qkv_pre,
            windows,
            i_b,
            1,
            o_qk,
            m_k,
            i_t,
            i_slot,
            n_slots,
            o_w,
            s_x_b,
            s_x_t,
            s_x_s,
            s_x_c,
            W,
            KW,
        )
    store_window_after(
        conv0,
        qkv_pre,
        windows,
        i_b,
        2,
        o_vc,
        m_v,
        i_t,
        i_slot,
        n_slots,
        o_w,
        s_x_b,
        s_x_t,
        s_x_s,
        s_x_c,
        W,
        KW,
    )


@triton.jit
def _kda_verify_fused_kernel(
    qkv_pre,
    f_pre,
    b_pre,
    conv_weight,
    a_log,
    dt_bias,
    state0,
    conv0,
    out,
    states,
    windows,
    T,
    scale,
    s_x_b,
    s_x_t,
    s_x_s,
    s_x_c,
    s_f_b,
    s_f_t,
    s_f_c,
    s_b_b,
    s_b_t,
    s_b_h,
    H: tl.constexpr,
    K: tl.constexpr,
    KW: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    BW: tl.constexpr,
    LOWER_BOUND: tl.constexpr,
    L2_EPS: tl.constexpr,
    USE_PDL: tl.constexpr,
    STORE_ALL: tl.constexpr,
):
    i_v, i_bh = tl.program_id(0), tl.program_id(1)
    i_b = (i_bh // H).to(tl.int64)
    i_h = (i_bh % H).to(tl.int64)
    W: tl.constexpr = H * K
    o_k = tl.arange(0, BK)
    m_k = o_k < K
    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < K
    o_w = tl.arange(0, BW)
    o_qk = i_h * K + o_k
    o_vc = i_h * K + o_v

    # Weights never depend on the previous kernel: load them before waiting on it (PDL).
    b_wq = load_conv_weight(conv_weight, 0, o_qk, m_k, o_w, W, KW)
    b_wk = load_conv_weight(conv_weight, 1, o_qk, m_k, o_w, W, KW)
    b_wv = load_conv_weight(conv_weight, 2, o_vc, m_v, o_w, W, KW)
    decay_rate = tl.exp(tl.load(a_log + i_h).to(tl.float32))
    b_dt = tl.load(dt_bias + o_qk, mask=m_k, other=0.0).to(tl.float32)
    pdl_wait(USE_PDL)
    pdl_launch_dependents(USE_PDL)

    m_state = m_k[:, None] & m_v[None, :]
    o_state = o_k[:, None] * K + o_v[None, :]
    b_state = tl.load(state0 + i_bh.to(tl.int64) * K * K + o_state, mask=m_state, other=0.0).to(tl.float32)
    for i_t in range(T):
        b_q = conv_silu_at(
            conv0, qkv_pre, b_wq, i_b, 0, o_qk, m_k, i_t, o_w, s_x_b, s_x_t, s_x_s, s_x_c, W, KW
        )
        b_k = conv_silu_at(
            conv0, qkv_pre, b_wk, i_b, 1, o_qk, m_k, i_t, o_w, s_x_b, s_x_t, s_x_s, s_x_c, W, KW
        )
        b_v = conv_silu_at(
            conv0, qkv_pre, b_wv, i_b, 2, o_vc, m_v, i_t, o_w, s_x_b, s_x_t, s_x_s, s_x_c, W, KW
        )
        if STORE_ALL:
            _store_windows(
                conv0,
                qkv_pre,
                windows,
                i_b,
                i_v,
                o_qk,
                m_k,
                o_vc,
                m_v,
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
        b_f = tl.load(f_pre + i_b * s_f_b + i_t * s_f_t + o_qk * s_f_c, mask=m_k, other=0.0).to(tl.float32)
        b_g = safe_gate(b_f, b_dt, decay_rate, LOWER_BOUND)
        b_beta = tl.sigmoid(tl.load(b_pre + i_b * s_b_b + i_t * s_b_t + i_h * s_b_h).to(tl.float32))
        b_q = l2_normalize(b_q, L2_EPS) * scale
        b_k = l2_normalize(b_k, L2_EPS)
        b_state, b_out = delta_rule_step(b_state, b_q, b_k, b_v, b_g, b_beta)
        i_bth = (i_b * T + i_t) * H + i_h
        tl.store(out + i_bth * K + o_v, b_out.to(out.dtype.element_ty), mask=m_v)
        if STORE_ALL:
            tl.store(states + i_bth * K * K + o_state, b_state.to(states.dtype.element_ty), mask=m_state)
    if not STORE_ALL:
        # Final-only mode (the in-place verify of staged_kda off): one state and one window.
        tl.store(
            states + i_bh.to(tl.int64) * K * K + o_state, b_state.to(states.dtype.element_ty), mask=m_state
        )
        _store_windows(
            conv0,
            qkv_pre,
            windows,
            i_b,
            i_v,
            o_qk,
            m_k,
            o_vc,
            m_v,
            T - 1,
            0,
            1,
            o_w,
            s_x_b,
            s_x_t,
            s_x_s,
            s_x_c,
            W,
            KW,
        )


def launch_kda_verify_fused(
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
    """Grid (V blocks, B*H); outputs preallocated and contiguous, inputs already validated.

    store_all: states/windows hold every position ([B, T, ...]) or only the last ([B, 1, ...]).
    """
    batch, seq_len = qkv_pre.shape[:2]
    taps = conv_weight.shape[-1]
    use_pdl = resolve_pdl(use_pdl, qkv_pre.device)
    grid = (triton.cdiv(key_dim, block_v), batch * heads)
    _kda_verify_fused_kernel[grid](
        qkv_pre,
        f_pre,
        b_pre,
        conv_weight,
        a_log,
        dt_bias,
        initial_state,
        initial_conv,
        out,
        states,
        windows,
        seq_len,
        float(scale),
        *qkv_pre.stride(),
        *f_pre.stride(),
        *b_pre.stride(),
        H=heads,
        K=key_dim,
        KW=taps,
        BK=triton.next_power_of_2(key_dim),
        BV=block_v,
        BW=triton.next_power_of_2(taps),
        LOWER_BOUND=float(lower_bound),
        L2_EPS=1e-6,
        USE_PDL=use_pdl,
        STORE_ALL=store_all,
        num_warps=4,
        **launch_options(use_pdl),
    )
