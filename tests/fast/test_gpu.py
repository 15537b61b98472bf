"""GPU checks of the fast path on ling3-tiny (bf16): each switch vs all-off, all-off vs the eager model.

Tolerances (relative RMS of the first decode step's fp32 logits, ||a - b|| / ||b||):
- `no_readback`, `graph_metadata`, `pdl`: they move work, not math -> 1e-5, and the same 32 tokens.
- `fused_moe`: the fused experts sum through fp32 atomics in varying order -> 2e-2.
- `bf16_gate`: bf16 router weights may flip near-tied experts in some of the 23 MoE layers -> 6e-2.
- `bf16_lm_head`: bf16 lm_head weights (0.4 % per weight, fp32 accumulation) -> 2e-2.
- all-off vs the plain PyTorch model (different kernels, bf16 roundings in other places) -> 3e-2.
The first greedy token must agree in every case.
"""

from __future__ import annotations

import pytest
import torch
from bubblescope.reference_model.fast.workload import FastLingWorkload
from bubblescope.reference_model.generate import decode_step, prefill
from bubblescope.reference_model.workload import FAST_SWITCHES, make_workload

pytestmark = pytest.mark.gpu

STEPS = 32
TOLERANCE = {
    "no_readback": 1e-5,
    "graph_metadata": 1e-5,
    "pdl": 1e-5,
    "fused_moe": 2e-2,
    "bf16_gate": 6e-2,
    "bf16_lm_head": 2e-2,
}
EXACT = ("no_readback", "graph_metadata", "pdl")
EAGER_TOLERANCE = 3e-2


def relative_rms(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def run(workload: FastLingWorkload, enabled: frozenset[str], steps: int) -> tuple[torch.Tensor, list[int]]:
    """(first step's logits [1, V] fp32, tokens) of `steps` steps after prepare(enabled)."""
    workload.prepare(enabled)
    workload.step()
    torch.cuda.synchronize()
    logits = workload.decoder.forward.logits.clone()
    for _ in range(steps - 1):
        workload.step()
    return logits, workload.tokens()


@pytest.fixture(scope="module")
def tiny() -> FastLingWorkload:
    workload = make_workload("ling3-tiny", device="cuda", seed=0, prompt_len=32, max_steps=STEPS + 8)
    assert isinstance(workload, FastLingWorkload)
    return workload


@pytest.fixture(scope="module")
def baseline(tiny: FastLingWorkload) -> tuple[torch.Tensor, list[int]]:
    return run(tiny, frozenset(), STEPS)


def test_step_is_one_cuda_graph(tiny: FastLingWorkload, baseline) -> None:
    assert tiny.decoder.graph is not None
    logits, tokens = baseline
    assert torch.isfinite(logits).all() and len(set(tokens)) > 4, tokens


@pytest.mark.parametrize("switch", FAST_SWITCHES)
def test_switch_logits_within_tolerance(tiny: FastLingWorkload, baseline, switch: str) -> None:
    base_logits, base_tokens = baseline
    logits, tokens = run(tiny, frozenset({switch}), STEPS)
    error = relative_rms(logits, base_logits)
    assert error <= TOLERANCE[switch], f"{switch}: relative RMS {error:.2e} > {TOLERANCE[switch]:.0e}"
    assert tokens[:2] == base_tokens[:2]
    if switch in EXACT:
        assert tokens == base_tokens, f"{switch} changed the greedy tokens"


def test_all_on_logits_within_tolerance(tiny: FastLingWorkload, baseline) -> None:
    base_logits, base_tokens = baseline
    logits, tokens = run(tiny, frozenset(FAST_SWITCHES), STEPS)
    error = relative_rms(logits, base_logits)
    assert error <= TOLERANCE["bf16_gate"] + TOLERANCE["fused_moe"], f"all on: relative RMS {error:.2e}"
    assert tokens[:2] == base_tokens[:2]


def test_all_off_matches_the_eager_model(tiny: FastLingWorkload, baseline) -> None:
    base_logits, base_tokens = baseline
    cache = tiny.cache
    cache.reset()
    with torch.no_grad():
        first = prefill(tiny.model, tiny.prompt_ids, cache)[0].argmax()
        eager_logits = decode_step(tiny.model, first.view(1, 1), cache)
    assert int(first) == base_tokens[0]
    error = relative_rms(base_logits, eager_logits)
    assert error <= EAGER_TOLERANCE, f"fast vs eager: relative RMS {error:.2e}"
    assert int(eager_logits.argmax()) == base_tokens[1]


def test_no_readback_steps_never_synchronize(tiny: FastLingWorkload) -> None:
    for enabled in ({"no_readback"}, {"no_readback", "graph_metadata"}):
        tiny.prepare(frozenset(enabled))
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(8):
                tiny.step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert len(tiny.tokens()) == 9


def test_readback_baseline_really_reads_every_step(tiny: FastLingWorkload) -> None:
    tiny.prepare(frozenset())
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with pytest.raises(RuntimeError, match="synchroniz"):
            tiny.step()
    finally:
        torch.cuda.set_sync_debug_mode("default")
