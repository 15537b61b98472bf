"""Triton KDA decode step (T = 1): the whole layer body between the projections and o_proj in ONE launch.

Why one launch: every dependency stays inside one (batch, head) pair. The head's q/k/v channels
need only their own conv state, the gate and beta are per head, the delta rule touches only that
head's [K, V] state, and the output RMSNorm reduces over that head's V. So grid (B, H) with no
cross-program communication. Splitting V over programs adds parallelism (split_kernel.py) at the
price of a cross-program norm reduction and a shared q/k conv state.

Load order (both kernels): everything that does not come from the previous kernel in the stream
(conv weights, conv-state windows, the fp32 recurrent state) is loaded first, in one batch, and
only the projections (q, k, v, f, b, gate) after gdc_wait. Under PDL the state bytes then stream
in while the in_proj GEMV before this kernel still runs (PREFETCH_STATE); without PDL they at
least share one memory round trip with the projections instead of following them. The conv
windows are loaded twice, as taps and shifted by one, so the state shift is a store from
registers, not a load after the math.
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
def load_conv_window(p_state, o_c, m_c, KW: tl.constexpr, BLOCK_T: tl.constexpr):
    """A conv state's rows o_c (`[C, KW-1]`, oldest first) as (taps, shifted): shifted[t] = taps[t+1],
    its last slot (still to receive this token's input) zero. Both in the state's dtype."""
    o_t = tl.arange(0, BLOCK_T)
    p_row = p_state + o_c[:, None] * (KW - 1) + o_t[None, :]
    b_old = tl.load(p_row, mask=m_c[:, None] & (o_t < KW - 1)[None, :], other=0.0)
    b_shift = tl.load(p_row + 1, mask=m_c[:, None] & (o_t < KW - 2)[None, :], other=0.0)
    return b_old, b_shift


@triton.jit
def conv_silu(b_x, b_old, b_w_old, b_w_new):
    """SiLU(depthwise causal conv) of one token: taps `b_old` [C, T] and input `b_x` [C] (fp32 out)."""
    return silu_of_conv(conv_taps(b_old, b_w_old), b_x, b_w_new)


@triton.jit
def conv_taps(b_old, b_w_old):
    """The conv's sum over the previous inputs `b_old` [C, T] (fp32 [C]): all of it but this token's tap."""
    return tl.sum(b_old.to(tl.float32) * b_w_old, axis=1)


@triton.jit
def silu_of_conv(b_taps, b_x, b_w_new):
    """SiLU(taps + w_new * x): conv_silu finished from conv_taps, the same operations in the same order."""
    b_acc = b_taps + b_w_new * b_x.to(tl.float32)
    return b_acc * tl.sigmoid(b_acc)


@triton.jit
def store_conv_window(p_state, b_shift, b_x, o_c, m_c, KW: tl.constexpr, BLOCK_T: tl.constexpr):
    """state[c] <- state[c][1:] + [x[c]] from registers (b_shift from load_conv_window)."""
    o_t = tl.arange(0, BLOCK_T)
    b_new = tl.where((o_t == KW - 2)[None, :], b_x[:, None].to(b_shift.dtype), b_shift)
    tl.store(
        p_state + o_c[:, None] * (KW - 1) + o_t[None, :], b_new, mask=m_c[:, None] & (o_t < KW - 1)[None, :]
    )


@triton.jit
def load_head_state(
    p_q_state, p_k_state, p_v_state, p_s, o_ck, m_k, o_cv, m_v, m_s, KW: tl.constexpr, BLOCK_T: tl.constexpr
):
    """Everything of a head's state one program reads: q/k/v conv windows and the fp32 [K, V] tile."""
    b_qc_old, b_qc_shift = load_conv_window(p_q_state, o_ck, m_k, KW, BLOCK_T)
    b_kc_old, b_kc_shift = load_conv_window(p_k_state, o_ck, m_k, KW, BLOCK_T)
    b_vc_old, b_vc_shift = load_conv_window(p_v_state, o_cv, m_v, KW, BLOCK_T)
    b_s = tl.load(p_s, mask=m_s, other=0.0)
    return b_qc_old, b_qc_shift, b_kc_old, b_kc_shift, b_vc_old, b_vc_shift, b_s


@triton.jit
def delta_rule_step(b_q, b_k, b_v, b_f, b_beta, b_rate, b_dt_bias, b_s, lower_bound, scale, eps):
    """One token of the gated delta rule on a head's fp32 state `[BLOCK_K, V columns]` (whole or a slice).

    q and k are L2-normed with eps inside the sqrt (FLA convention), q also takes the K^-1/2 scale; then
    decay -> correct -> update -> read. Returns (new state, o over the state's columns). Every decode
    kernel (one program per head, V splits, the persistent KDA block) runs this same sequence.
    """
    b_q = b_q / tl.sqrt(tl.sum(b_q * b_q, axis=0) + eps) * scale
    b_k = b_k / tl.sqrt(tl.sum(b_k * b_k, axis=0) + eps)
    b_decay = tl.exp(lower_bound * tl.sigmoid(b_rate * (b_f + b_dt_bias)))
    b_s = b_s * b_decay[:, None]
    b_u = b_beta * (b_v - tl.sum(b_s * b_k[:, None], axis=0))
    b_s += b_k[:, None] * b_u[None, :]
    return b_s, tl.sum(b_s * b_q[:, None], axis=0)


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
    p_sumsq,
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
    PREFETCH_STATE: tl.constexpr,
    NORM_IN_CONSUMER: tl.constexpr = False,
):
    """Grid (B, H): program (i_b, i_h) runs steps 2-7 of notes §3.1 for one head of one sequence.

    NORM_IN_CONSUMER (`kda_norm_in_oproj`): step 7's RMS scaling is left to o_proj's prologue; out (fp32)
    takes the gated, un-normed row o * o_norm * sigmoid(gate) and p_sumsq[b*H + h] the sum of squares of o."""
    i_b = tl.program_id(0).to(tl.int64)
    i_h = tl.program_id(1).to(tl.int64)
    o_k = tl.arange(0, BLOCK_K)
    o_v = tl.arange(0, BLOCK_V)
    m_k = o_k < K
    m_v = o_v < V
    o_ck = i_h * K + o_k
    o_cv = i_h * V + o_v
    p_q_state_b = p_q_state + i_b * H * K * (KW - 1)
    p_k_state_b = p_k_state + i_b * H * K * (KW - 1)
    p_v_state_b = p_v_state + i_b * H * V * (KW - 1)
    p_s = p_state + ((i_b * H + i_h) * K + o_k[:, None]) * V + o_v[None, :]
    m_s = m_k[:, None] & m_v[None, :]
    # Weights never depend on the previous kernel: load them before gdc_wait.
    b_wq_old, b_wq_new = load_conv_weights(p_q_conv_w, o_ck, m_k, KW, BLOCK_T)
    b_wk_old, b_wk_new = load_conv_weights(p_k_conv_w, o_ck, m_k, KW, BLOCK_T)
    b_wv_old, b_wv_new = load_conv_weights(p_v_conv_w, o_cv, m_v, KW, BLOCK_T)
    b_rate = tl.exp(tl.load(p_a_log + i_h).to(tl.float32))
    b_dt_bias = tl.load(p_dt_bias + o_ck, mask=m_k, other=0.0).to(tl.float32)
    b_o_norm = tl.load(p_o_norm + o_v, mask=m_v, other=0.0).to(tl.float32)
    # PREFETCH_STATE: the state is read before the wait (the previous kernel never writes it).
    if not PREFETCH_STATE:
        pdl_wait(USE_PDL)
    b_qc_old, b_qc_shift, b_kc_old, b_kc_shift, b_vc_old, b_vc_shift, b_s = load_head_state(
        p_q_state_b, p_k_state_b, p_v_state_b, p_s, o_ck, m_k, o_cv, m_v, m_s, KW, BLOCK_T
    )
    if PREFETCH_STATE:
        pdl_wait(USE_PDL)
    # After the wait: an earlier trigger lets a chain of kernels cascade (see gemv/kernel.py).
    pdl_launch_dependents(USE_PDL)

    b_xq = tl.load(p_q + i_b * stride_qb + o_ck, mask=m_k, other=0.0)
    b_xk = tl.load(p_k + i_b * stride_kb + o_ck, mask=m_k, other=0.0)
    b_xv = tl.load(p_v + i_b * stride_vb + o_cv, mask=m_v, other=0.0)
    b_f = tl.load(p_f + i_b * stride_fb + o_ck, mask=m_k, other=0.0).to(tl.float32)
    b_beta = tl.sigmoid(tl.load(p_b + i_b * stride_bb + i_h).to(tl.float32))
    b_gate = tl.load(p_gate + i_b * stride_gb + o_cv, mask=m_v, other=0.0).to(tl.float32)
    b_q = conv_silu(b_xq, b_qc_old, b_wq_old, b_wq_new)
    b_k = conv_silu(b_xk, b_kc_old, b_wk_old, b_wk_new)
    b_v = conv_silu(b_xv, b_vc_old, b_wv_old, b_wv_new)
    # [BLOCK_K, BLOCK_V] fp32 state of this head.
    b_s, b_o = delta_rule_step(b_q, b_k, b_v, b_f, b_beta, b_rate, b_dt_bias, b_s, lower_bound, scale, eps)

    b_sq = tl.sum(b_o * b_o, axis=0)
    if NORM_IN_CONSUMER:
        tl.store(p_out + i_b * stride_ob + o_cv, b_o * b_o_norm * tl.sigmoid(b_gate), mask=m_v)
        tl.store(p_sumsq + i_b * H + i_h, b_sq)
    else:
        b_rstd = 1.0 / tl.sqrt(b_sq / V + eps)
        b_out = b_o * b_rstd * b_o_norm * tl.sigmoid(b_gate)
        tl.store(p_out + i_b * stride_ob + o_cv, b_out.to(p_out.dtype.element_ty), mask=m_v)
    # The states are stored in place only once every thread has read them: a small block is held by
    # several warps at once, and one warp's store must not overtake another warp's read of the same
    # element (split_kernel.py's v window showed that race on the H200).
    tl.debug_barrier()
    tl.store(p_s, b_s, mask=m_s)
    store_conv_window(p_q_state_b, b_qc_shift, b_xq, o_ck, m_k, KW, BLOCK_T)
    store_conv_window(p_k_state_b, b_kc_shift, b_xk, o_ck, m_k, KW, BLOCK_T)
    store_conv_window(p_v_state_b, b_vc_shift, b_xv, o_cv, m_v, KW, BLOCK_T)
