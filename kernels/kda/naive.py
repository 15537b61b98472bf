"""Plain recurrent KDA (Kimi Delta Attention): one token at a time, a loop, no tricks.

This is the reference every faster KDA path is checked against. Conventions match
flash-linear-attention's naive recurrent KDA (`fla.ops.kda.naive`), so the two can be compared:
`[B, T, H, K]` activations, `[B, H, K, V]` state, `g` is the per-key-channel LOG decay, `scale`
defaults to K^-1/2 and is applied to q inside.
Math: shared/notes/ling3_flash.md §3.1 step 6.
"""

from __future__ import annotations

import torch

from bubblescope.errors import BubblescopeError


class KDAInputError(BubblescopeError):
    """KDA inputs with inconsistent shapes, dtypes or devices."""


def compute_dtype_for(*tensors: torch.Tensor) -> torch.dtype:
    """fp64 when any input is fp64 (tests), else fp32: the recurrence never runs in bf16/fp16."""
    return torch.float64 if any(x.dtype == torch.float64 for x in tensors) else torch.float32


def l2_normalize_naive(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x / sqrt(sum(x^2) + eps) over the last dim (eps inside the sqrt: FLA convention)."""
    return x / torch.sqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def check_kda_inputs(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor | None,
) -> None:
    """Raise KDAInputError (one line) unless the shapes follow the documented convention."""
    if q.dim() != 4 or v.dim() != 4:
        shapes = f"q {tuple(q.shape)}, v {tuple(v.shape)}"
        raise KDAInputError(f"KDA: q and v must be [B, T, H, K|V]; got {shapes}")
    batch, seq_len, heads, key_dim = q.shape
    if k.shape != q.shape or g.shape != q.shape:
        raise KDAInputError(
            f"KDA: k and g must match q {tuple(q.shape)}; got k {tuple(k.shape)}, g {tuple(g.shape)}"
        )
    if v.shape[:3] != q.shape[:3]:
        raise KDAInputError(f"KDA: v {tuple(v.shape)} must share [B, T, H] with q {tuple(q.shape)}")
    if beta.shape != q.shape[:3]:
        raise KDAInputError(f"KDA: beta must be [B, T, H] = {tuple(q.shape[:3])}; got {tuple(beta.shape)}")
    devices = {x.device for x in (q, k, v, g, beta)}
    if initial_state is not None:
        want = (batch, heads, key_dim, v.shape[-1])
        if tuple(initial_state.shape) != want:
            got = tuple(initial_state.shape)
            raise KDAInputError(f"KDA: initial_state must be [B, H, K, V] = {want}; got {got}")
        devices.add(initial_state.device)
    if len(devices) != 1:
        raise KDAInputError(f"KDA: all inputs must be on one device; got {sorted(str(d) for d in devices)}")
    if not all(x.is_floating_point() for x in (q, k, v, g, beta)):
        raise KDAInputError("KDA: inputs must be floating point")


def delta_rule_step(
    state: torch.Tensor,
    q_t: torch.Tensor,
    k_t: torch.Tensor,
    v_t: torch.Tensor,
    g_t: torch.Tensor,
    beta_t: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token of the gated delta rule for every batch and head.

    S <- diag(exp(g)) S;  u = beta (v - S^T k);  S <- S + k u^T;  o = S^T q (q already scaled).

    Args:
        state: `[B, H, K, V]`; q_t, k_t, g_t: `[B, H, K]`; v_t: `[B, H, V]`; beta_t: `[B, H]`.

    Returns:
        The new state `[B, H, K, V]` and o `[B, H, V]`.
    """
    state = state * g_t.exp().unsqueeze(-1)
    # [B, H, V]: what the decayed state already predicts for this key
    predicted = torch.einsum("bhkv,bhk->bhv", state, k_t)
    update = beta_t.unsqueeze(-1) * (v_t - predicted)
    state = state + k_t.unsqueeze(-1) * update.unsqueeze(-2)
    return state, torch.einsum("bhkv,bhk->bhv", state, q_t)


def recurrent_kda(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Gated delta rule with per-key-channel decay, evaluated token by token.

    Per token t and head h, with state S [K, V]:
    S <- diag(exp(g_t)) S;  u = beta_t (v_t - S^T k_t);  S <- S + k_t u^T;  o_t = S^T (q_t * scale).

    Args:
        q: queries `[B, T, H, K]` (already L2-normalised by the caller if the model wants it).
        k: keys `[B, T, H, K]`.
        v: values `[B, T, H, V]`; the output takes v's dtype.
        g: log decay `[B, T, H, K]` (<= 0 for a contracting state).
        beta: delta-rule step size `[B, T, H]`.
        scale: multiplies q; default K^-1/2.
        initial_state: `[B, H, K, V]`, any float dtype; default zeros.
        output_final_state: return the state after the last token.

    Returns:
        o `[B, T, H, V]` in v's dtype, and the final state `[B, H, K, V]` in the compute dtype (fp32, or
        fp64 for fp64 inputs) when `output_final_state`, else None.
    """
    check_kda_inputs(q, k, v, g, beta, initial_state)
    batch, seq_len, heads, key_dim = q.shape
    value_dim = v.shape[-1]
    if scale is None:
        scale = key_dim**-0.5
    out_dtype = v.dtype
    dtype = compute_dtype_for(q, k, v, g, beta)
    q, k, v, g, beta = (x.to(dtype) for x in (q, k, v, g, beta))
    q = q * scale
    # [B, H, K, V]
    if initial_state is None:
        state = q.new_zeros(batch, heads, key_dim, value_dim)
    else:
        state = initial_state.to(dtype).clone()
    # [B, T, H, V]
    out = v.new_zeros(batch, seq_len, heads, value_dim)
    for step in range(seq_len):
        state, out[:, step] = delta_rule_step(
            state, q[:, step], k[:, step], v[:, step], g[:, step], beta[:, step]
        )
    return out.to(out_dtype), (state if output_final_state else None)
