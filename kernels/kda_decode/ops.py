"""KDA decode launcher and public entry point."""

from __future__ import annotations

import torch
from bubblescope.kernels._pdl import launch_options, resolve_pdl
from bubblescope.kernels.gemv.checks import (
    FLOAT_DTYPES,
    KernelInputError,
    check_contiguous,
    check_dtype,
    check_same_device,
    check_shape,
)
from bubblescope.kernels.kda_decode.kernel import kda_decode_kernel
from bubblescope.kernels.kda_decode.params import (
    KDALayerState,
    KDALayerWeights,
    decode_block_sizes,
    decode_kernel_args,
)
from bubblescope.kernels.kda_decode.split_launch import (
    KDASplitWorkspace,
    launch_kda_decode_split,
    shared_workspace,
)

OP = "kda_decode"
MAX_HEAD_DIM = 256


def check_kda_decode_inputs(
    activations: dict[str, torch.Tensor], weights: KDALayerWeights, state: KDALayerState
) -> int:
    """Validate against the recurrent state's [B, H, K, V]; returns the conv width KW."""
    if state.recurrent.dim() != 4:
        raise KernelInputError(
            f"{OP}: state.recurrent must be [B, H, K, V]; got {list(state.recurrent.shape)}"
        )
    batch, heads, key_dim, value_dim = state.recurrent.shape
    if max(key_dim, value_dim) > MAX_HEAD_DIM:
        raise KernelInputError(f"{OP}: K and V must be <= {MAX_HEAD_DIM}; got K={key_dim}, V={value_dim}")
    check_dtype("state.recurrent", state.recurrent, (torch.float32,), OP)
    kw = weights.q_conv.shape[-1] if weights.q_conv.dim() == 2 else 0
    if kw < 2:
        raise KernelInputError(
            f"{OP}: weights.q_conv must be [H*K, KW] with KW >= 2; got {list(weights.q_conv.shape)}"
        )
    width_k, width_v = heads * key_dim, heads * value_dim
    expected = {
        "q": (batch, width_k),
        "k": (batch, width_k),
        "v": (batch, width_v),
        "f": (batch, width_k),
        "b": (batch, heads),
        "gate": (batch, width_v),
    }
    for name, shape in expected.items():
        check_shape(name, activations[name], shape, OP)
        check_dtype(name, activations[name], FLOAT_DTYPES, OP)
        if activations[name].stride(1) != 1:
            raise KernelInputError(f"{OP}: {name} needs a contiguous last dimension")
    params = {
        "weights.q_conv": (weights.q_conv, (width_k, kw)),
        "weights.k_conv": (weights.k_conv, (width_k, kw)),
        "weights.v_conv": (weights.v_conv, (width_v, kw)),
        "weights.a_log": (weights.a_log, (heads,)),
        "weights.dt_bias": (weights.dt_bias, (width_k,)),
        "weights.o_norm": (weights.o_norm, (value_dim,)),
        "state.q_conv": (state.q_conv, (batch, width_k, kw - 1)),
        "state.k_conv": (state.k_conv, (batch, width_k, kw - 1)),
        "state.v_conv": (state.v_conv, (batch, width_v, kw - 1)),
    }
    for name, (tensor, shape) in params.items():
        check_shape(name, tensor, shape, OP)
        check_dtype(name, tensor, FLOAT_DTYPES, OP)
    named = {name.replace(".", "_"): tensor for name, (tensor, _) in params.items()}
    check_contiguous(OP, state_recurrent=state.recurrent, **named)
    check_same_device(OP, state_recurrent=state.recurrent, **named, **activations)
    return kw


def launch_kda_decode(
    acts: dict[str, torch.Tensor],
    weights: KDALayerWeights,
    state: KDALayerState,
    out: torch.Tensor,
    eps: float,
    pdl: bool,
    num_warps: int | None,
    prefetch_state: bool = True,
    sumsq: torch.Tensor | None = None,
) -> None:
    """Grid (B, H) launch of kda_decode_kernel on validated inputs. With `sumsq` (`[B, H, 1]` fp32) the
    norm is left to the consumer: `out` (fp32) takes the un-normed rows."""
    batch, heads, key_dim, value_dim = state.recurrent.shape
    kda_decode_kernel[(batch, heads)](
        *decode_kernel_args(acts, weights, state, out),
        # Without sumsq the kernel never touches this pointer (NORM_IN_CONSUMER is False).
        out if sumsq is None else sumsq,
        heads,
        key_dim,
        value_dim,
        float(weights.lower_bound),
        key_dim**-0.5,
        eps,
        **decode_block_sizes(weights.q_conv.shape[1], key_dim, value_dim),
        USE_PDL=pdl,
        PREFETCH_STATE=prefetch_state,
        NORM_IN_CONSUMER=sumsq is not None,
        num_warps=num_warps or (8 if key_dim * value_dim >= 8192 else 4),
        **launch_options(pdl),
    )


def kda_decode(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    f: torch.Tensor,
    b: torch.Tensor,
    gate: torch.Tensor,
    weights: KDALayerWeights,
    state: KDALayerState,
    eps: float = 1e-6,
    use_pdl: bool = False,
    out: torch.Tensor | None = None,
    num_warps: int | None = None,
    v_splits: int = 1,
    workspace: KDASplitWorkspace | None = None,
    prefetch_state: bool = True,
) -> torch.Tensor:
    """One KDA decode token in one launch: conv+SiLU (state shifted in place), safe gate, beta,
    L2-normed q (x K^-1/2) and k, delta rule on the fp32 state (in place), gated output RMSNorm.

    Args:
        q, k: pre-conv projections `[B, H*K]`; v: `[B, H*V]` (views of one fused projection are fine:
            only the last dim must be contiguous).
        f: forget-gate projection `[B, H*K]`.
        b: beta logits `[B, H]`.
        gate: g_proj output `[B, H*V]` (sigmoid gate of the output norm).
        weights: KDALayerWeights (conv `[C, KW]`, a_log `[H]`, dt_bias `[H*K]`, o_norm `[V]`).
        state: KDALayerState (conv states `[B, C, KW-1]`, recurrent `[B, H, K, V]` fp32), updated in place.
        eps: epsilon of the L2 norms and of the output RMSNorm (1e-6 for Ling).
        use_pdl: Programmatic Dependent Launch where supported.
        out: optional `[B, H*V]` destination.
        num_warps: warps per program; default 8 for a 128x128 state, else 4 (split kernel: 4).
        v_splits: programs per head, each owning V/v_splits state columns (split_kernel.py); 1 keeps
            the one-program-per-head kernel. H200 2026-12-01, H=32, graph + PDL, layers back to back:
            1 split 6.7 us, 2: 4.5, 4: 4.3-4.4 (decoder default), 8: 4.6 (benchmarks/RESULTS.md).
        workspace: scratch of the split kernel; default one cached per (device, B, H, V).
        prefetch_state: under PDL, read the conv and recurrent states BEFORE waiting for the previous
            kernel, so they stream in while it runs (kernel.py). Needs the kernel just before this one
            in the stream not to write `state`: true in the decoder, where it is the in_proj GEMV (which
            itself waits for everything before it). Pass False to chain two steps of one layer back to
            back under PDL, or after a kernel that writes the state without PDL waits (e.g. a copy_).
            No effect without PDL.
    Returns:
        `[B, H*V]` in v's dtype (out's dtype when given): the input of o_proj.
    """
    activations = {"q": q, "k": k, "v": v, "f": f, "b": b, "gate": gate}
    check_kda_decode_inputs(activations, weights, state)
    batch, heads, key_dim, value_dim = state.recurrent.shape
    if out is None:
        out = torch.empty(batch, heads * value_dim, dtype=v.dtype, device=v.device)
    check_shape("out", out, (batch, heads * value_dim), OP)
    if out.stride(1) != 1 or out.device != v.device:
        raise KernelInputError(f"{OP}: out needs a contiguous last dimension on {v.device}")
    launch_checked(
        activations, weights, state, out, eps, use_pdl, num_warps, v_splits, workspace, prefetch_state
    )
    return out


def launch_checked(
    activations: dict[str, torch.Tensor],
    weights: KDALayerWeights,
    state: KDALayerState,
    out: torch.Tensor,
    eps: float,
    use_pdl: bool,
    num_warps: int | None,
    v_splits: int,
    workspace: KDASplitWorkspace | None,
    prefetch_state: bool,
    sumsq: torch.Tensor | None = None,
    early_ticket: bool = False,
) -> None:
    """Validate v_splits and the workspace, then launch the one-program or the split kernel."""
    batch, heads, _, value_dim = state.recurrent.shape
    device = state.recurrent.device
    pdl = resolve_pdl(use_pdl, device)
    if not 1 <= v_splits <= value_dim:
        raise KernelInputError(f"{OP}: v_splits must be in 1..V={value_dim}; got {v_splits}")
    if v_splits == 1:
        launch_kda_decode(activations, weights, state, out, eps, pdl, num_warps, prefetch_state, sumsq)
        return
    if workspace is None:
        workspace = shared_workspace(batch, heads, value_dim, device)
    elif not workspace.fits(batch, heads, value_dim, device):
        raise KernelInputError(f"{OP}: workspace is not for B={batch}, H={heads}, V={value_dim} on {device}")
    launch_kda_decode_split(
        activations,
        weights,
        state,
        out,
        eps,
        pdl,
        num_warps,
        v_splits,
        workspace,
        prefetch_state,
        sumsq,
        early_ticket,
    )
