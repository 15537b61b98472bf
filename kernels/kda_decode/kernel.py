"""Triton KDA decode step (T = 1): the whole layer body between the projections and o_proj in ONE launch.

Why one launch: every dependency stays inside one (batch, head) pair. The head's q/k/v channels
need only their own conv state, the gate and beta are per head, the delta rule touches only that
head's [K, V] state, and the output RMSNorm reduces over that head's V. So grid (B, H) with no
cross-program communication. Splitting V over programs would add parallelism but needs a
cross-program norm reduction and makes the shared q/k conv-state update a race (one program would
overwrite inputs another still reads): two launches. With H = 32 programs of 8 warps each holding
a 128x128 fp32 state tile (64 registers per thread) the single launch moves 4 MiB of state per
layer and is bound by per-SM bandwidth, not by launches.
"""

from __future__ import annotations

import triton
import triton.language as tl
from bubblescope.kernels._pdl import pdl_launch_dependents, pdl_wait


@triton.jit
def load_conv_weights(p_w, o_c, m_c, KW: tl.constexpr, BLOCK_T: tl.constexpr):
    """(taps 0..KW-2 as [BLOCK_C, BLOCK_T], tap KW-1 as [BLOCK_C]) in fp32, zero outside."""
    o_t = tl.arange(0, BLOCK_T)
    m_w = m_c[:, None] & (o_t < KW - 1)[None, :]
    b_w_old = tl.load(p_w + o_c[:, None] * KW + o_t[None, :], mask=m_w, other=0.0).to(tl.float32)
    b_w_new = tl.load(p_w + o_c * KW + (KW - 1), mask=m_c, other=0.0).to(tl.float32)
    return b_w_old, b_w_new


@triton.jit
def short_conv_silu(p_x, p_state, b_w_old, b_w_new, o_c, m_c, KW: tl.constexpr, BLOCK_T: tl.constexpr):
    """SiLU(depthwise causal conv) of one token for channels o_c; shifts the conv state in place.

    p_state points at this row's [C, KW-1] state (oldest first). All old values are loaded before
    the shifted state is stored, and no other program touches these channels.
    """
    o_t = tl.arange(0, BLOCK_T)
    p_row = p_state + o_c[:, None] * (KW - 1) + o_t[None, :]
    m_state = m_c[:, None] & (o_t < KW - 1)[None, :]
    b_x = tl.load(p_x + o_c, mask=m_c, other=0.0)
    b_old = tl.load(p_row, mask=m_state, other=0.0).to(tl.float32)
    # Slot t of the new state holds old slot t+1; the last slot holds this token's input.
    b_shift = tl.load(p_row + 1, mask=m_c[:, None] & (o_t < KW - 2)[None, :], other=0.0)
    b_shift = tl.where((o_t == KW - 2)[None, :], b_x[:, None].to(b_shift.dtype), b_shift)
    b_acc = tl.sum(b_old * b_w_old, axis=1) + b_w_new * b_x.to(tl.float32)
    tl.store(p_row, b_shift, mask=m_state)
    return b_acc * tl.sigmoid(b_acc)


@triton.jit
def kda_decode_kernel(
    p_q,
    p_k,
    p_v,
    p_f,
    p_b,
    p_gate,
    stride_qb,
    stride_kb,
    stride_vb,
    stride_fb,
    stride_bb,
    stride_gb,
    p_q_conv_w,
    p_k_conv_w,
    p_v_conv_w,
    p_a_log,
    p_dt_bias,
    p_o_norm,
    p_q_state,
    p_k_state,
    p_v_state,
    p_state,
    p_out,
    stride_ob,
    H,
    K,
    V,
    lower_bound,
    scale,
    eps,
    KW: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_V: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    """Grid (B, H): program (i_b, i_h) runs steps 2-7 of notes §3.1 for one head of one sequence."""
    i_b = tl.program_id(0).to(tl.int64)
    i_h = tl.program_id(1).to(tl.int64)
    o_k = tl.arange(0, BLOCK_K)
    o_v = tl.arange(0, BLOCK_V)
    m_k = o_k < K
    m_v = o_v < V
    o_ck = i_h * K + o_k
    o_cv = i_h * V + o_v
    # Weights never depend on the previous kernel: load them before gdc_wait.
    b_wq_old, b_wq_new = load_conv_weights(p_q_conv_w, o_ck, m_k, KW, BLOCK_T)
    b_wk_old, b_wk_new = load_conv_weights(p_k_conv_w, o_ck, m_k, KW, BLOCK_T)
    b_wv_old, b_wv_new = load_conv_weights(p_v_conv_w, o_cv, m_v, KW, BLOCK_T)
    b_rate = tl.exp(tl.load(p_a_log + i_h).to(tl.float32))
    b_dt_bias = tl.load(p_dt_bias + o_ck, mask=m_k, other=0.0).to(tl.float32)
    b_o_norm = tl.load(p_o_norm + o_v, mask=m_v, other=0.0).to(tl.float32)
    pdl_wait(USE_PDL)
    # After the wait: an earlier trigger lets a chain of kernels cascade (see gemv/kernel.py).
    pdl_launch_dependents(USE_PDL)

    conv_k_rows = H * K * (KW - 1)
    b_q = short_conv_silu(
        p_q + i_b * stride_qb, p_q_state + i_b * conv_k_rows, b_wq_old, b_wq_new, o_ck, m_k, KW, BLOCK_T
    )
    b_k = short_conv_silu(
        p_k + i_b * stride_kb, p_k_state + i_b * conv_k_rows, b_wk_old, b_wk_new, o_ck, m_k, KW, BLOCK_T
    )
    b_v = short_conv_silu(
        p_v + i_b * stride_vb, p_v_state + i_b * H * V * (KW - 1), b_wv_old, b_wv_new, o_cv, m_v, KW, BLOCK_T
    )
    # L2 norm with eps inside the sqrt (FLA convention); q also takes the K^-1/2 scale.
    b_q = b_q / tl.sqrt(tl.sum(b_q * b_q, axis=0) + eps) * scale
    b_k = b_k / tl.sqrt(tl.sum(b_k * b_k, axis=0) + eps)
    b_f = tl.load(p_f + i_b * stride_fb + o_ck, mask=m_k, other=0.0).to(tl.float32)
    b_decay = tl.exp(lower_bound * tl.sigmoid(b_rate * (b_f + b_dt_bias)))
    b_beta = tl.sigmoid(tl.load(p_b + i_b * stride_bb + i_h).to(tl.float32))

    # [BLOCK_K, BLOCK_V] fp32 state of this head: decay -> correct -> update -> read.
    p_s = p_state + ((i_b * H + i_h) * K + o_k[:, None]) * V + o_v[None, :]
    m_s = m_k[:, None] & m_v[None, :]
    b_s = tl.load(p_s, mask=m_s, other=0.0) * b_decay[:, None]
    b_u = b_beta * (b_v - tl.sum(b_s * b_k[:, None], axis=0))
    b_s += b_k[:, None] * b_u[None, :]
    tl.store(p_s, b_s, mask=m_s)
    b_o = tl.sum(b_s * b_q[:, None], axis=0)

    b_gate = tl.load(p_gate + i_b * stride_gb + o_cv, mask=m_v, other=0.0).to(tl.float32)
    b_rstd = 1.0 / tl.sqrt(tl.sum(b_o * b_o, axis=0) / V + eps)
    b_out = b_o * b_rstd * b_o_norm * tl.sigmoid(b_gate)
    tl.store(p_out + i_b * stride_ob + o_cv, b_out.to(p_out.dtype.element_ty), mask=m_v)
