"""A KDA layer during speculative verify, and how its state is committed after acceptance.

`staged_kda` on: the verify kernel writes the state and conv window after every position to scratch
and leaves the persistent state alone; commit copies the slot of the accepted length (device index).
`staged_kda` off (what a stock engine does): the whole KDA state is checkpointed before verify, the
verify updates the state in place over all T tokens, and after acceptance the state is recomputed
from the checkpoint over the accepted prefix only. The recompute keeps static shapes (no host read
of the accepted length): tokens past the prefix get beta = 0 and log decay g = 0, which leaves the
recurrent state untouched, and the conv window is gathered at the accepted offset.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from bubblescope.kernels.kda_verify import kda_verify, triton_usable
from bubblescope.kernels.kda_verify.gated_norm import gated_rms_norm_rows

from ..fast.packing import fuse_rows
from ..kda import KDAAttention, KDAState, gated_rms_norm

# The projections in the fast path's packing order (fast/packing.pack_kda): q, k, v, f, g, b.
KDA_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "f_proj", "g_proj", "b_proj")

# Pre-activation that drives sigmoid to exactly 0 in fp32 and bf16 (beta = 0, g = lower_bound * 0).
_MASKED_PRE_ACTIVATION = -1.0e30


@dataclass(frozen=True)
class VerifyOptions:
    """How verify runs: the two KDA switches, PDL, the kernel backend and the norms.

    backend: "auto" (Triton on CUDA or under TRITON_INTERPRET=1, else PyTorch), "triton", "torch".
    kernel_norm: the residual adds and RMSNorms of the main layers as one add_rmsnorm launch each
        (`verify_norm_kernel`) where Triton runs; the eager module's ops otherwise.
    kernel_gated_norm: KDA's gated output norm as one launch per layer (`verify_gated_norm`,
        kernels/kda_verify/gated_norm.py) where Triton runs; the eager ops otherwise.
    fused_in_proj: KDA's six input projections as ONE GEMM over the packed in_proj weight
        (`verify_fused_in_proj`, the fast path's packing) instead of six GEMMs and a stack.
    """

    staged_kda: bool = False
    fused_kda_verify: bool = False
    use_pdl: bool = False
    backend: str = "auto"
    kernel_norm: bool = False
    kernel_gated_norm: bool = False
    fused_in_proj: bool = False


@dataclass
class KDAVerifyRecord:
    """What one KDA layer's verify leaves for commit.

    Attributes:
        states: [1, T, H, K, V] state after each position (staged only).
        windows: [1, T, 3, W, KW-1] conv window after each position (staged only).
        qkv_pre, f_pre, b_pre: the layer's verify inputs (unstaged only: the recompute replays them).
    """

    states: torch.Tensor | None = None
    windows: torch.Tensor | None = None
    qkv_pre: torch.Tensor | None = None
    f_pre: torch.Tensor | None = None
    b_pre: torch.Tensor | None = None


def stacked_conv_weight(attn: KDAAttention) -> torch.Tensor:
    """[3, W, KW] q/k/v conv taps (the verify kernels' layout), cached on the module."""
    cached = getattr(attn, "_spec_conv_weight", None)
    source = attn.q_conv1d.weight
    if cached is None or cached.device != source.device or cached.dtype != source.dtype:
        parts = (attn.q_conv1d.weight, attn.k_conv1d.weight, attn.v_conv1d.weight)
        cached = torch.stack([part[:, 0] for part in parts]).contiguous()
        attn._spec_conv_weight = cached
    return cached


def _run_kernel(attn: KDAAttention, qkv_pre, f_pre, b_pre, state: KDAState, options: VerifyOptions, **kwargs):
    return kda_verify(
        qkv_pre,
        f_pre,
        b_pre,
        stacked_conv_weight(attn),
        attn.A_log,
        attn.dt_bias,
        state.recurrent,
        state.conv,
        lower_bound=attn.config.kda_lower_bound,
        fused=options.fused_kda_verify,
        use_pdl=options.use_pdl,
        backend=options.backend,
        **kwargs,
    )


def kda_in_proj(attn: KDAAttention) -> torch.Tensor:
    """The layer's packed `[5W + H, D]` input projection (fast/packing.fuse_rows: the module's weights
    become views of it, so no second copy; packed once, by whichever path asks first)."""
    return fuse_rows(attn, [getattr(attn, name).weight for name in KDA_PROJECTIONS])


def kda_projections(
    attn: KDAAttention, normed: torch.Tensor, options: VerifyOptions
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """qkv_pre `[1, T, 3, W]` (before the short conv), f_pre `[1, T, W]`, the gate's pre-activation
    `[1, T, W]` and b_pre `[1, T, H]` of the window: six GEMMs, or one over the packed weight whose
    output rows are sliced (views; the verify kernels take any strides)."""
    if not options.fused_in_proj:
        qkv_pre = torch.stack([attn.q_proj(normed), attn.k_proj(normed), attn.v_proj(normed)], dim=2)
        return qkv_pre, attn.f_proj(normed), attn.g_proj(normed), attn.b_proj(normed)
    width = attn.config.kda_width
    proj = torch.nn.functional.linear(normed, kda_in_proj(attn))
    qkv_pre = proj[..., : 3 * width].unflatten(-1, (3, width))
    f_pre, gate_pre = proj[..., 3 * width : 4 * width], proj[..., 4 * width : 5 * width]
    return qkv_pre, f_pre, gate_pre, proj[..., 5 * width :]


def kda_verify_layer(
    attn: KDAAttention, normed: torch.Tensor, state: KDAState, options: VerifyOptions
) -> tuple[torch.Tensor, KDAVerifyRecord]:
    """KDA over the T verify tokens.

    Args:
        attn: the layer; normed: [1, T, D] input-normed hidden; state: the persistent state.
        options: staged (state untouched, every position kept) or in place (state advanced by T).

    Returns:
        [1, T, D] attention output and the record commit needs.
    """
    batch, seq_len, _ = normed.shape
    qkv_pre, f_pre, gate_pre, b_pre = kda_projections(attn, normed, options)
    if options.staged_kda:
        o, states, windows = _run_kernel(attn, qkv_pre, f_pre, b_pre, state, options)
        record = KDAVerifyRecord(states=states, windows=windows)
    else:
        heads, head_dim = attn.num_heads, attn.head_dim
        # The recurrent state is advanced in place; the window via scratch (programs read it shared).
        window = torch.empty_like(state.conv).unsqueeze(1)
        o, _, _ = _run_kernel(
            attn,
            qkv_pre,
            f_pre,
            b_pre,
            state,
            options,
            keep_all=False,
            states_out=state.recurrent.view(batch, 1, heads, head_dim, head_dim),
            windows_out=window,
        )
        state.conv.copy_(window[:, 0])
        record = KDAVerifyRecord(qkv_pre=qkv_pre, f_pre=f_pre, b_pre=b_pre)
    gate = gate_pre.view(batch, seq_len, attn.num_heads, attn.head_dim)
    if options.kernel_gated_norm and options.backend != "torch" and triton_usable(o.device):
        z = gated_rms_norm_rows(o, gate, attn.o_norm.weight, attn.config.rms_norm_eps, options.use_pdl)
    else:
        z = gated_rms_norm(o, gate, attn.o_norm.weight, attn.config.rms_norm_eps)
    return attn.o_proj(z.reshape(batch, seq_len, attn.config.kda_width)), record


def commit_staged(state: KDAState, record: KDAVerifyRecord, accepted: torch.Tensor) -> None:
    """Persistent state <- the scratch slot after position `accepted` (0-d device index)."""
    slot = accepted.view(1)
    state.recurrent.copy_(record.states.index_select(1, slot)[:, 0])
    state.conv.copy_(record.windows.index_select(1, slot)[:, 0])


def recompute_from_checkpoint(
    attn: KDAAttention,
    state: KDAState,
    checkpoint: KDAState,
    record: KDAVerifyRecord,
    accepted: torch.Tensor,
    options: VerifyOptions,
) -> None:
    """Restore from `checkpoint` and replay positions 0..accepted into `state` (staged_kda off).

    Args:
        accepted: 0-d int64 on the device; positions past it are masked out (beta = 0, g = 0).
    """
    seq_len = record.qkv_pre.shape[1]
    keep = torch.arange(seq_len, device=accepted.device) <= accepted
    f_pre = torch.where(keep[None, :, None], record.f_pre, _MASKED_PRE_ACTIVATION)
    b_pre = torch.where(keep[None, :, None], record.b_pre, _MASKED_PRE_ACTIVATION)
    heads, head_dim = attn.num_heads, attn.head_dim
    kda_verify(
        record.qkv_pre,
        f_pre,
        b_pre,
        stacked_conv_weight(attn),
        attn.A_log,
        attn.dt_bias,
        checkpoint.recurrent,
        checkpoint.conv,
        lower_bound=attn.config.kda_lower_bound,
        fused=options.fused_kda_verify,
        use_pdl=options.use_pdl,
        backend=options.backend,
        keep_all=False,
        states_out=state.recurrent.view(1, 1, heads, head_dim, head_dim),
        windows_out=torch.empty_like(state.conv).unsqueeze(1),
    )
    taps = checkpoint.conv.shape[-1]
    # [1, 3, W, KW-1+T]: old window then the verify's pre-conv inputs; the new window starts at a+1
    extended = torch.cat(
        [checkpoint.conv, record.qkv_pre.to(checkpoint.conv.dtype).permute(0, 2, 3, 1)], dim=-1
    )
    index = accepted + 1 + torch.arange(taps, device=accepted.device)
    state.conv.copy_(extended.index_select(-1, index))
