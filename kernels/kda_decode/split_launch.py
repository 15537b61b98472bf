"""Launcher of the V-split KDA decode kernel and its zero-initialised, self-re-arming workspace."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
from bubblescope.kernels._pdl import launch_options
from bubblescope.kernels.kda_decode.params import (
    KDALayerState,
    KDALayerWeights,
    decode_block_sizes,
    decode_kernel_args,
)
from bubblescope.kernels.kda_decode.split_kernel import kda_decode_split_kernel


@dataclass
class KDASplitWorkspace:
    """Per-head scratch of the V-split kernel. Starts at zero and the kernel leaves it at zero, so one
    workspace serves every layer and step that runs in stream order (not two streams at once).

    Attributes:
        o: `[B*H*V]` fp32 unnormalised outputs; count: `[B*H]` int32 tickets.
    """

    o: torch.Tensor
    count: torch.Tensor

    @classmethod
    def allocate(cls, batch: int, heads: int, value_dim: int, device: torch.device) -> KDASplitWorkspace:
        rows = batch * heads
        return cls(
            o=torch.zeros(rows * value_dim, dtype=torch.float32, device=device),
            count=torch.zeros(rows, dtype=torch.int32, device=device),
        )

    def fits(self, batch: int, heads: int, value_dim: int, device: torch.device) -> bool:
        return (
            self.o.numel() == batch * heads * value_dim
            and self.count.numel() == batch * heads
            and (self.o.device == device)
        )


_WORKSPACES: dict[tuple[str, int, int, int], KDASplitWorkspace] = {}


def shared_workspace(batch: int, heads: int, value_dim: int, device: torch.device) -> KDASplitWorkspace:
    """One cached workspace per (device, B, H, V); allocate it before CUDA-graph capture (first call)."""
    key = (str(device), batch, heads, value_dim)
    if key not in _WORKSPACES:
        _WORKSPACES[key] = KDASplitWorkspace.allocate(batch, heads, value_dim, device)
    return _WORKSPACES[key]


def launch_kda_decode_split(
    acts: dict[str, torch.Tensor],
    weights: KDALayerWeights,
    state: KDALayerState,
    out: torch.Tensor,
    eps: float,
    pdl: bool,
    num_warps: int | None,
    v_splits: int,
    workspace: KDASplitWorkspace,
    prefetch_state: bool = True,
    sumsq: torch.Tensor | None = None,
    early_ticket: bool = False,
) -> None:
    """Grid (B, H, v_splits) launch of kda_decode_split_kernel on validated inputs. With `sumsq`
    (`[B, H, v_splits]` fp32) the norm is left to the consumer: `out` (fp32) takes the un-normed rows, and
    `early_ticket` takes the q/k conv-shift ticket before the PDL wait (split_kernel.py)."""
    batch, heads, key_dim, value_dim = state.recurrent.shape
    v_slice = triton.cdiv(value_dim, v_splits)
    kda_decode_split_kernel[(batch, heads, v_splits)](
        *decode_kernel_args(acts, weights, state, out),
        workspace.o,
        workspace.count,
        # Without sumsq the kernel never touches this pointer (NORM_IN_CONSUMER is False).
        workspace.o if sumsq is None else sumsq,
        heads,
        key_dim,
        value_dim,
        v_slice,
        float(weights.lower_bound),
        key_dim**-0.5,
        eps,
        NUM_V_SPLITS=v_splits,
        **decode_block_sizes(weights.q_conv.shape[1], key_dim, value_dim),
        BLOCK_VS=triton.next_power_of_2(v_slice),
        USE_PDL=pdl,
        PREFETCH_STATE=prefetch_state,
        NORM_IN_CONSUMER=sumsq is not None,
        EARLY_TICKET=sumsq is not None and early_ticket,
        # H200, K = V = 128: 4 warps beat 8 at every split (2026-11-30: 2: 6.5 vs 7.9 us, 4: 6.0 vs 7.0;
        # 2026-12-01 with the state prefetched, PDL: 4: 4.3 vs 4.9), and beat 2 at 8 splits (4.6 vs 4.7).
        num_warps=num_warps or 4,
        **launch_options(pdl),
    )
