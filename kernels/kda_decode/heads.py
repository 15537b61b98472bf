"""KDA decode without its output norm's reduction (`kda_norm_in_oproj`): rows for o_proj's prologue.

The gated per-head RMSNorm that ends `kda_decode` reduces over all of V, which the V-split kernel can
only do across programs (workspace, ticket, the last program's read). Here each program stores its fp32
slice of o * o_norm * sigmoid(gate) (elementwise, local to the slice) and the slice's sum of squares of o;
kernels/gemv/head_norm_prologue.py scales each head's V-chunk by its rstd as it loads x. The math is
kda_decode's (naive: kda_heads_naive, then gated_head_norm_naive without the rstd).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from bubblescope.kernels.gemv.checks import KernelInputError, check_shape
from bubblescope.kernels.kda_decode.ops import OP, check_kda_decode_inputs, launch_checked
from bubblescope.kernels.kda_decode.params import KDALayerState, KDALayerWeights
from bubblescope.kernels.kda_decode.split_launch import KDASplitWorkspace


@dataclass
class KDAHeads:
    """One KDA token's attention output before its gated RMSNorm.

    Attributes:
        out: `[B, H*V]` fp32 gated, un-normed rows o * o_norm * sigmoid(gate) (o = S^T q per head).
        sumsq: `[B, H, P]` fp32 sums of squares of `out`, one per V slice of a head (P = v_splits);
            a head's RMSNorm uses their sum over P.
    """

    out: torch.Tensor
    sumsq: torch.Tensor

    @classmethod
    def allocate(cls, batch: int, heads: int, value_dim: int, parts: int, device: torch.device) -> KDAHeads:
        return cls(
            out=torch.empty(batch, heads * value_dim, dtype=torch.float32, device=device),
            sumsq=torch.empty(batch, heads, parts, dtype=torch.float32, device=device),
        )


def kda_decode_heads(
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
    heads: KDAHeads | None = None,
    num_warps: int | None = None,
    v_splits: int = 1,
    workspace: KDASplitWorkspace | None = None,
    prefetch_state: bool = True,
    early_ticket: bool = True,
) -> KDAHeads:
    """One KDA decode token in one launch, without the output RMSNorm's rstd: conv+SiLU (state shifted
    in place), safe gate, beta, L2-normed q and k, delta rule on the fp32 state (in place), o = S^T q,
    gated (o * o_norm * sigmoid(gate)), and the sums of squares of o the rstd needs.

    Args:
        q, k, v, f, b, gate, weights, state, eps, use_pdl, num_warps, v_splits, workspace,
            prefetch_state: as `kda_decode` (eps here is the L2 norms'; the output norm's is o_proj's).
        heads: optional destination, `KDAHeads.allocate(B, H, V, v_splits, device)`.
        early_ticket: (v_splits > 1) take the ticket that elects the q/k conv-state shifter as soon as
            the conv windows are summed, before the PDL wait when the state is prefetched, so its round
            trip overlaps the previous kernel (split_kernel.py). Needs, as prefetch_state does, the
            kernel just before this one not to be a KDA decode on the same workspace (in the decoder it
            is the in_proj GEMV); pass False, or a workspace per layer, to chain KDA launches directly.
    Returns:
        KDAHeads: the un-normed rows and each V slice's sum of squares.
    """
    activations = {"q": q, "k": k, "v": v, "f": f, "b": b, "gate": gate}
    check_kda_decode_inputs(activations, weights, state)
    batch, head_count, _, value_dim = state.recurrent.shape
    if heads is None:
        heads = KDAHeads.allocate(batch, head_count, value_dim, v_splits, v.device)
    check_shape("heads.out", heads.out, (batch, head_count * value_dim), OP)
    check_shape("heads.sumsq", heads.sumsq, (batch, head_count, v_splits), OP)
    tensors = (heads.out, heads.sumsq)
    if any(t.dtype != torch.float32 or not t.is_contiguous() or t.device != v.device for t in tensors):
        raise KernelInputError(f"{OP}: heads.out and heads.sumsq must be contiguous fp32 on {v.device}")
    launch_checked(
        activations,
        weights,
        state,
        heads.out,
        eps,
        use_pdl,
        num_warps,
        v_splits,
        workspace,
        prefetch_state,
        sumsq=heads.sumsq,
        early_ticket=early_ticket,
    )
    return heads
