"""KDA attention layer of Ling-3.0-flash (35 of its 42 layers), plain PyTorch that reads like the spec.

Math: shared/notes/ling3_flash.md §3.1; parameter names and shapes: §4 (HF checkpoint names). The
pieces (`short_conv`, `kda_gate`, `l2_normalize`, `gated_rms_norm`) are module-level functions so the
fast decode path and speculative verify reuse exactly this math.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from bubblescope.kernels.kda import KDAInputError, chunk_kda, recurrent_kda
from torch import nn

from bubblescope.errors import BubblescopeError

from .config import LingConfig

# HF runs the recurrent kernel for q_len <= 64 and the chunked one above (notes §3.1).
RECURRENT_MAX_TOKENS = 64
# FLA's l2norm puts eps inside the sqrt: x / sqrt(sum(x^2) + eps) (notes §3.1 step 3).
L2_NORM_EPS = 1e-6


class KDAStateError(BubblescopeError):
    """A KDA state whose shape, dtype or device does not fit the layer it is given to."""


def _state_dtype(activation_dtype: torch.dtype) -> torch.dtype:
    # The recurrent state is fp32 as in every serving engine; fp64 only when the whole model is fp64 (tests).
    return torch.float64 if activation_dtype == torch.float64 else torch.float32


@dataclass
class KDAState:
    """Decode state of one KDA layer.

    Attributes:
        recurrent: delta-rule state `[B, H, K, V]`, fp32 (fp64 for an fp64 model).
        conv: last (kernel - 1) PRE-conv inputs of q, k, v, oldest first, `[B, 3, W, kernel - 1]`
            with W = config.kda_width, in the activation dtype.
    """

    recurrent: torch.Tensor
    conv: torch.Tensor

    @classmethod
    def zeros(
        cls, config: LingConfig, batch: int, device: torch.device | str, dtype: torch.dtype
    ) -> KDAState:
        """An empty state (no tokens seen) for `batch` sequences; `dtype` is the activation dtype."""
        heads, head_dim = config.num_attention_heads, config.head_dim
        recurrent = torch.zeros(batch, heads, head_dim, head_dim, device=device, dtype=_state_dtype(dtype))
        taps = config.short_conv_kernel_size - 1
        conv = torch.zeros(batch, 3, config.kda_width, taps, device=device, dtype=dtype)
        return cls(recurrent=recurrent, conv=conv)

    def clone(self) -> KDAState:
        """A deep copy (new storage), e.g. a checkpoint before speculative verify."""
        return KDAState(recurrent=self.recurrent.clone(), conv=self.conv.clone())

    def copy_(self, other: KDAState) -> KDAState:
        """Overwrite this state in place (storage kept, so CUDA graphs that captured it stay valid)."""
        if other.recurrent.shape != self.recurrent.shape or other.conv.shape != self.conv.shape:
            raise KDAStateError(
                f"KDA state copy: shapes differ (recurrent {tuple(other.recurrent.shape)} vs "
                f"{tuple(self.recurrent.shape)}, conv {tuple(other.conv.shape)} vs {tuple(self.conv.shape)})"
            )
        self.recurrent.copy_(other.recurrent)
        self.conv.copy_(other.conv)
        return self


def short_conv(
    x: torch.Tensor, weight: torch.Tensor, conv_state: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal depthwise short convolution followed by SiLU, continuing from a conv state.

    y_t[c] = SiLU(sum_j weight[c, 0, j] * x_{t - (kernel-1) + j}[c]); tap kernel-1 multiplies the current
    token, and inputs before the first token come from `conv_state` (zeros when None).

    Args:
        x: pre-conv inputs `[B, T, W]`.
        weight: `[W, 1, kernel]` (HF layout).
        conv_state: `[B, W, kernel - 1]`, the previous pre-conv inputs, oldest first.

    Returns:
        y `[B, T, W]` in x's dtype, and the new conv state `[B, W, kernel - 1]` (the last kernel - 1
        pre-conv inputs, old state included when T < kernel - 1) in the conv state's dtype (x's when None).
    """
    batch, seq_len, width = x.shape
    taps = weight.shape[-1] - 1
    if conv_state is None:
        conv_state = x.new_zeros(batch, width, taps)
    if conv_state.shape != (batch, width, taps) or weight.shape != (width, 1, taps + 1):
        raise KDAStateError(
            f"short_conv: x {tuple(x.shape)} needs weight [{width}, 1, k] and conv_state "
            f"[{batch}, {width}, k-1]; got weight {tuple(weight.shape)}, conv_state {tuple(conv_state.shape)}"
        )
    # Accumulate in at least fp32, as the CUDA causal-conv kernels do for bf16 inputs.
    compute_dtype = torch.promote_types(x.dtype, torch.float32)
    # [B, W, kernel - 1 + T]
    window = torch.cat([conv_state.to(compute_dtype), x.transpose(1, 2).to(compute_dtype)], dim=-1)
    mixed = F.conv1d(window, weight.to(compute_dtype), groups=width)
    y = F.silu(mixed).transpose(1, 2).to(x.dtype)
    new_state = window[..., window.shape[-1] - taps :].to(conv_state.dtype)
    return y, new_state


def kda_gate(f: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor, lower_bound: float) -> torch.Tensor:  # noqa: N803
    """Safe (bounded) forget gate in log space: g = lower_bound * sigmoid(exp(A_log[h]) * (f + dt_bias)).

    Args:
        f: forget-gate pre-activations `[B, T, W]` or `[B, T, H, K]` (W = H * K).
        A_log: `[H]`, fp32.
        dt_bias: `[W]`, fp32.
        lower_bound: the most negative log decay (-5 for Ling), so g lies in (lower_bound, 0).

    Returns:
        g `[B, T, H, K]` in fp32 (fp64 for fp64 inputs).
    """
    heads = A_log.shape[0]
    batch, seq_len = f.shape[:2]
    compute_dtype = torch.promote_types(f.dtype, torch.float32)
    # [B, T, H, K]
    pre = (f.to(compute_dtype).reshape(batch, seq_len, -1) + dt_bias.to(compute_dtype)).view(
        batch, seq_len, heads, -1
    )
    rate = A_log.to(compute_dtype).exp().view(1, 1, heads, 1)
    return lower_bound * torch.sigmoid(rate * pre)


def l2_normalize(x: torch.Tensor, eps: float = L2_NORM_EPS) -> torch.Tensor:
    """x / sqrt(sum(x^2) + eps) over the last dim (eps inside the sqrt, FLA's convention), in fp32+."""
    compute_dtype = torch.promote_types(x.dtype, torch.float32)
    x32 = x.to(compute_dtype)
    return (x32 * torch.rsqrt(x32.pow(2).sum(-1, keepdim=True) + eps)).to(x.dtype)


def gated_rms_norm(o: torch.Tensor, gate: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Per-head output norm: weight * RMSNorm(o) * sigmoid(gate), computed in fp32+ (FLA FusedRMSNormGated).

    Args:
        o: attention output `[B, T, H, V]`.
        gate: gate pre-activations `[B, T, H, V]`.
        weight: `[V]`, shared by all heads.
        eps: added to mean(o^2) inside the sqrt.

    Returns:
        `[B, T, H, V]` in o's dtype.
    """
    compute_dtype = torch.promote_types(o.dtype, torch.float32)
    o32 = o.to(compute_dtype)
    normed = o32 * torch.rsqrt(o32.pow(2).mean(-1, keepdim=True) + eps)
    return (normed * weight.to(compute_dtype) * torch.sigmoid(gate.to(compute_dtype))).to(o.dtype)


class KDADeltaRuleInputs(NamedTuple):
    """What the delta rule consumes for T tokens, plus the conv history after them.

    Attributes:
        q: L2-normalised queries `[B, T, H, K]` (the K^-1/2 scale is applied by the delta rule).
        k: L2-normalised keys `[B, T, H, K]`.
        v: values `[B, T, H, V]`.
        g: log decay `[B, T, H, K]`, fp32 (fp64 for an fp64 model).
        beta: `[B, T, H]`, fp32 (fp64 for an fp64 model).
        conv: pre-conv history after the T tokens `[B, 3, W, kernel - 1]`, in the conv state's dtype.
    """

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    g: torch.Tensor
    beta: torch.Tensor
    conv: torch.Tensor


class ShortConvWeight(nn.Module):
    """Holds one depthwise conv weight `[W, 1, kernel]` so state_dict keys read `q_conv1d.weight` as in HF."""

    def __init__(self, width: int, kernel: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(width, 1, kernel))


class HeadNormWeight(nn.Module):
    """Holds the output norm weight `[V]` so the state_dict key reads `o_norm.weight` as in HF."""

    def __init__(self, head_dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(head_dim))


class KDAAttention(nn.Module):
    """One KDA attention block: projections, short convs, safe gate, delta rule, gated norm, o_proj.

    Parameter names and shapes follow the HF checkpoint (notes §4), so a state_dict loads by name.
    `A_log` and `dt_bias` stay fp32 even in a bf16 model: they feed exp() and a sigmoid whose output
    is the per-channel decay, and bf16's 8-bit mantissa would move every decay rate by up to ~0.4 %,
    which compounds over thousands of steps of the recurrence (HF, vLLM and SGLang keep them fp32 too).
    """

    def __init__(self, config: LingConfig, layer_index: int) -> None:
        super().__init__()
        self.config = config
        self.layer_index = layer_index
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        hidden, width, kernel = config.hidden_size, config.kda_width, config.short_conv_kernel_size
        self.q_proj = nn.Linear(hidden, width, bias=False)
        self.k_proj = nn.Linear(hidden, width, bias=False)
        self.v_proj = nn.Linear(hidden, width, bias=False)
        self.q_conv1d = ShortConvWeight(width, kernel)
        self.k_conv1d = ShortConvWeight(width, kernel)
        self.v_conv1d = ShortConvWeight(width, kernel)
        self.f_proj = nn.Linear(hidden, width, bias=False)
        self.b_proj = nn.Linear(hidden, self.num_heads, bias=False)
        self.g_proj = nn.Linear(hidden, width, bias=False)
        self.A_log = nn.Parameter(torch.empty(self.num_heads, dtype=torch.float32))
        self.dt_bias = nn.Parameter(torch.empty(width, dtype=torch.float32))
        self.o_norm = HeadNormWeight(self.head_dim)
        self.o_proj = nn.Linear(width, hidden, bias=False)
        # Never leave torch.empty garbage in a fresh layer; callers reseed with their own generator.
        self.reset_parameters()

    def _apply(self, fn, recurse=True):  # type: ignore[no-untyped-def]
        # Module.to(bfloat16) must not round A_log / dt_bias (see class docstring): keep the fp32 values
        # and only move them to the new device.
        kept = {name: getattr(self, name).data for name in ("A_log", "dt_bias")}
        super()._apply(fn, recurse)
        for name, before in kept.items():
            param = getattr(self, name)
            if param.dtype in (torch.bfloat16, torch.float16):
                param.data = before.to(device=param.device, dtype=torch.float32)
        return self

    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Fill every parameter in place, on its own device, with trained-like random values (never zeros).

        - q/k/v/g/b projections: N(0, fan_in^-1/2), so a unit-RMS input gives unit-RMS outputs.
        - f_proj: the same, with each head's rows divided by that head's rate exp(A_log[h]), so the gate
          argument rate * (f + dt_bias) has unit spread around its bias in every head instead of
          saturating the sigmoid in fast heads.
        - o_proj: N(0, fan_in^-1/2 / sqrt(2 * layers)) (GPT-2-style residual scaling) so the residual
          stream stays bounded over the stack.
        - conv weights: N(0, kernel^-1/2) = N(0, 0.5) for kernel 4.
        - A_log = log(U[1, 16]) per head.
        - dt_bias: the gate at f = 0 is g0 = lower_bound * sigmoid(rate * dt_bias); dt_bias is solved so
          that -g0 is log-uniform in [1e-3, 2], i.e. per-token decays exp(g0) from 0.999 (memory of
          ~1000 tokens) to 0.14 (about one token), the spread a trained model shows.
        - o_norm: 1 + N(0, 0.02).

        Args:
            generator: random source on the parameters' device; None uses the device's default generator.
        """
        cfg = self.config
        hidden, width = cfg.hidden_size, cfg.kda_width
        for linear in (self.q_proj, self.k_proj, self.v_proj, self.g_proj, self.b_proj, self.f_proj):
            linear.weight.normal_(0.0, hidden**-0.5, generator=generator)
        self.o_proj.weight.normal_(
            0.0, width**-0.5 / math.sqrt(2 * cfg.num_hidden_layers), generator=generator
        )
        for conv in (self.q_conv1d, self.k_conv1d, self.v_conv1d):
            conv.weight.normal_(0.0, conv.weight.shape[-1] ** -0.5, generator=generator)
        self.A_log.uniform_(1.0, 16.0, generator=generator).log_()
        # [H, 1] rate per head, repeated over its K channels
        rate = self.A_log.float().exp().unsqueeze(-1)
        heads, head_dim = self.num_heads, self.head_dim
        self.f_proj.weight.view(heads, head_dim, hidden).div_(rate.unsqueeze(-1).to(self.f_proj.weight.dtype))
        neg_log_g0 = torch.empty(heads, head_dim, device=self.dt_bias.device, dtype=torch.float32)
        neg_log_g0.uniform_(math.log(1e-3), math.log(2.0), generator=generator)
        sig = neg_log_g0.exp() / -cfg.kda_lower_bound
        self.dt_bias.copy_((torch.logit(sig) / rate).reshape(width))
        self.o_norm.weight.normal_(1.0, 0.02, generator=generator)

    def _check_hidden(self, hidden: torch.Tensor) -> None:
        width = self.config.hidden_size
        if hidden.dim() != 3 or hidden.shape[-1] != width:
            got = tuple(hidden.shape)
            raise KDAInputError(f"KDA layer {self.layer_index}: hidden must be [B, T, {width}]; got {got}")

    def _check_state(self, state: KDAState, hidden: torch.Tensor) -> None:
        cfg = self.config
        batch, device = hidden.shape[0], hidden.device
        want_recurrent = (batch, self.num_heads, self.head_dim, self.head_dim)
        want_conv = (batch, 3, cfg.kda_width, cfg.short_conv_kernel_size - 1)
        if tuple(state.recurrent.shape) != want_recurrent or tuple(state.conv.shape) != want_conv:
            raise KDAStateError(
                f"KDA layer {self.layer_index}: state must be recurrent {want_recurrent} and conv "
                f"{want_conv}; got {tuple(state.recurrent.shape)} and {tuple(state.conv.shape)}"
            )
        if state.recurrent.device != device or state.conv.device != device:
            raise KDAStateError(
                f"KDA layer {self.layer_index}: state is on {state.recurrent.device}, input on {device}"
            )

    def delta_rule_inputs(self, hidden: torch.Tensor, conv_state: torch.Tensor) -> KDADeltaRuleInputs:
        """Projections, short convs, L2 norms, gate and beta for T tokens (no state is written).

        Args:
            hidden: normed hidden states `[B, T, D]`.
            conv_state: `[B, 3, W, kernel - 1]` pre-conv history of q, k, v before these tokens.

        Returns:
            The delta-rule operands and the conv history after the T tokens (see KDADeltaRuleInputs).
        """
        batch, seq_len, _ = hidden.shape
        heads_shape = (batch, seq_len, self.num_heads, self.head_dim)
        q, q_conv = short_conv(self.q_proj(hidden), self.q_conv1d.weight, conv_state[:, 0])
        k, k_conv = short_conv(self.k_proj(hidden), self.k_conv1d.weight, conv_state[:, 1])
        v, v_conv = short_conv(self.v_proj(hidden), self.v_conv1d.weight, conv_state[:, 2])
        g = kda_gate(self.f_proj(hidden), self.A_log, self.dt_bias, self.config.kda_lower_bound)
        beta = torch.sigmoid(self.b_proj(hidden).to(torch.promote_types(hidden.dtype, torch.float32)))
        return KDADeltaRuleInputs(
            q=l2_normalize(q.view(heads_shape)),
            k=l2_normalize(k.view(heads_shape)),
            v=v.view(heads_shape),
            g=g,
            beta=beta,
            conv=torch.stack([q_conv, k_conv, v_conv], dim=1),
        )

    def output(self, o: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        """Gated per-head RMSNorm of the delta-rule output, then o_proj.

        Args:
            o: delta-rule output `[B, T, H, V]`.
            hidden: the normed hidden states `[B, T, D]` the output gate is projected from.

        Returns:
            `[B, T, D]`.
        """
        batch, seq_len, _ = hidden.shape
        gate = self.g_proj(hidden).view(batch, seq_len, self.num_heads, self.head_dim)
        z = gated_rms_norm(o, gate, self.o_norm.weight, self.config.rms_norm_eps)
        return self.o_proj(z.reshape(batch, seq_len, self.config.kda_width))

    def forward(self, hidden: torch.Tensor, state: KDAState | None = None) -> torch.Tensor:
        """Attend over T new tokens, continuing from `state` and updating it in place.

        Args:
            hidden: normed hidden states `[B, T, D]`.
            state: read as the state before these tokens and overwritten with the state after them
                (recurrent and conv); None starts from zeros and keeps nothing.

        Returns:
            `[B, T, D]` in hidden's dtype.
        """
        self._check_hidden(hidden)
        if state is None:
            state = KDAState.zeros(self.config, hidden.shape[0], hidden.device, hidden.dtype)
        self._check_state(state, hidden)
        seq_len = hidden.shape[1]
        inputs = self.delta_rule_inputs(hidden, state.conv)
        delta_rule = recurrent_kda if seq_len <= RECURRENT_MAX_TOKENS else chunk_kda
        o, final_state = delta_rule(
            inputs.q,
            inputs.k,
            inputs.v,
            inputs.g,
            inputs.beta,
            initial_state=state.recurrent,
            output_final_state=True,
        )
        state.recurrent.copy_(final_state)
        state.conv.copy_(inputs.conv)
        return self.output(o, hidden)
