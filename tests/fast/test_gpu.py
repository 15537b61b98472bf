"""GPU checks of the fast path on ling3-tiny (bf16): each switch vs all-off, and vs the eager model.

Stated bf16 tolerance. Errors are relative RMS of the first decode step's fp32 logits,
||a - b|| / ||b||, against an fp32 "truth": the same weights upcast to fp32, run by the plain PyTorch
model. The bf16 eager model's own error `noise` = err(eager bf16) sets the scale (random weights give
near-tied routing decisions, so a bf16 model may sit 2-10 % from fp32; measured on bf16 `debug`
variants: fast and eager within 1.5x of each other). A configuration passes when
err(config) <= 2 * noise + 1e-2.
- `no_readback`, `graph_metadata`, `pdl` move work, not math: logits within 1e-5 of all-off and the
  same 32 greedy tokens.
"""

from __future__ import annotations

import copy

import pytest
import torch
from bubblescope.reference_model.fast.workload import FastLingWorkload
from bubblescope.reference_model.generate import decode_step, new_cache, prefill
from bubblescope.reference_model.workload import FAST_SWITCHES, make_workload

pytestmark = pytest.mark.gpu

STEPS = 32
EXACT = ("no_readback", "graph_metadata", "pdl")
EXACT_TOLERANCE = 1e-5


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


@pytest.fixture(scope="module")
def references(tiny: FastLingWorkload, baseline) -> dict[str, torch.Tensor]:
    """First-step logits of the eager bf16 model and of its fp32 copy, from the same first token."""
    first_token = baseline[1][0]
    cache = tiny.cache
    cache.reset()
    with torch.no_grad():
        prefill(tiny.model, tiny.prompt_ids, cache)
        token = torch.tensor([[first_token]], device="cuda")
        eager = decode_step(tiny.model, token, cache)
        model32 = copy.deepcopy(tiny.model).float()
        cache32 = new_cache(model32, cache.mla[tiny.config.mla_layers[0]].capacity)
        prefill(model32, tiny.prompt_ids, cache32)
        truth = decode_step(model32, token, cache32)
    del model32, cache32
    torch.cuda.empty_cache()
    tiny.reset()
    return {"eager": eager, "truth": truth}


def allowed_error(references: dict[str, torch.Tensor]) -> float:
    return 2 * relative_rms(references["eager"], references["truth"]) + 1e-2


def test_step_is_one_cuda_graph(tiny: FastLingWorkload, baseline) -> None:
    assert tiny.decoder.graph is not None
    logits, tokens = baseline
    assert torch.isfinite(logits).all() and len(set(tokens)) > 4, tokens


def test_all_off_tracks_fp32_as_closely_as_the_eager_model(baseline, references) -> None:
    error = relative_rms(baseline[0], references["truth"])
    noise = relative_rms(references["eager"], references["truth"])
    assert error <= allowed_error(references), f"fast {error:.2e} vs fp32; eager bf16 is {noise:.2e}"


@pytest.mark.parametrize("switch", FAST_SWITCHES)
def test_switch_logits_within_tolerance(tiny: FastLingWorkload, baseline, references, switch: str) -> None:
    base_logits, base_tokens = baseline
    logits, tokens = run(tiny, frozenset({switch}), STEPS)
    if switch in EXACT:
        error = relative_rms(logits, base_logits)
        assert error <= EXACT_TOLERANCE, f"{switch}: relative RMS {error:.2e} vs all-off"
        assert tokens == base_tokens, f"{switch} changed the greedy tokens"
    else:
        error = relative_rms(logits, references["truth"])
        assert error <= allowed_error(references), f"{switch}: {error:.2e} from fp32"
    assert tokens[0] == base_tokens[0]


def test_all_on_logits_within_tolerance(tiny: FastLingWorkload, baseline, references) -> None:
    logits, tokens = run(tiny, frozenset(FAST_SWITCHES), STEPS)
    error = relative_rms(logits, references["truth"])
    assert error <= allowed_error(references), f"all on: {error:.2e} from fp32"
    assert tokens[0] == baseline[1][0]


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
