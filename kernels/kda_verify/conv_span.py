"""Triton helpers for the short conv over `window ++ new tokens` without materialising the concat.

Extended position e < KW-1 reads the conv window `[B, 3, W, KW-1]`, e >= KW-1 reads token e-(KW-1)
of `qkv_pre [B, T, 3, W]`. Token t's conv sees e = t .. t+KW-1; its post-window is e = t+1 .. t+KW-1.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def load_conv_span(
    conv0,
    qkv_pre,
    i_b,
    i_s,
    o_c,
    m_c,
    start,
    o_w,
    m_w,
    s_x_b,
    s_x_t,
    s_x_s,
    s_x_c,
    W: tl.constexpr,
    KM1: tl.constexpr,
):
    """Load extended positions start + o_w for channels o_c of stream i_s as a [BC, BW] fp32 tile."""
    o_e = start + o_w
    m_win = m_c[:, None] & (m_w & (o_e < KM1))[None, :]
    p_win = conv0 + ((i_b * 3 + i_s) * W + o_c[:, None]) * KM1 + o_e[None, :]
    b_win = tl.load(p_win, mask=m_win, other=0.0).to(tl.float32)
    m_tok = m_c[:, None] & (m_w & (o_e >= KM1))[None, :]
    p_tok = qkv_pre + i_b * s_x_b + (o_e - KM1)[None, :] * s_x_t + i_s * s_x_s + o_c[:, None] * s_x_c
    b_tok = tl.load(p_tok, mask=m_tok, other=0.0).to(tl.float32)
    return b_win + b_tok


@triton.jit
def conv_silu_at(
    conv0,
    qkv_pre,
    b_weight,
    i_b,
    i_s,
    o_c,
    m_c,
    i_t,
    o_w,
    s_x_b,
    s_x_t,
    s_x_s,
    s_x_c,
    W: tl.constexpr,
    KW: tl.constexpr,
):
    """SiLU(depthwise conv) of token i_t for channels o_c: a [BC] fp32 vector."""
    b_span = load_conv_span(
        conv0, qkv_pre, i_b, i_s, o_c, m_c, i_t, o_w, o_w < KW, s_x_b, s_x_t, s_x_s, s_x_c, W, KW - 1
    )
    b_conv = tl.sum(b_span * b_weight, axis=1)
    return b_conv * tl.sigmoid(b_conv)


@triton.jit
def store_window_after(
    conv0,
    qkv_pre,
    windows,
    i_b,
    i_s,
    o_c,
    m_c,
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
    """Write the conv window after token i_t to windows[i_b, i_slot, i_s, o_c, :] (n_slots slots)."""
    m_w = o_w < KW - 1
    b_span = load_conv_span(
        conv0, qkv_pre, i_b, i_s, o_c, m_c, i_t + 1, o_w, m_w, s_x_b, s_x_t, s_x_s, s_x_c, W, KW - 1
    )
    p_out = windows + (((i_b * n_slots + i_slot) * 3 + i_s) * W + o_c[:, None]) * (KW - 1) + o_w[None, :]
    tl.store(p_out, b_span.to(windows.dtype.element_ty), mask=m_c[:, None] & m_w[None, :])


@triton.jit
def load_conv_weight(conv_weight, i_s, o_c, m_c, o_w, W: tl.constexpr, KW: tl.constexpr):
    """Taps of channels o_c of stream i_s from conv_weight [3, W, KW] (contiguous): [BC, BW] fp32."""
    p_w = conv_weight + (i_s * W + o_c[:, None]) * KW + o_w[None, :]
    return tl.load(p_w, mask=m_c[:, None] & (o_w < KW)[None, :], other=0.0).to(tl.float32)
