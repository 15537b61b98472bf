"""KDA decode step with V split over programs: grid (B, H, NV) instead of (B, H), still ONE launch.

Why: the one-program-per-head kernel runs only B*H = 32 programs for Ling, a quarter of the H200's
SMs, each moving its head's 128 KiB of fp32 state through one SM. Splitting V gives NV times the
programs, each owning a [K, V/NV] slice of the state. Two things couple the slices of a head:
- q and k (conv + SiLU + L2 norm over K) are needed by every slice. They are tiny, so each program
  recomputes them from the conv state WITHOUT writing it; shifting the shared q/k conv state would
  race with slices still reading it.
- the gated output RMSNorm reduces over all of V. Each program stores its unnormalised o slice
  (fp32) in a workspace; the last program sums the squares of the whole row itself, in a fixed
  order (an atomic per-slice accumulator would add in arrival order: fp32 results that change from
  run to run, which broke the fast path's bit-stable switch checks on the H200).
Each program then takes a ticket from a per-head counter (acq_rel, after a barrier so all of its
threads' writes and reads are done). The program that draws the last ticket has seen every other
slice's writes and every slice has finished reading the old q/k conv state: it shifts that state,
normalises and gates the whole head's output, and re-arms the counter to zero for the next call
(or CUDA-graph replay). No program ever waits for another, so nothing can deadlock.
The v conv state is per channel, so each slice shifts its own part in place.

Latency (kernel.py's docstring has the load order): the state slice, the conv windows, the gate row
and the o_norm weight are all in registers before the ticket, so the last program's only load is
the workspace row. Each program stores its updated state slice and v window after its ticket: the
release before the ticket then waits for the small workspace store, not for 16 KiB of state stores,
and the barrier before the ticket guarantees that no warp still reads what these stores overwrite.

NORM_IN_CONSUMER (`kda_norm_in_oproj`): the norm's reduction moves to o_proj's prologue
(kernels/gemv/head_norm_prologue.py). Each program stores its gated, un-normed fp32 slice
o * o_norm * sigmoid(gate) straight into out (elementwise, local to the slice) and the slice's sum of
squares of o into p_sumsq[b, h, s]; no workspace, no last-program norm. The ticket
stays for the one job left to it, shifting the shared q/k conv state once every slice has read it, and
is relaxed: nothing is published through it any more (the last program reads no other program's
writes), and every thread's conv-window loads have returned before the barrier that precedes it
(their values feed the o store issued before the barrier).
EARLY_TICKET (with NORM_IN_CONSUMER; `kda_decode_heads(early_ticket=True)`, the switch's default): the ticket
is taken as soon as the q/k windows' taps are summed, under PDL with the state prefetched BEFORE gdc_wait,
so its L2 round trip overlaps the previous kernel instead of ending the post-wait chain. Safe because a
launch's pre-wait code runs only once every kernel two launches back has completed (each kernel triggers
its dependents after its own wait, gemv/kernel.py), so the previous KDA layer, which shares the counters,
has re-armed them; same math (conv_taps + silu_of_conv is conv_silu's order).
"""

from __future__ import annotations

import triton
import triton.language as tl
from bubblescope.kernels._pdl import pdl_launch_dependents, pdl_wait
from bubblescope.kernels.kda_decode.kernel import (
    conv_silu,
    conv_taps,
    delta_rule_step,
    load_conv_weights,
    load_head_state,
    silu_of_conv,
    store_conv_window,
)


@triton.jit
def finish_head(
    p_ws_o,
    p_ws_count,
    b_gate,
    b_o_norm,
    p_out_row,
    i_bh,
    i_h,
    V,
    eps,
    BLOCK_V: tl.constexpr,
):
    """Last slice of a head: RMSNorm of the whole o row (squares summed here), gate, store; re-arm.

    b_gate (fp32, pre-sigmoid) and b_o_norm are the head's whole `[BLOCK_V]` rows, already loaded.
    """
    o_v = tl.arange(0, BLOCK_V)
    m_v = o_v < V
    # .cg: read at L2, where the other SMs' writes are; never a stale L1 line from an earlier call.
    b_o = tl.load(p_ws_o + i_bh * V + o_v, mask=m_v, other=0.0, cache_modifier=".cg")
    b_sq = tl.sum(b_o * b_o, axis=0)
    b_rstd = 1.0 / tl.sqrt(b_sq / V + eps)
    b_out = b_o * b_rstd * b_o_norm * tl.sigmoid(b_gate)
    tl.store(p_out_row + i_h * V + o_v, b_out.to(p_out_row.dtype.element_ty), mask=m_v)
    tl.atomic_xchg(p_ws_count + i_bh, 0, sem="relaxed")


@triton.jit
def kda_decode_split_kernel(
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
    p_ws_o,
    p_ws_count,
    p_sumsq,
    H,
    K,
    V,
    V_SLICE,
    lower_bound,
    scale,
    eps,
    NUM_V_SPLITS: tl.constexpr,
    KW: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_V: tl.constexpr,
    BLOCK_VS: tl.constexpr,
    USE_PDL: tl.constexpr,
    PREFETCH_STATE: tl.constexpr,
    NORM_IN_CONSUMER: tl.constexpr = False,
    EARLY_TICKET: tl.constexpr = False,
):
    """Grid (B, H, NUM_V_SPLITS): program (b, h, s) owns v columns [s*V_SLICE, (s+1)*V_SLICE)."""
    i_b = tl.program_id(0).to(tl.int64)
    i_h = tl.program_id(1).to(tl.int64)
    i_s = tl.program_id(2).to(tl.int64)
    i_bh = i_b * H + i_h
    o_k = tl.arange(0, BLOCK_K)
    o_vs = i_s * V_SLICE + tl.arange(0, BLOCK_VS)
    o_v = tl.arange(0, BLOCK_V)
    m_k = o_k < K
    m_vs = (tl.arange(0, BLOCK_VS) < V_SLICE) & (o_vs < V)
    m_v = o_v < V
    o_ck = i_h * K + o_k
    o_cv = i_h * V + o_vs
    p_q_state_b = p_q_state + i_b * H * K * (KW - 1)
    p_k_state_b = p_k_state + i_b * H * K * (KW - 1)
    p_v_state_b = p_v_state + i_b * H * V * (KW - 1)
    p_s = p_state + (i_bh * K + o_k[:, None]) * V + o_vs[None, :]
    m_s = m_k[:, None] & m_vs[None, :]
    b_wq_old, b_wq_new = load_conv_weights(p_q_conv_w, o_ck, m_k, KW, BLOCK_T)
    b_wk_old, b_wk_new = load_conv_weights(p_k_conv_w, o_ck, m_k, KW, BLOCK_T)
    b_wv_old, b_wv_new = load_conv_weights(p_v_conv_w, o_cv, m_vs, KW, BLOCK_T)
    b_rate = tl.exp(tl.load(p_a_log + i_h).to(tl.float32))
    b_dt_bias = tl.load(p_dt_bias + o_ck, mask=m_k, other=0.0).to(tl.float32)
    if NORM_IN_CONSUMER:
        # This slice's columns only: each program gates its own slice.
        b_o_norm = tl.load(p_o_norm + o_vs, mask=m_vs, other=0.0).to(tl.float32)
    else:
        # The whole row: whichever program finishes the head needs it.
        b_o_norm = tl.load(p_o_norm + o_v, mask=m_v, other=0.0).to(tl.float32)
    # PREFETCH_STATE: the state is read before the wait (the previous kernel never writes it).
    if not PREFETCH_STATE:
        pdl_wait(USE_PDL)
    b_qc_old, b_qc_shift, b_kc_old, b_kc_shift, b_vc_old, b_vc_shift, b_s = load_head_state(
        p_q_state_b, p_k_state_b, p_v_state_b, p_s, o_ck, m_k, o_cv, m_vs, m_s, KW, BLOCK_T
    )
    if EARLY_TICKET:
        # The q/k windows' part of the conv, then the ticket: every thread has its window values in
        # registers (the sums used them), so no slice reads the windows after this barrier.
        b_q_taps = conv_taps(b_qc_old, b_wq_old)
        b_k_taps = conv_taps(b_kc_old, b_wk_old)
        tl.debug_barrier()
        ticket = tl.atomic_add(p_ws_count + i_bh, 1, sem="relaxed")
    if PREFETCH_STATE:
        pdl_wait(USE_PDL)
    pdl_launch_dependents(USE_PDL)

    b_xq = tl.load(p_q + i_b * stride_qb + o_ck, mask=m_k, other=0.0)
    b_xk = tl.load(p_k + i_b * stride_kb + o_ck, mask=m_k, other=0.0)
    b_xv = tl.load(p_v + i_b * stride_vb + o_cv, mask=m_vs, other=0.0)
    b_f = tl.load(p_f + i_b * stride_fb + o_ck, mask=m_k, other=0.0).to(tl.float32)
    b_beta = tl.sigmoid(tl.load(p_b + i_b * stride_bb + i_h).to(tl.float32))
    if NORM_IN_CONSUMER:
        b_gate = tl.load(p_gate + i_b * stride_gb + o_cv, mask=m_vs, other=0.0).to(tl.float32)
    else:
        b_gate = tl.load(p_gate + i_b * stride_gb + i_h * V + o_v, mask=m_v, other=0.0).to(tl.float32)
    if EARLY_TICKET:
        b_q = silu_of_conv(b_q_taps, b_xq, b_wq_new)
        b_k = silu_of_conv(b_k_taps, b_xk, b_wk_new)
    else:
        b_q = conv_silu(b_xq, b_qc_old, b_wq_old, b_wq_new)
        b_k = conv_silu(b_xk, b_kc_old, b_wk_old, b_wk_new)
    b_v = conv_silu(b_xv, b_vc_old, b_wv_old, b_wv_new)
    # [BLOCK_K, BLOCK_VS] fp32 slice of this head's state.
    b_s, b_o = delta_rule_step(b_q, b_k, b_v, b_f, b_beta, b_rate, b_dt_bias, b_s, lower_bound, scale, eps)
    b_o = tl.where(m_vs, b_o, 0.0)

    if NORM_IN_CONSUMER:
        tl.store(p_out + i_b * stride_ob + o_cv, b_o * b_o_norm * tl.sigmoid(b_gate), mask=m_vs)
        tl.store(p_sumsq + i_bh * NUM_V_SPLITS + i_s, tl.sum(b_o * b_o, axis=0))
        # The barrier orders every thread's state reads before the stores below (next comment).
        tl.debug_barrier()
        if not EARLY_TICKET:
            ticket = tl.atomic_add(p_ws_count + i_bh, 1, sem="relaxed")
    else:
        tl.store(p_ws_o + i_bh * V + o_vs, b_o, mask=m_vs)
        # Every thread's workspace store (and q/k conv-state read) must be done before this slice's
        # ticket. The barrier also orders every thread's state and v-window reads before the stores
        # below: a small slice's window is held by several warps at once (BLOCK_VS = 8: four copies),
        # and a warp that stored its shifted window before another warp had read it gave wrong,
        # run-to-run different outputs on the H200 (issue 17).
        tl.debug_barrier()
        ticket = tl.atomic_add(p_ws_count + i_bh, 1, sem="acq_rel")
    tl.store(p_s, b_s, mask=m_s)
    store_conv_window(p_v_state_b, b_vc_shift, b_xv, o_cv, m_vs, KW, BLOCK_T)
    if ticket == NUM_V_SPLITS - 1:
        store_conv_window(p_q_state_b, b_qc_shift, b_xq, o_ck, m_k, KW, BLOCK_T)
        store_conv_window(p_k_state_b, b_kc_shift, b_xk, o_ck, m_k, KW, BLOCK_T)
        if NORM_IN_CONSUMER:
            tl.atomic_xchg(p_ws_count + i_bh, 0, sem="relaxed")
        else:
            finish_head(
                p_ws_o,
                p_ws_count,
                b_gate,
                b_o_norm,
                p_out + i_b * stride_ob,
                i_bh,
                i_h,
                V,
                eps,
                BLOCK_V,
            )
