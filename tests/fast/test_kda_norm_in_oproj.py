"""`kda_norm_in_oproj` on the trimmed debug step (CPU interpreter): on vs off, alone and with the splits.

The switch changes where KDA's gated head RMSNorm runs (the rstd in o_proj's prologue instead of KDA's
last program), not its math: only fp32 roundings differ (P slice sums added in o_proj instead of one row
sum, the hardware rsqrt, the gate product before the rstd). So the first step's logits agree to fp32
noise (fp32 debug model: stated bound 1e-5 relative RMS; measured 1.7e-7 at 1 and 3 splits) and the
greedy tokens are equal.
"""

from __future__ import annotations

import pytest
import torch
from bubblescope.reference_model.fast.workload import FastLingWorkload

from .helpers import TRIMMED

# Steps per run: each interpreted step of the trimmed model costs ~0.5 s.
STEPS = 4
# Relative RMS of the first step's logits, on vs off (fp32 model).
LOGITS_TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def trimmed() -> FastLingWorkload:
    return FastLingWorkload(TRIMMED, "cpu", seed=0, prompt_len=8, max_steps=2 * STEPS + 4)


def first_logits_and_tokens(
    workload: FastLingWorkload, enabled: frozenset[str]
) -> tuple[torch.Tensor, list[int]]:
    workload.prepare(enabled)
    workload.step()
    logits = workload.decoder.forward.logits.clone()
    for _ in range(STEPS - 1):
        workload.step()
    return logits, workload.tokens()


def relative_rms(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.double() - want.double()).norm() / want.double().norm())


@pytest.mark.interpreter
@pytest.mark.parametrize("splits", [pytest.param(1, marks=pytest.mark.slow), 3])
def test_kda_norm_in_oproj_keeps_logits_and_tokens(trimmed: FastLingWorkload, splits: int) -> None:
    """3 splits do not divide V = 16 (a ragged last slice: its sum covers fewer columns)."""
    decoder = trimmed.decoder
    try:
        decoder.kda_v_splits = splits
        off_logits, off_tokens = first_logits_and_tokens(trimmed, frozenset())
        on_logits, on_tokens = first_logits_and_tokens(trimmed, frozenset({"kda_norm_in_oproj"}))
        assert decoder.forward.opts.kda_norm_in_oproj and decoder.forward.opts.kda_v_splits == splits
    finally:
        decoder.kda_v_splits = 1
        trimmed.prepare(frozenset())
    error = relative_rms(on_logits, off_logits)
    print(f"kda_norm_in_oproj, {splits} splits: first-step logits relative RMS {error:.2e}")
    assert error <= LOGITS_TOLERANCE, f"{splits} splits: relative RMS {error:.2e} on vs off"
    assert on_tokens == off_tokens


@pytest.mark.interpreter
@pytest.mark.slow
def test_kda_norm_in_oproj_with_norm_epilogue(trimmed: FastLingWorkload) -> None:
    """Both on: o_proj norms its input in the prologue and ends with the next norm (one launch)."""
    off_logits, off_tokens = first_logits_and_tokens(trimmed, frozenset({"norm_epilogue"}))
    on_logits, on_tokens = first_logits_and_tokens(trimmed, frozenset({"norm_epilogue", "kda_norm_in_oproj"}))
    error = relative_rms(on_logits, off_logits)
    assert error <= LOGITS_TOLERANCE, f"with norm_epilogue: relative RMS {error:.2e} on vs off"
    assert on_tokens == off_tokens
