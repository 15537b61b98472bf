"""`gemv_prefetch` on the GPU, on ling3-tiny (bf16): the output projections' L2 prefetch before the PDL
wait changes when weight bytes arrive, never what is computed.

- Alone (every other switch off, plain launches: the prefetch runs at each program's start): the same
  kernels and the same products, so first-step logits within 1e-5 of all-off and the same 8 tokens
  (tests/fast/test_gpu.py's EXACT rule).
- On the round-4 base (every fast switch on but norm_epilogue: PDL, the fused MoE) and on that base with
  norm_epilogue (the prefetch inside gemv_add_rmsnorm): first-step logits within 1e-2 relative RMS of
  the nearer of two runs without it, the first two tokens equal (the fused MoE's fp32 atomics land in a
  different order every run: tests/fast/test_norm_epilogue_gpu.py says why that tolerance).
A prefetch that corrupted a weight read or raced the PDL wait would move the logits by O(1).
Run: python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/fast/test_gemv_prefetch_gpu.py
"""

from __future__ import annotations

import pytest
import torch
from bubblescope.reference_model.fast.workload import FastLingWorkload
from bubblescope.reference_model.on_top import ROUND4_HELD_OFF
from bubblescope.reference_model.workload import FAST_SWITCHES, make_workload

from tests.fast.test_norm_epilogue_gpu import TOLERANCE, relative_rms, run

pytestmark = pytest.mark.gpu

EXACT_TOLERANCE = 1e-5
ROUND4_BASE = frozenset(FAST_SWITCHES) - set(ROUND4_HELD_OFF) - {"gemv_prefetch"}


@pytest.fixture(scope="module")
def tiny() -> FastLingWorkload:
    workload = make_workload("ling3-tiny", device="cuda", seed=0, prompt_len=32, max_steps=16)
    assert isinstance(workload, FastLingWorkload)
    return workload


def test_gemv_prefetch_alone_is_exact(tiny: FastLingWorkload) -> None:
    base_logits, base_tokens = run(tiny, frozenset())
    logits, tokens = run(tiny, frozenset({"gemv_prefetch"}))
    error = relative_rms(logits, base_logits)
    print(f"gemv_prefetch alone: relative RMS {error:.2e} vs all off")
    assert error <= EXACT_TOLERANCE and tokens == base_tokens


@pytest.mark.parametrize(
    "extra", [frozenset(), frozenset(ROUND4_HELD_OFF)], ids=["round4_base", "with_norm_epilogue"]
)
def test_gemv_prefetch_on_the_pdl_base_keeps_logits(tiny: FastLingWorkload, extra: frozenset[str]) -> None:
    without = ROUND4_BASE | extra
    bases = [run(tiny, without), run(tiny, without)]
    logits, tokens = run(tiny, without | {"gemv_prefetch"})
    errors = [relative_rms(logits, base_logits) for base_logits, _ in bases]
    nearer = min(range(2), key=lambda index: errors[index])
    noise = relative_rms(bases[1][0], bases[0][0])
    print(
        f"gemv_prefetch on {sorted(extra) or 'the round-4 base'}: relative RMS {errors}",
        f"(base vs base {noise:.2e})",
    )
    assert errors[nearer] <= TOLERANCE, f"relative RMS {errors[nearer]:.2e} (base vs base {noise:.2e})"
    assert tokens[:2] == bases[nearer][1][:2], "gemv_prefetch changed the first greedy tokens"
    assert torch.isfinite(logits).all()
