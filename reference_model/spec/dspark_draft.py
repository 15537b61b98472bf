"""DSpark drafting: context-KV cache upkeep and the one-pass block proposal (design in dspark.py)."""

from __future__ import annotations

import os

import torch
from torch.profiler import record_function

from bubblescope.errors import CheckpointError, ConfigError

from ..init import default_dtype
from ..model import LingForCausalLM
from .draft_context import DraftContext
from .dspark import DSparkConfig, DSparkModule

# Checkpoint prefixes dropped before matching names; names for the shared target tensors are ignored.
_STRIPPED_PREFIXES = ("model.", "draft_model.", "draft.")
_SHARED_NAMES = ("embed_tokens.weight", "word_embeddings.weight", "lm_head.weight")
# Alternative spellings seen in draft checkpoints -> this module's names.
_ALIASES = {"midlayer_norm.weight": "hidden_norm.weight", "enorm.weight": "hidden_norm.weight"}


class DSparkDraft:
    """Block draft of `block` tokens in one parallel forward; random weights unless loaded.

    Args:
        model: the target (embedding and lm_head are shared with it).
        block: B, tokens drafted per verify.
        capacity: positions the context-KV cache holds (prompt + generated + slack).
        seed: weight seed.
    """

    kind = "dspark"

    def __init__(self, model: LingForCausalLM, block: int, capacity: int, *, seed: int = 0) -> None:
        if block < 1:
            raise ConfigError(f"speculative block must be >= 1, got {block}")
        weight = model.model.word_embeddings.weight
        self.cfg = DSparkConfig.from_target(model.config)
        self.model = model
        self.block = block
        self.capture_layers = self.cfg.target_layers
        with torch.device(weight.device), default_dtype(weight.dtype):
            self.module = DSparkModule(self.cfg)
        generator = torch.Generator(device=weight.device).manual_seed(seed + 7919)
        self.module.reset_parameters(generator)
        self.module.eval().requires_grad_(False)
        shape = (len(self.module.layers), 1, capacity, self.cfg.num_heads, self.cfg.head_dim)
        # [layers, 1, capacity, H, Dh]: projected context keys (rotated) and values per position
        self.ctx_keys = torch.zeros(shape, device=weight.device, dtype=weight.dtype)
        self.ctx_values = torch.zeros_like(self.ctx_keys)

    def key_slack(self) -> int:
        return self.block

    def write_context(self, captured: dict[int, torch.Tensor], positions: torch.Tensor) -> None:
        """Project the target's captured hidden states at `positions` into every layer's context KV."""
        module = self.module
        # [1, T, 5 * D] -> [1, T, D]
        stacked = torch.cat([captured[index] for index in self.cfg.target_layers], dim=-1)
        context = module.hidden_norm(module.fc(stacked))
        for index, layer in enumerate(module.layers):
            keys, values = layer.self_attn.keys_values(context, positions)
            self.ctx_keys[index].index_copy_(1, positions[0], keys)
            self.ctx_values[index].index_copy_(1, positions[0], values)

    @torch.no_grad()
    def propose(self, context: DraftContext) -> torch.Tensor:
        """-> [1, B] drafted tokens after the anchor."""
        module = self.module
        with record_function("spec.draft.dspark_context"):
            self.write_context(context.captured, context.positions)
        with record_function("spec.draft.dspark_block"):
            anchor = context.anchor()
            start = context.anchor_position()
            positions = start + torch.arange(self.block, device=start.device)
            # [S] committed context rows only (positions before the anchor)
            ctx_visible = torch.arange(context.key_len, device=start.device) < start[0]
            anchor_embed = self.model.model.word_embeddings(anchor).view(1, 1, -1)
            masks = module.mask_embedding.view(1, 1, -1).expand(1, self.block - 1, -1)
            hidden = torch.cat([anchor_embed, masks], dim=1)
            for index, layer in enumerate(module.layers):
                keys = self.ctx_keys[index, :, : context.key_len]
                values = self.ctx_values[index, :, : context.key_len]
                attn = layer.self_attn(layer.input_layernorm(hidden), positions, keys, values, ctx_visible)
                hidden = hidden + attn
                hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
            logits = self.model.compute_logits(module.norm(hidden))
            # Markov head: condition slot i on slot i-1's first-pass choice (the anchor for slot 0).
            previous = torch.cat([anchor.view(1, 1), logits[:, :-1].argmax(-1)], dim=1)
            logits = logits + module.markov_out(module.markov_in(previous)).to(logits.dtype)
            return logits.argmax(-1)


def load_dspark_weights(draft: DSparkDraft, path: str | os.PathLike[str]) -> list[str]:
    """Load a DSpark draft checkpoint (safetensors) by tensor name.

    Names are matched after dropping a leading `model.` / `draft_model.` / `draft.`; a few aliases
    are translated (_ALIASES); the target's embedding and lm_head, if present, are ignored (shared).

    Returns:
        The checkpoint names that were ignored.

    Raises:
        CheckpointError: not a readable safetensors file, or missing / wrongly shaped tensors.
    """
    try:
        from safetensors.torch import load_file

        stored = load_file(os.fspath(path), device="cpu")
    except Exception as exc:  # noqa: BLE001 - any read failure is one line for the user
        raise CheckpointError(f"cannot read DSpark weights {path}: {exc}".splitlines()[0]) from None
    wanted = draft.module.state_dict()
    mapped: dict[str, torch.Tensor] = {}
    ignored: list[str] = []
    for name, tensor in stored.items():
        short = name
        for prefix in _STRIPPED_PREFIXES:
            short = short.removeprefix(prefix)
        short = _ALIASES.get(short, short)
        if short in wanted:
            mapped[short] = tensor
        else:
            ignored.append(name)
    missing = sorted(set(wanted) - set(mapped))
    if missing:
        raise CheckpointError(f"DSpark weights {path}: missing {len(missing)} tensors, e.g. {missing[:3]}")
    for name, tensor in mapped.items():
        if tuple(tensor.shape) != tuple(wanted[name].shape):
            raise CheckpointError(
                f"DSpark weights {path}: {name} is {tuple(tensor.shape)}, "
                f"expected {tuple(wanted[name].shape)}"
            )
    draft.module.load_state_dict(mapped, strict=True)
    return [name for name in ignored if not name.endswith(_SHARED_NAMES)]
