"""Shared builders for the speculative-decoding tests (debug preset, fp64 unless said otherwise)."""

from __future__ import annotations

import torch
from bubblescope.reference_model.config import get_preset
from bubblescope.reference_model.init import build_model
from bubblescope.reference_model.model import LingForCausalLM

PROMPT_LEN = 5


def debug_model_fp64(seed: int = 1) -> LingForCausalLM:
    """Debug preset with every weight (router and lm_head included) in fp64, so paths compare to ~1e-12."""
    config = get_preset("debug")
    wide = torch.float64
    return build_model(config, "cpu", seed=seed, dtype=wide, router_dtype=wide, lm_head_dtype=wide)


def random_ids(vocab: int, length: int, seed: int) -> torch.Tensor:
    """[1, length] token ids."""
    return torch.randint(0, vocab, (1, length), generator=torch.Generator().manual_seed(seed))


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b.double()).abs().max().item()
