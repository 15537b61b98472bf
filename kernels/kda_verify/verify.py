"""Public entry point of KDA chain verify: validate, pick fused / unfused / plain PyTorch, run."""

from __future__ import annotations

import torch
from bubblescope.kernels._pdl import is_interpreting
from bubblescope.kernels.kda_verify.common import KDAVerifyInputError, validate_verify_inputs
from bubblescope.kernels.kda_verify.naive import kda_verify_naive

BACKENDS = ("auto", "triton", "torch")


def triton_usable(device: torch.device) -> bool:
    """Triton runs on CUDA tensors, or on CPU tensors under TRITON_INTERPRET=1 (tests)."""
    return device.type == "cuda" or (device.type == "cpu" and is_interpreting())


def _buffer(
    given: torch.Tensor | None, shape: tuple[int, ...], like: torch.Tensor, dtype: torch.dtype, name: str
):
    if given is None:
        return torch.empty(shape, dtype=dtype, device=like.device)
    if tuple(given.shape) != shape or not given.is_contiguous() or given.device != like.device:
        raise KDAVerifyInputError(f"KDA verify: {name} must be a contiguous {shape} on {like.device}")
    return given


def kda_verify(
    qkv_pre: torch.Tensor,
    f_pre: torch.Tensor,
    b_pre: torch.Tensor,
    conv_weight: torch.Tensor,
    a_log: torch.Tensor,
    dt_bias: torch.Tensor,
    initial_state: torch.Tensor,
    initial_conv: torch.Tensor,
    *,
    lower_bound: float = -5.0,
    scale: float | None = None,
    fused: bool = True,
    use_pdl: bool = False,
    backend: str = "auto",
    out: torch.Tensor | None = None,
    states_out: torch.Tensor | None = None,
    windows_out: torch.Tensor | None = None,
    block_v: int = 32,
    keep_all: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """KDA over T tokens (anchor + drafts) writing every position's state and conv window to scratch.

    Args:
        qkv_pre: `[B, T, 3, W]` q/k/v projections before the short conv (any strides).
        f_pre: `[B, T, W]` forget-gate projection; b_pre: `[B, T, H]` beta projection (any strides).
        conv_weight: `[3, W, KW]` q/k/v conv taps (tap KW-1 = current token).
        a_log: `[H]`; dt_bias: `[W]` (fp32 in the model).
        initial_state: `[B, H, K, V]` persistent recurrent state (fp32); only read.
        initial_conv: `[B, 3, W, KW-1]` persistent pre-conv window, oldest first; only read.
        lower_bound: safe-gate bound (-5). scale: q scale, default K^-1/2.
        fused: one Triton launch per layer (the `fused_kda_verify` switch) vs three.
        use_pdl: Programmatic Dependent Launch where the device supports it.
        backend: "auto" (Triton on CUDA or under TRITON_INTERPRET=1, else PyTorch), "triton", "torch".
        out, states_out, windows_out: optional preallocated outputs (CUDA-graph scratch). Without
            keep_all, states_out may alias initial_state (each program reads its tile before
            writing it); windows_out must never alias initial_conv.
        block_v: value channels per Triton program (power of two).
        keep_all: keep every position's state and window (staged verify); False keeps only the
            last one, shaped `[B, 1, ...]` (the in-place verify of `staged_kda` off).

    Returns:
        o `[B, T, H, V]` (qkv_pre's dtype), states `[B, T, H, K, V]` (initial_state's dtype: the
        state after token t is `states[:, t]`; `[B, 1, ...]` without keep_all), windows
        `[B, T, 3, W, KW-1]` (initial_conv's dtype; `[B, 1, ...]` without keep_all).
    """
    if backend not in BACKENDS:
        raise KDAVerifyInputError(f"KDA verify: backend must be one of {BACKENDS}; got {backend!r}")
    heads, key_dim = validate_verify_inputs(
        qkv_pre, f_pre, b_pre, conv_weight, a_log, dt_bias, initial_state, initial_conv
    )
    scale = key_dim**-0.5 if scale is None else scale
    use_triton = backend == "triton" or (backend == "auto" and triton_usable(qkv_pre.device))
    if not use_triton:
        o, states, windows = kda_verify_naive(
            qkv_pre,
            f_pre,
            b_pre,
            conv_weight,
            a_log,
            dt_bias,
            initial_state,
            initial_conv,
            lower_bound=lower_bound,
            scale=scale,
        )
        if not keep_all:
            states, windows = states[:, -1:], windows[:, -1:]
        for given, result in ((out, o), (states_out, states), (windows_out, windows)):
            if given is not None:
                given.copy_(result)
        return (
            out if out is not None else o,
            states_out if states_out is not None else states,
            windows_out if windows_out is not None else windows,
        )
    if block_v < 1 or block_v & (block_v - 1):
        raise KDAVerifyInputError(f"KDA verify: block_v must be a power of two; got {block_v}")
    batch, seq_len, _, width = qkv_pre.shape
    taps = conv_weight.shape[-1]
    slots = seq_len if keep_all else 1
    o = _buffer(out, (batch, seq_len, heads, key_dim), qkv_pre, qkv_pre.dtype, "out")
    states = _buffer(
        states_out, (batch, slots, heads, key_dim, key_dim), qkv_pre, initial_state.dtype, "states_out"
    )
    windows = _buffer(
        windows_out, (batch, slots, 3, width, taps - 1), qkv_pre, initial_conv.dtype, "windows_out"
    )
    from bubblescope.kernels.kda_verify.fused import launch_kda_verify_fused
    from bubblescope.kernels.kda_verify.unfused import launch_kda_verify_unfused

    launch = launch_kda_verify_fused if fused else launch_kda_verify_unfused
    launch(
        qkv_pre,
        f_pre,
        b_pre,
        conv_weight.contiguous(),
        a_log.contiguous(),
        dt_bias.contiguous(),
        initial_state.contiguous(),
        initial_conv.contiguous(),
        o,
        states,
        windows,
        heads=heads,
        key_dim=key_dim,
        lower_bound=lower_bound,
        scale=scale,
        use_pdl=use_pdl,
        store_all=keep_all,
        block_v=min(block_v, max(1, 1 << (key_dim - 1).bit_length())),
    )
    return o, states, windows
