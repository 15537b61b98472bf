"""Turn a model whose weights are already sharded into a tensor-parallel one (gpt-fast style).

Nothing in `model.py` knows about TP. This module, from outside: gives every attention block the local
head count and local config, and inserts the two all-reduces per layer as forward hooks on the
row-parallel outputs — KDA `o_proj` / MLA `dense` (so every path that projects attention output,
verify included, reduces) and the layer's `mlp` (MoE: routed + shared partial sums reduced together;
dense SwiGLU: its down_proj partial).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from ..kda import KDAAttention
from ..mla import MLAAttention
from ..model import DecoderLayer, LingForCausalLM
from ..mtp import MTPLayer
from .comm import TPComm
from .lm_head import gather_vocab, local_logits
from .plan import local_config


def _reducing_hook(comm: TPComm) -> Callable[[nn.Module, object, torch.Tensor], torch.Tensor]:
    def hook(_module: nn.Module, _inputs: object, output: torch.Tensor) -> torch.Tensor:
        return comm.all_reduce(output)

    return hook


def apply_tensor_parallel(model: LingForCausalLM, comm: TPComm) -> LingForCausalLM:
    """Make an already-sharded model run tensor-parallel over `comm`; returns the same model.

    After this, `model.config` is the rank's local config (H / TP heads), so caches allocated from it
    (`ModelCache.allocate(model.config, ...)`, `generate.new_cache`) hold only local KDA heads;
    `model.full_config` keeps the unsharded one and `model.tp` the communicator. `compute_logits`
    (hence `forward`) returns the full logits row, all-gathered from the vocabulary slices, so code
    written for one GPU still sees whole rows; greedy decode uses `tp.lm_head.greedy_tokens`, which
    exchanges only (max, index) pairs, and `tp.lm_head.local_logits` gives this rank's slice.

    Args:
        model: weights already split per `plan.sharding_plan` for comm.rank.
        comm: this rank's communicator.
    """
    full = getattr(model, "full_config", model.config)
    local = local_config(full, comm.world_size)
    handles: list[RemovableHandle] = []
    for module in model.modules():
        if isinstance(module, KDAAttention):
            module.config = local
            module.num_heads = local.num_attention_heads
            handles.append(module.o_proj.register_forward_hook(_reducing_hook(comm)))
        elif isinstance(module, MLAAttention):
            module.config = local
            module.num_heads = local.num_attention_heads
            handles.append(module.dense.register_forward_hook(_reducing_hook(comm)))
        if isinstance(module, DecoderLayer | MTPLayer):
            handles.append(module.mlp.register_forward_hook(_reducing_hook(comm)))
    model.full_config = full  # type: ignore[assignment]
    model.config = local
    model.model.config = local
    model.tp = comm  # type: ignore[assignment]
    model.tp_hooks = handles  # type: ignore[assignment]
    vocab_block = full.vocab_size // comm.world_size
    model.vocab_start = comm.rank * vocab_block  # type: ignore[assignment]
    if comm.world_size > 1:
        # Callers that want logits (generate, speculative verify, MTP) get the full row, gathered;
        # greedy decode uses tp.lm_head.greedy_tokens instead, which moves 2 numbers per row.
        def full_logits(final_hidden: torch.Tensor) -> torch.Tensor:
            return gather_vocab(local_logits(model, final_hidden), comm)

        model.compute_logits = full_logits  # type: ignore[method-assign]
    return model
