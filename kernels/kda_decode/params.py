"""One KDA layer's decode-time weights and state, and the arguments both decode kernels take."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton


@dataclass
class KDALayerWeights:
    """The small per-layer tensors the KDA decode kernel reads (the projections run as GEMVs before it).

    Attributes:
        q_conv, k_conv: depthwise conv weights `[H*K, KW]` (HF `[H*K, 1, KW]` squeezed); tap KW-1
            multiplies the current token.
        v_conv: `[H*V, KW]`.
        a_log: `[H]` fp32; decay rate exp(A_log) per head.
        dt_bias: `[H*K]` fp32.
        o_norm: `[V]` gated-output RMSNorm weight shared by all heads.
        lower_bound: safe-gate bound (g in (lower_bound, 0)); -5 for Ling.
    """

    q_conv: torch.Tensor
    k_conv: torch.Tensor
    v_conv: torch.Tensor
    a_log: torch.Tensor
    dt_bias: torch.Tensor
    o_norm: torch.Tensor
    lower_bound: float = -5.0


@dataclass
class KDALayerState:
    """Decode state of one KDA layer, updated in place by each step.

    Attributes:
        q_conv, k_conv: last KW-1 pre-conv inputs `[B, H*K, KW-1]`, oldest first.
        v_conv: `[B, H*V, KW-1]`.
        recurrent: delta-rule state `[B, H, K, V]` fp32.
    """

    q_conv: torch.Tensor
    k_conv: torch.Tensor
    v_conv: torch.Tensor
    recurrent: torch.Tensor

    def clone(self) -> KDALayerState:
        """A copy with every tensor cloned (a reference to step in place beside this state)."""
        return KDALayerState(*(t.clone() for t in (self.q_conv, self.k_conv, self.v_conv, self.recurrent)))


def decode_kernel_args(
    acts: dict[str, torch.Tensor], weights: KDALayerWeights, state: KDALayerState, out: torch.Tensor
) -> tuple:
    """The positional arguments both KDA decode kernels start with, in their order.

    Activations q, k, v, f, b, gate, then their row strides, the layer weights, the conv and
    recurrent states, and out with its row stride.
    """
    activations = tuple(acts[name] for name in ("q", "k", "v", "f", "b", "gate"))
    return (
        *activations,
        *(tensor.stride(0) for tensor in activations),
        weights.q_conv,
        weights.k_conv,
        weights.v_conv,
        weights.a_log,
        weights.dt_bias,
        weights.o_norm,
        state.q_conv,
        state.k_conv,
        state.v_conv,
        state.recurrent,
        out,
        out.stride(0),
    )


def decode_block_sizes(taps: int, key_dim: int, value_dim: int) -> dict[str, int]:
    """Constexpr sizes both KDA decode kernels take: KW and the conv-state, K and V blocks."""
    return dict(
        KW=taps,
        BLOCK_T=max(2, triton.next_power_of_2(taps - 1)),
        BLOCK_K=triton.next_power_of_2(key_dim),
        BLOCK_V=triton.next_power_of_2(value_dim),
    )
