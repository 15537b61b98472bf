"""Phase 2 of the KDA block kernel: one V slice of one head's KDA decode step (batch 1).

The same math as kda_decode's split kernel (kernels/kda_decode/split_kernel.py), operation for
operation and built from its helpers, so the results are bit-identical: conv + SiLU of q/k/v, the
safe gate, beta, the delta rule on a `[K, V/NV]` fp32 slice of the state, the unnormalised output
slice stored in the workspace, a per-head ticket, and the head's gated RMSNorm by the last slice
(`finish_head`). What differs is where the program waits: everything that does not come from
phase 1 (conv weights, conv windows, the state slice) is loaded first, then either `gdc_wait`
(three launches: phase 2 is a launch of its own after the in_proj launch) or the grid barrier
(one launch: the loads stream in while the slowest in_proj strips finish). Programs before the last
H * NV (the work items) load nothing (masked) and only take part in the barrier.
"""

from __future__ import annotations

import triton
import triton.language as tl
from bubblescope.kernels._pdl import pdl_launch_dependents, pdl_wait
from bubblescope.kernels.kda_block.grid_sync import grid_barrier
from bubblescope.kernels.kda_decode.kernel import (
    conv_silu,
    delta_rule_step,
    load_conv_weights,
    load_head_state,
    store_conv_window,
)
from bubblescope.kernels.kda_decode.split_kernel import finish_head


@triton.jit
def kda_slice_phase(
    p_q,
    p_k,
    p_v,
    p_f,
    p_b,
    p_gate,
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
    p_ws_o,
    p_ws_count,
    p_barrier,
    i_prog,
    num_programs,
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
    GRID_SYNC: tl.constexpr,
):
    """The last H * NV programs of the grid work: item i = i_prog - (num_programs - H * NV) owns head
    i // NV, V slice i % NV. GRID_SYNC: wait at the grid barrier (first barrier: num_programs arrivals)
    instead of `gdc_wait`."""
    n_items = H * NUM_V_SPLITS
    # The last programs: they take the fewest in_proj strips (strips go round-robin from program 0), so
    # their state loads, issued after their last strip, are in flight earliest.
    i_item = i_prog - (num_programs - n_items)
    is_worker = i_item >= 0
    i_item = tl.maximum(i_item, 0)
    i_h = (i_item // NUM_V_SPLITS).to(tl.int64)
    i_s = (i_item % NUM_V_SPLITS).to(tl.int64)
    o_k = tl.arange(0, BLOCK_K)
    o_vs = i_s * V_SLICE + tl.arange(0, BLOCK_VS)
    o_v = tl.arange(0, BLOCK_V)
    # Idle programs' masks are all false (a limit of 0, not `& is_worker`: the interpreter turns a
    # mask and-ed with a scalar into int32, which tl.load refuses).
    m_k = o_k < tl.where(is_worker, K, 0)
    m_vs = (tl.arange(0, BLOCK_VS) < tl.where(is_worker, V_SLICE, 0)) & (o_vs < V)
    m_v = o_v < tl.where(is_worker, V, 0)
    o_ck = i_h * K + o_k
    o_cv = i_h * V + o_vs
    p_s = p_state + (i_h * K + o_k[:, None]) * V + o_vs[None, :]
    m_s = m_k[:, None] & m_vs[None, :]
    b_wq_old, b_wq_new = load_conv_weights(p_q_conv_w, o_ck, m_k, KW, BLOCK_T)
    b_wk_old, b_wk_new = load_conv_weights(p_k_conv_w, o_ck, m_k, KW, BLOCK_T)
    b_wv_old, b_wv_new = load_conv_weights(p_v_conv_w, o_cv, m_vs, KW, BLOCK_T)
    b_rate = tl.exp(tl.load(p_a_log + i_h).to(tl.float32))
    b_dt_bias = tl.load(p_dt_bias + o_ck, mask=m_k, other=0.0).to(tl.float32)
    b_o_norm = tl.load(p_o_norm + o_v, mask=m_v, other=0.0).to(tl.float32)
    b_qc_old, b_qc_shift, b_kc_old, b_kc_shift, b_vc_old, b_vc_shift, b_s = load_head_state(
        p_q_state, p_k_state, p_v_state, p_s, o_ck, m_k, o_cv, m_vs, m_s, KW, BLOCK_T
    )
    if GRID_SYNC:
        grid_barrier(p_barrier, num_programs)
    else:
        pdl_wait(USE_PDL)
        pdl_launch_dependents(USE_PDL)
    if is_worker:
        # .cg: phase 1 wrote these rows from other SMs in this very launch (GRID_SYNC).
        b_xq = tl.load(p_q + o_ck, mask=m_k, other=0.0, cache_modifier=".cg")
        b_xk = tl.load(p_k + o_ck, mask=m_k, other=0.0, cache_modifier=".cg")
        b_xv = tl.load(p_v + o_cv, mask=m_vs, other=0.0, cache_modifier=".cg")
        b_f = tl.load(p_f + o_ck, mask=m_k, other=0.0, cache_modifier=".cg").to(tl.float32)
        b_beta = tl.sigmoid(tl.load(p_b + i_h, cache_modifier=".cg").to(tl.float32))
        b_gate = tl.load(p_gate + i_h * V + o_v, mask=m_v, other=0.0, cache_modifier=".cg").to(tl.float32)
        b_q = conv_silu(b_xq, b_qc_old, b_wq_old, b_wq_new)
        b_k = conv_silu(b_xk, b_kc_old, b_wk_old, b_wk_new)
        b_v = conv_silu(b_xv, b_vc_old, b_wv_old, b_wv_new)
        b_s, b_o = delta_rule_step(
            b_q, b_k, b_v, b_f, b_beta, b_rate, b_dt_bias, b_s, lower_bound, scale, eps
        )
        b_o = tl.where(m_vs, b_o, 0.0)
        tl.store(p_ws_o + i_h * V + o_vs, b_o, mask=m_vs)
        # Ticket after a barrier, states stored after the ticket: split_kernel.py says why.
        tl.debug_barrier()
        ticket = tl.atomic_add(p_ws_count + i_h, 1, sem="acq_rel")
        tl.store(p_s, b_s, mask=m_s)
        store_conv_window(p_v_state, b_vc_shift, b_xv, o_cv, m_vs, KW, BLOCK_T)
        if ticket == NUM_V_SPLITS - 1:
            store_conv_window(p_q_state, b_qc_shift, b_xq, o_ck, m_k, KW, BLOCK_T)
            store_conv_window(p_k_state, b_kc_shift, b_xk, o_ck, m_k, KW, BLOCK_T)
            finish_head(p_ws_o, p_ws_count, b_gate, b_o_norm, p_out, i_h, i_h, V, eps, BLOCK_V)
