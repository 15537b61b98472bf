"""One target forward over anchor + drafted tokens, and the commit of the accepted prefix.

The verify runs the main layers exactly as the model does (same modules, same weights), except that
KDA layers go through the verify kernels (staged or in place, kda_verify_layer.py) and MLA layers
write their rows at device positions (mla_at_positions.py). Nothing in here reads the device, so a
verify can be enqueued before the host knows the previous step's result (`no_readback`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import torch
from bubblescope.kernels.kda_verify.verify import triton_usable
from bubblescope.kernels.rmsnorm import add_rmsnorm
from torch.profiler import record_function

from ..cache import ModelCache
from ..kda import KDAState
from ..model import LingForCausalLM
from ..moe import MoE
from .kda_verify_layer import (
    KDAVerifyRecord,
    VerifyOptions,
    commit_staged,
    kda_verify_layer,
    recompute_from_checkpoint,
)
from .mla_at_positions import mla_forward_at


@dataclass
class TargetPass:
    """Result of target_forward_at.

    Attributes:
        final_hidden: [1, T, D] after model.norm.
        captured: layer index -> [1, T, D] residual stream after that layer (draft conditioning).
        kda_records: KDA layer index -> what commit needs.
    """

    final_hidden: torch.Tensor
    captured: dict[int, torch.Tensor] = field(default_factory=dict)
    kda_records: dict[int, KDAVerifyRecord] = field(default_factory=dict)


# (moe module, normed [1, T, D]) -> [1, T, D]
MoERunner = Callable[[MoE, torch.Tensor], torch.Tensor]


def run_mlp(mlp: torch.nn.Module, normed: torch.Tensor, moe_runner: MoERunner | None) -> torch.Tensor:
    """The layer's FFN: MoE through `moe_runner` when given, everything else eager."""
    if moe_runner is not None and isinstance(mlp, MoE):
        return moe_runner(mlp, normed)
    return mlp(normed)


@contextlib.contextmanager
def gathered_moe(model: LingForCausalLM, rows: int) -> Iterator[None]:
    """Make every MoE gather its experts on device for up to `rows` token x expert pairs.

    The eager MoE reads per-expert token counts to the host above `gather_max_rows`; under
    `no_readback` a verify must not, so the limit is raised for its duration and restored after.
    """
    modules = [module for module in model.modules() if isinstance(module, MoE)]
    before = [module.gather_max_rows for module in modules]
    for module in modules:
        module.gather_max_rows = max(module.gather_max_rows, rows)
    try:
        yield
    finally:
        for module, limit in zip(modules, before, strict=True):
            module.gather_max_rows = limit


def target_forward_at(
    model: LingForCausalLM,
    cache: ModelCache,
    token_ids: torch.Tensor,
    positions: torch.Tensor,
    key_len: int,
    options: VerifyOptions,
    capture_layers: Sequence[int] = (),
    moe_runner: MoERunner | None = None,
) -> TargetPass:
    """Main layers over T tokens at device positions; KDA staged or in place per `options`.

    Args:
        token_ids: [1, T] anchor then drafted tokens.
        positions: [1, T] int64 on the device, consecutive from the committed length.
        key_len: host upper bound on the last position + 1 (MLA attention window).
        capture_layers: main-layer indices whose output to keep (DSpark context).
        moe_runner: runs MoE blocks (e.g. KernelMoE on the GPU); None calls the eager module.

    Returns:
        TargetPass. With staged_kda the KDA states are untouched; without, they hold the state after
        all T tokens (commit_verify repairs them from the checkpoint).
    """
    add_norm = eager_add_norm
    if options.kernel_norm and options.backend != "torch" and triton_usable(token_ids.device):
        add_norm = kernel_add_norm(options.use_pdl)
    result = TargetPass(final_hidden=token_ids.new_empty(0))
    with record_function("spec.verify.embed"):
        hidden = model.model.word_embeddings(token_ids)
    # Each layer's MLP output is added to the residual by the next norm (the next layer's input norm or
    # the final norm), so a layer's output residual exists only then: captured one norm late.
    pending: torch.Tensor | None = None
    last_captured: int | None = None
    for layer in model.main_layers:
        with record_function(f"spec.verify.layer{layer.index}.{'mla' if layer.is_mla else 'kda'}"):
            normed, hidden = add_norm(hidden, pending, layer.input_layernorm)
            if last_captured is not None:
                result.captured[last_captured] = hidden
                last_captured = None
            if layer.is_mla:
                attn = mla_forward_at(
                    layer.attention, normed, cache.mla[layer.index].buffer, positions, key_len
                )
            else:
                attn, record = kda_verify_layer(layer.attention, normed, cache.kda[layer.index], options)
                result.kda_records[layer.index] = record
            normed, hidden = add_norm(hidden, attn, layer.post_attention_layernorm)
            pending = run_mlp(layer.mlp, normed, moe_runner)
        if layer.index in capture_layers:
            last_captured = layer.index
    result.final_hidden, hidden = add_norm(hidden, pending, model.model.norm)
    if last_captured is not None:
        result.captured[last_captured] = hidden
    return result


# (residual [1, T, D], contribution to add or None, norm module) -> (normed rows, new residual), both
# [1, T, D] and new tensors (a captured residual is never written again).
AddNorm = Callable[[torch.Tensor, torch.Tensor | None, torch.nn.Module], tuple[torch.Tensor, torch.Tensor]]


def eager_add_norm(
    hidden: torch.Tensor, contribution: torch.Tensor | None, norm: torch.nn.Module
) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's own ops: residual + contribution, then the norm module (~8 PyTorch kernels)."""
    if contribution is not None:
        hidden = hidden + contribution
    return norm(hidden), hidden


def kernel_add_norm(use_pdl: bool) -> AddNorm:
    """The add and the norm as ONE add_rmsnorm launch (`verify_norm_kernel`).

    The eager RMSNorm is ~8 PyTorch kernels per norm (H200, DSpark verify of 10 rows: 1.08 ms of 17.2 ms
    per step for the 85 norms). Numerics: the sum is normalised in fp32 before it is rounded (eager rounds
    the sum to the model dtype first) and w * r * rstd is rounded once (eager twice), so rows differ by
    that rounding, not bitwise.
    """

    def add_norm(
        hidden: torch.Tensor, contribution: torch.Tensor | None, norm: torch.nn.Module
    ) -> tuple[torch.Tensor, torch.Tensor]:
        rows = hidden.reshape(-1, hidden.shape[-1]).contiguous()
        if contribution is None:
            normed, residual = add_rmsnorm(rows, None, norm.weight, norm.eps, use_pdl=use_pdl)
        else:
            added = contribution.reshape(rows.shape).to(rows.dtype).contiguous()
            normed, residual = add_rmsnorm(added, rows, norm.weight, norm.eps, use_pdl=use_pdl)
        return normed.view(hidden.shape), residual.view(hidden.shape)

    return add_norm


def allocate_checkpoint(cache: ModelCache) -> dict[int, KDAState]:
    """Buffers for the whole KDA (recurrent + conv) state, same shapes as the cache's."""
    return {index: state.clone() for index, state in cache.kda.items()}


def checkpoint_kda(cache: ModelCache, checkpoint: dict[int, KDAState]) -> None:
    """Copy every KDA layer's state into the checkpoint (staged_kda off, before verify)."""
    with record_function("spec.kda_checkpoint"):
        for index, state in cache.kda.items():
            checkpoint[index].copy_(state)


def commit_verify(
    model: LingForCausalLM,
    cache: ModelCache,
    verify: TargetPass,
    accepted: torch.Tensor,
    options: VerifyOptions,
    checkpoint: dict[int, KDAState] | None,
) -> None:
    """Leave every KDA layer in the state after verify position `accepted` (0-d device int64).

    MLA caches need nothing: their rows up to the accepted position are already right and later
    rows are masked and overwritten; the caller advances the committed length.
    """
    with record_function("spec.commit"):
        for layer in model.main_layers:
            if layer.is_mla:
                continue
            state, record = cache.kda[layer.index], verify.kda_records[layer.index]
            if options.staged_kda:
                commit_staged(state, record, accepted)
            else:
                recompute_from_checkpoint(
                    layer.attention, state, checkpoint[layer.index], record, accepted, options
                )
