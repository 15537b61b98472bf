"""The target as its own draft: k greedy single-token target steps on a scratch copy of its state.

Used to test the speculative machinery end to end: every draft equals the target's greedy choice,
so acceptance must be total and the emitted tokens must equal plain greedy decoding.
"""

from __future__ import annotations

import torch

from ..cache import ModelCache
from ..model import LingForCausalLM
from .draft_context import DraftContext
from .kda_verify_layer import VerifyOptions
from .target_verify import target_forward_at


class SelfDraft:
    """Drafts with the target model itself (expensive: for tests and sanity runs).

    Args:
        model: the target; cache: the target's committed cache (copied into a scratch cache per proposal);
        block: tokens per proposal; backend: KDA verify backend for the single-token steps.
    """

    kind = "self"
    capture_layers: tuple[int, ...] = ()

    def __init__(self, model: LingForCausalLM, cache: ModelCache, block: int, backend: str = "auto") -> None:
        self.model = model
        self.cache = cache
        self.scratch = cache.clone()
        self.block = block
        self.options = VerifyOptions(staged_kda=False, backend=backend)

    def key_slack(self) -> int:
        return self.block

    @torch.no_grad()
    def propose(self, context: DraftContext) -> torch.Tensor:
        self.scratch.copy_(self.cache)
        token = context.anchor().view(1, 1)
        position = context.anchor_position()
        drafts = []
        for step in range(self.block):
            result = target_forward_at(
                self.model, self.scratch, token, position, context.key_len + step + 1, self.options
            )
            token = self.model.compute_logits(result.final_hidden).argmax(-1)
            drafts.append(token)
            position = position + 1
        return torch.cat(drafts, dim=1)
