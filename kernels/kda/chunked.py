"""Chunked KDA for prefill: block-parallel inside each chunk, a short loop across chunks.

Same conventions and result as `naive.recurrent_kda`, but each chunk of C tokens is done with a few
matrix products and one triangular solve instead of C sequential rank-1 updates.

Derivation (per head; inside one chunk, local times t, s = 1..C, chunk start state S0 [K, V]):
G_t = sum_{r<=t} g_r is the cumulative log decay (a K-vector). Unrolling the recurrence,
    S_t = diag(exp(G_t)) S0 + sum_{s<=t} (exp(G_t - G_s) * k_s) u_s^T
and the delta-rule correction u_t = beta_t (v_t - (decayed S_{t-1})^T k_t) becomes the unit lower
triangular system
    (I + A) U = diag(beta) (V - Kd S0),   A[t, s] = beta_t <k_t, exp(G_t - G_s) * k_s>  (s < t),
with Kd_t = exp(G_t) * k_t. Writing T = (I + A)^-1 gives the WY/UT form U = T diag(beta) V -
T diag(beta) Kd S0. Then
    o_t = S0^T (exp(G_t) * q_t) + sum_{s<=t} <q_t, exp(G_t - G_s) * k_s> u_s
    S_C = diag(exp(G_C)) S0 + sum_s (exp(G_C - G_s) * k_s) u_s^T.
The pairwise decays exp(G_t - G_s) are formed as differences of log decays (never as a product
exp(G_t) * exp(-G_s)), so nothing overflows even when a chunk decays by e^-320; entries with s > t are
masked to -inf before the exp for the same reason.
"""

from __future__ import annotations

import torch

from .naive import KDAInputError, check_kda_inputs, compute_dtype_for


def _chunk_step(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One chunk, all batches and heads at once.

    Args:
        q, k, g: `[B, H, C, K]` (q already scaled); v: `[B, H, C, V]`; beta: `[B, H, C]`.
        state: `[B, H, K, V]` at the chunk start.

    Returns:
        o `[B, H, C, V]` and the state `[B, H, K, V]` after the chunk.
    """
    chunk_len = q.shape[2]
    # [B, H, C, K]
    log_decay = g.cumsum(dim=2)
    # [B, H, C, C, K]: log of exp(G_t - G_s), -inf above the diagonal (s > t)
    pair_log_decay = log_decay.unsqueeze(3) - log_decay.unsqueeze(2)
    causal = torch.ones(chunk_len, chunk_len, dtype=torch.bool, device=q.device).tril()
    pair_log_decay = pair_log_decay.masked_fill(~causal[:, :, None], float("-inf"))
    pair_decay = pair_log_decay.exp()
    # [B, H, C, C]: <k_t, exp(G_t - G_s) k_s> and <q_t, exp(G_t - G_s) k_s>
    key_key = torch.einsum("bhtk,bhtsk,bhsk->bhts", k, pair_decay, k)
    query_key = torch.einsum("bhtk,bhtsk,bhsk->bhts", q, pair_decay, k)
    strict = torch.ones_like(causal).tril(diagonal=-1)
    lower = beta.unsqueeze(-1) * key_key * strict
    eye = torch.eye(chunk_len, dtype=q.dtype, device=q.device)
    # [B, H, C, V]: right-hand side beta (v - Kd S0)
    decayed_keys = k * log_decay.exp()
    rhs = beta.unsqueeze(-1) * (v - decayed_keys @ state)
    update = torch.linalg.solve_triangular(eye + lower, rhs, upper=False, unitriangular=True)
    decayed_queries = q * log_decay.exp()
    out = decayed_queries @ state + (query_key * causal) @ update
    # [B, H, C, K]: exp(G_C - G_s) k_s, the keys as seen from the chunk end
    last = log_decay[:, :, -1:]
    keys_to_end = k * (last - log_decay).exp()
    new_state = last.squeeze(2).exp().unsqueeze(-1) * state + keys_to_end.transpose(-1, -2) @ update
    return out, new_state


def chunk_kda(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """KDA over a whole sequence in chunks; equal to `recurrent_kda` up to rounding.

    Args:
        q: queries `[B, T, H, K]`.
        k: keys `[B, T, H, K]`.
        v: values `[B, T, H, V]`; the output takes v's dtype.
        g: log decay `[B, T, H, K]`.
        beta: `[B, T, H]`.
        scale: multiplies q; default K^-1/2.
        initial_state: `[B, H, K, V]`; default zeros.
        output_final_state: return the state after the last token.
        chunk_size: tokens per block (default 64); the last chunk may be shorter.

    Returns:
        o `[B, T, H, V]` in v's dtype, and the final state `[B, H, K, V]` (fp32, or fp64 for fp64
        inputs) when `output_final_state`, else None.
    """
    check_kda_inputs(q, k, v, g, beta, initial_state)
    if chunk_size < 1:
        raise KDAInputError(f"KDA: chunk_size must be >= 1; got {chunk_size}")
    batch, seq_len, heads, key_dim = q.shape
    value_dim = v.shape[-1]
    if scale is None:
        scale = key_dim**-0.5
    out_dtype = v.dtype
    dtype = compute_dtype_for(q, k, v, g, beta)
    # [B, H, T, K|V] and [B, H, T]: heads before time so each chunk is a batch of matrices
    q, k, v, g = (x.to(dtype).transpose(1, 2) for x in (q, k, v, g))
    beta = beta.to(dtype).transpose(1, 2)
    q = q * scale
    if initial_state is None:
        state = q.new_zeros(batch, heads, key_dim, value_dim)
    else:
        state = initial_state.to(dtype)
    outputs = []
    for start in range(0, seq_len, chunk_size):
        part = slice(start, min(start + chunk_size, seq_len))
        pieces = (x[:, :, part] for x in (q, k, v, g, beta))
        out, state = _chunk_step(*pieces, state)
        outputs.append(out)
    if outputs:
        # [B, T, H, V]
        out = torch.cat(outputs, dim=2).transpose(1, 2)
    else:
        out = v.new_zeros(batch, seq_len, heads, value_dim).transpose(1, 2)
    return out.to(out_dtype).contiguous(), (state if output_final_state else None)
