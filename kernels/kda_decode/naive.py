"""Plain PyTorch reference for one KDA decode step (T = 1), composed from the spec step by step.

Math: shared/notes/ling3_flash.md §3.1 steps 2-7. The delta rule itself is the team's reference
`recurrent_kda`; everything around it is written out here in fp32 with loops.
"""

from __future__ import annotations

import torch
from bubblescope.kernels.kda.naive import l2_normalize_naive, recurrent_kda
from bubblescope.kernels.kda_decode.params import KDALayerState, KDALayerWeights


def short_conv_step_naive(x: torch.Tensor, conv_state: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """SiLU(causal depthwise conv) of one new token; shifts `conv_state` in place.

    Args:
        x: `[B, C]` pre-conv input of this token.
        conv_state: `[B, C, KW-1]` previous inputs, oldest first (updated in place).
        weight: `[C, KW]`.
    Returns:
        `[B, C]` fp32.
    """
    taps = weight.shape[1]
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for tap in range(taps - 1):
        out += weight[:, tap].float() * conv_state[:, :, tap].float()
    out += weight[:, taps - 1].float() * x.float()
    # Drop the oldest input, append this token's.
    conv_state.copy_(torch.cat([conv_state[:, :, 1:], x.unsqueeze(-1).to(conv_state.dtype)], dim=-1))
    return out * torch.sigmoid(out)


def kda_heads_naive(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    f: torch.Tensor,
    b: torch.Tensor,
    weights: KDALayerWeights,
    state: KDALayerState,
    eps: float = 1e-6,
) -> torch.Tensor:
    """One KDA token up to the attention output: conv+SiLU, safe gate, beta, L2 norm, delta rule.

    Args:
        q, k: pre-conv projections `[B, H*K]`; v: `[B, H*V]`.
        f: forget-gate projection `[B, H*K]`; b: beta logits `[B, H]`.
        weights, state: see KDALayerWeights / KDALayerState (state updated in place).
        eps: L2-norm epsilon.
    Returns:
        `[B, H, V]` fp32 per-head output o = S^T q, before the gated RMSNorm.
    """
    batch, heads, key_dim, value_dim = state.recurrent.shape
    q_act = short_conv_step_naive(q, state.q_conv, weights.q_conv).view(batch, heads, key_dim)
    k_act = short_conv_step_naive(k, state.k_conv, weights.k_conv).view(batch, heads, key_dim)
    v_act = short_conv_step_naive(v, state.v_conv, weights.v_conv).view(batch, heads, value_dim)
    rate = weights.a_log.float().exp().view(1, heads, 1)
    gate_in = f.float().view(batch, heads, key_dim) + weights.dt_bias.float().view(1, heads, key_dim)
    # [B, H, K] log decay in (lower_bound, 0)
    log_decay = weights.lower_bound * torch.sigmoid(rate * gate_in)
    beta = torch.sigmoid(b.float())
    q_unit = l2_normalize_naive(q_act, eps)
    k_unit = l2_normalize_naive(k_act, eps)
    # recurrent_kda wants [B, T, H, *]; it scales q by K^-1/2 itself.
    out, final = recurrent_kda(
        q_unit.unsqueeze(1),
        k_unit.unsqueeze(1),
        v_act.unsqueeze(1),
        log_decay.unsqueeze(1),
        beta.unsqueeze(1),
        scale=key_dim**-0.5,
        initial_state=state.recurrent,
        output_final_state=True,
    )
    state.recurrent.copy_(final)
    return out[:, 0].float()


def gated_head_norm_naive(
    heads_out: torch.Tensor, gate: torch.Tensor, o_norm: torch.Tensor, eps: float = 1e-6
) -> torch.Tensor:
    """KDA's gated output RMSNorm, per head over V: o / rms(o) * o_norm * sigmoid(gate), in fp32.

    Args:
        heads_out: `[B, H, V]` attention output; gate: g_proj output `[B, H*V]`; o_norm: `[V]`.
        eps: RMSNorm epsilon.
    Returns:
        `[B, H*V]` fp32.
    """
    batch, heads, value_dim = heads_out.shape
    heads_out = heads_out.float()
    normed = heads_out / torch.sqrt((heads_out * heads_out).mean(dim=-1, keepdim=True) + eps)
    gated = normed * o_norm.float() * torch.sigmoid(gate.float().view(batch, heads, value_dim))
    return gated.reshape(batch, heads * value_dim)


def kda_decode_naive(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    f: torch.Tensor,
    b: torch.Tensor,
    gate: torch.Tensor,
    weights: KDALayerWeights,
    state: KDALayerState,
    eps: float = 1e-6,
) -> torch.Tensor:
    """One KDA token: conv+SiLU, safe gate, beta, L2 norm, delta rule (state in place), gated RMSNorm.

    Args:
        q, k: pre-conv projections `[B, H*K]`; v: `[B, H*V]`.
        f: forget-gate projection `[B, H*K]`; b: beta logits `[B, H]`; gate: g_proj output `[B, H*V]`.
        weights, state: see KDALayerWeights / KDALayerState (state updated in place).
        eps: L2-norm and output-RMSNorm epsilon.
    Returns:
        `[B, H*V]` gated, normed attention output (before o_proj) in v's dtype.
    """
    heads_out = kda_heads_naive(q, k, v, f, b, weights, state, eps)
    return gated_head_norm_naive(heads_out, gate, weights.o_norm, eps).to(v.dtype)
