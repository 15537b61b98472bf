"""`kda_norm_in_oproj` on the GPU, on ling3-tiny (bf16): the switch on top of the round-4 baseline (every
fast-path switch but norm_epilogue, make_round4_workload's) vs that baseline, one CUDA graph each; and on
top of every switch, norm_epilogue included (the two compose in one o_proj launch).

Stated tolerance (tests/fast/test_norm_epilogue_gpu.py's, for the same reason): first-step logits within
a relative RMS of 1e-2 of the nearer of two runs without the switch (the fused MoE's fp32 atomics make
the base differ from itself), the first two greedy tokens equal. A missed or wrong head norm moves the
logits by O(1). Launches per step are unchanged: every KDA o_proj becomes a gemv_head_norm_kernel.
Run: python3 -m pytest -q -m gpu -p no:cacheprovider tests/fast/test_kda_norm_in_oproj_gpu.py
"""

from __future__ import annotations

import pytest
import torch
from bubblescope.reference_model.fast.workload import FastLingWorkload
from bubblescope.reference_model.on_top import ROUND4_FIXED_ON
from bubblescope.reference_model.workload import FAST_SWITCHES, make_workload

from .test_norm_epilogue_gpu import TOLERANCE, kernels_per_replay, relative_rms, run

pytestmark = pytest.mark.gpu

SWITCH = "kda_norm_in_oproj"
ROUND4_BASE = ROUND4_FIXED_ON - {SWITCH}
EVERY_OTHER = frozenset(FAST_SWITCHES) - {SWITCH}


@pytest.fixture(scope="module")
def tiny() -> FastLingWorkload:
    workload = make_workload("ling3-tiny", device="cuda", seed=0, prompt_len=32, max_steps=24)
    assert isinstance(workload, FastLingWorkload)
    return workload


@pytest.mark.parametrize("base", [ROUND4_BASE, EVERY_OTHER], ids=["round4_base", "with_norm_epilogue"])
def test_kda_norm_in_oproj_keeps_logits_and_tokens(tiny: FastLingWorkload, base: frozenset[str]) -> None:
    bases = [run(tiny, base), run(tiny, base)]
    logits, tokens = run(tiny, base | {SWITCH})
    errors = [relative_rms(logits, base_logits) for base_logits, _ in bases]
    nearer = min(range(2), key=lambda index: errors[index])
    noise = relative_rms(bases[1][0], bases[0][0])
    print(f"{SWITCH}: relative RMS {errors} vs two runs without it (which differ by {noise:.2e})")
    assert errors[nearer] <= TOLERANCE, f"relative RMS {errors[nearer]:.2e} (base vs base {noise:.2e})"
    assert tokens[:2] == bases[nearer][1][:2], f"{SWITCH} changed the first greedy tokens"
    assert torch.isfinite(logits).all()


def test_kda_norm_in_oproj_moves_the_o_proj_to_its_kernel(tiny: FastLingWorkload) -> None:
    off = kernels_per_replay(tiny, ROUND4_BASE)
    on = kernels_per_replay(tiny, ROUND4_BASE | {SWITCH})
    head_norm = sum(count for name, count in on.items() if name.startswith("gemv_head_norm_kernel"))
    print(f"launches per step: {sum(off.values())} -> {sum(on.values())}; gemv_head_norm {head_norm}")
    assert head_norm == len(tiny.config.kda_layers)
    assert sum(off.values()) == sum(on.values())
