"""NEXTN drafting: the model's own MTP layer proposes k tokens autoregressively (notes §3.5).

After a verify, one MTP forward over the whole verify window ("draft extend") refreshes the MTP
latent cache with the target's hidden states and yields the first draft at the accepted position;
then k - 1 single-token MTP steps feed back the MTP layer's own output hidden (what SGLang's chain
NEXTN does with one MTP layer). Positions stay on the device; rows past the accepted position are
masked and overwritten by the next extend.
"""

from __future__ import annotations

import torch
from torch.profiler import record_function

from bubblescope.errors import ConfigError

from ..cache import ModelCache
from ..model import LingForCausalLM
from ..mtp import MTPLayer
from .draft_context import DraftContext
from .mla_at_positions import mla_forward_at
from .target_verify import MoERunner, run_mlp


def mtp_forward_at(
    mtp: MTPLayer,
    final_hidden: torch.Tensor,
    next_embeds: torch.Tensor,
    buffer: torch.Tensor,
    positions: torch.Tensor,
    key_len: int,
    moe_runner: MoERunner | None = None,
) -> torch.Tensor:
    """MTPLayer.forward with its MLA rows written at device positions.

    Args:
        final_hidden: [1, T, D] hidden at positions t; next_embeds: [1, T, D] embeddings of tokens t + 1.
        buffer: the MTP layer's latent cache [1, capacity, W]; positions: [1, T]; key_len: host bound.
        moe_runner: runs the MoE block (KernelMoE on the GPU); None calls the eager module.

    Returns:
        [1, T, D] after final_layernorm.
    """
    hidden = mtp.eh_proj(torch.cat((mtp.enorm(next_embeds), mtp.hnorm(final_hidden)), dim=-1))
    hidden = hidden + mla_forward_at(mtp.attention, mtp.input_layernorm(hidden), buffer, positions, key_len)
    hidden = hidden + run_mlp(mtp.mlp, mtp.post_attention_layernorm(hidden), moe_runner)
    return mtp.final_layernorm(hidden)


class NextNDraft:
    """k-token chain draft from the MTP layer; shares embedding and lm_head with the target.

    Args:
        model: the target (must have an MTP layer: config.num_nextn_predict_layers >= 1).
        cache: the target's cache (its MTP latent cache is used).
        block: k, tokens drafted per verify.
        moe_runner: runs the MTP layer's MoE (KernelMoE on the GPU); None: eager.
    """

    kind = "nextn"
    capture_layers: tuple[int, ...] = ()

    def __init__(
        self, model: LingForCausalLM, cache: ModelCache, block: int, moe_runner: MoERunner | None = None
    ) -> None:
        config = model.config
        if config.num_nextn_predict_layers < 1 or len(model.model.layers) <= config.num_hidden_layers:
            raise ConfigError(
                f"--spec nextn needs an MTP layer; preset {config.name} has none (use --spec dspark)"
            )
        if block < 1:
            raise ConfigError(f"speculative block must be >= 1, got {block}")
        self.model = model
        self.mtp: MTPLayer = model.model.layers[config.num_hidden_layers]
        self.buffer = cache.mla[config.num_hidden_layers].buffer
        self.block = block
        self.moe_runner = moe_runner

    def key_slack(self) -> int:
        return self.block

    @torch.no_grad()
    def propose(self, context: DraftContext) -> torch.Tensor:
        """-> [1, k] drafted tokens after the anchor (see module docstring)."""
        embed = self.model.model.word_embeddings
        next_ids = context.next_tokens.clamp_min(0).view(1, -1)
        with record_function("spec.draft.nextn_extend"):
            hidden = mtp_forward_at(
                self.mtp,
                context.final_hidden,
                embed(next_ids),
                self.buffer,
                context.positions,
                context.key_len,
                self.moe_runner,
            )
            # [1, 1, D] the MTP output at the accepted position
            last_hidden = hidden.index_select(1, context.last.view(1))
            token = self.model.compute_logits(last_hidden).argmax(-1)
        drafts = [token]
        position = context.positions.index_select(1, context.last.view(1))
        for step in range(1, self.block):
            with record_function("spec.draft.nextn_step"):
                position = position + 1
                last_hidden = mtp_forward_at(
                    self.mtp,
                    last_hidden,
                    embed(token),
                    self.buffer,
                    position,
                    context.key_len + step,
                    self.moe_runner,
                )
                token = self.model.compute_logits(last_hidden).argmax(-1)
            drafts.append(token)
        return torch.cat(drafts, dim=1)
