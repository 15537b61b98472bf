"""Every fast-path switch gives the same greedy tokens as all-off (CPU: Triton interpreter, no graphs).

The interpreter costs ~10-100 ms per kernel launch, so the per-switch runs use the `debug` preset
trimmed to 3 layers (tests/fast/helpers.py: KDA + dense, KDA + dense, MLA + MoE: every block kind),
2 heads and top-2 routing; one test runs the full `debug` preset against the eager reference. `pdl` has no
CPU test: the interpreter cannot run PDL, so on the CPU it would be the all-off run again (it is
covered by tests/fast/test_gpu.py).
"""

from __future__ import annotations

import pytest
import torch
from bubblescope.reference_model.fast.decoder import auto_kda_v_splits
from bubblescope.reference_model.fast.workload import FastLingWorkload
from bubblescope.reference_model.workload import make_workload

from .helpers import TRIMMED

# Decode steps per equivalence run (the issue asks for >= 32 per switch).
STEPS = 32
# early_shared is not run alone: without fused_moe it leaves the step unchanged (the fused test below
# and the all-together test cover it).
CPU_SWITCHES = [
    "no_readback",
    "fused_moe",
    "fast_topk",
    "bf16_gate",
    "bf16_lm_head",
    "graph_metadata",
    "fused_mla_glue",
]


def decode(workload: FastLingWorkload, enabled: frozenset[str], steps: int) -> list[int]:
    workload.prepare(enabled)
    for _ in range(steps):
        assert workload.step() == 1
    tokens = workload.tokens()
    assert len(tokens) == steps + 1
    return tokens


@pytest.fixture(scope="module")
def trimmed() -> FastLingWorkload:
    return FastLingWorkload(TRIMMED, "cpu", seed=0, prompt_len=8, max_steps=STEPS)


# Short runs in the default suite (each switch, SHORT_STEPS steps); the full STEPS per switch in `slow`.
SHORT_STEPS = 8


@pytest.fixture(scope="module")
def baseline(trimmed: FastLingWorkload) -> list[int]:
    """All-off tokens over SHORT_STEPS: all the default suite compares with (the STEPS run is decoded
    only for the `slow` tests, full_baseline)."""
    return decode(trimmed, frozenset(), SHORT_STEPS)


@pytest.fixture(scope="module")
def full_baseline(trimmed: FastLingWorkload) -> list[int]:
    return decode(trimmed, frozenset(), STEPS)


@pytest.mark.interpreter
def test_baseline_is_not_degenerate(baseline: list[int]) -> None:
    # A stuck model (one token forever) would make every equivalence test pass vacuously.
    assert len(set(baseline)) > SHORT_STEPS // 2, baseline


@pytest.mark.slow
@pytest.mark.interpreter
def test_full_baseline_is_not_degenerate(full_baseline: list[int]) -> None:
    assert len(set(full_baseline)) > STEPS // 4, full_baseline


@pytest.mark.interpreter
@pytest.mark.parametrize("switch", CPU_SWITCHES)
def test_switch_keeps_tokens_short(trimmed: FastLingWorkload, baseline: list[int], switch: str) -> None:
    assert decode(trimmed, frozenset({switch}), SHORT_STEPS) == baseline[: SHORT_STEPS + 1], switch


@pytest.mark.slow
@pytest.mark.interpreter
@pytest.mark.parametrize("switch", CPU_SWITCHES)
def test_switch_keeps_greedy_tokens(trimmed: FastLingWorkload, full_baseline: list[int], switch: str) -> None:
    tokens = decode(trimmed, frozenset({switch}), STEPS)
    first_diff = next((i for i, (a, b) in enumerate(zip(tokens, full_baseline, strict=True)) if a != b), None)
    assert first_diff is None, f"{switch}: tokens differ from all-off at step {first_diff}"


# fast_topk, early_shared and deep_experts change the fused launches (one run for all: interpreter
# time); SHORT_STEPS in the default suite, the full STEPS in `slow`, as for the single switches above.
NEW_MOE_ON_FUSED = frozenset({"fused_moe", "fast_topk", "early_shared", "deep_experts"})


@pytest.mark.interpreter
def test_new_moe_switches_on_the_fused_path_keep_tokens_short(
    trimmed: FastLingWorkload, baseline: list[int]
) -> None:
    tokens = decode(trimmed, NEW_MOE_ON_FUSED, SHORT_STEPS)
    assert tokens == baseline[: SHORT_STEPS + 1], sorted(NEW_MOE_ON_FUSED)


@pytest.mark.slow
@pytest.mark.interpreter
def test_new_moe_switches_on_the_fused_path_keep_tokens(
    trimmed: FastLingWorkload, full_baseline: list[int]
) -> None:
    tokens = decode(trimmed, NEW_MOE_ON_FUSED, STEPS)
    first_diff = next((i for i, (a, b) in enumerate(zip(tokens, full_baseline, strict=True)) if a != b), None)
    assert first_diff is None, f"{sorted(NEW_MOE_ON_FUSED)}: tokens differ from all-off at step {first_diff}"


# routing_in_experts moves routing from the router launch into the experts launch: on top of the other
# fused MoE switches and norm_epilogue (whose norm ends the same experts launch), i.e. the all-on MoE
# path, same greedy tokens (alone, without fused_moe, it leaves the step unchanged).
ROUTING_IN_EXPERTS_ON_FUSED = NEW_MOE_ON_FUSED | {"routing_in_experts", "norm_epilogue"}


@pytest.mark.interpreter
def test_routing_in_experts_on_the_fused_path_keeps_tokens_short(
    trimmed: FastLingWorkload, baseline: list[int]
) -> None:
    tokens = decode(trimmed, ROUTING_IN_EXPERTS_ON_FUSED, SHORT_STEPS)
    assert tokens == baseline[: SHORT_STEPS + 1], sorted(ROUTING_IN_EXPERTS_ON_FUSED)


@pytest.mark.slow
@pytest.mark.interpreter
def test_routing_in_experts_on_the_fused_path_keeps_tokens(
    trimmed: FastLingWorkload, full_baseline: list[int]
) -> None:
    tokens = decode(trimmed, ROUTING_IN_EXPERTS_ON_FUSED, STEPS)
    first_diff = next((i for i, (a, b) in enumerate(zip(tokens, full_baseline, strict=True)) if a != b), None)
    assert first_diff is None, f"routing_in_experts: tokens differ from all-off at step {first_diff}"


# tma_experts changes how the experts launch brings and multiplies its weight tiles (TMA copies,
# tensor-core dots of the row split in three bf16 parts): on the all-on MoE path, same greedy tokens.
TMA_EXPERTS_ON_FUSED = NEW_MOE_ON_FUSED | {"routing_in_experts", "tma_experts"}


@pytest.mark.interpreter
def test_tma_experts_on_the_fused_path_keeps_tokens_short(
    trimmed: FastLingWorkload, baseline: list[int]
) -> None:
    tokens = decode(trimmed, TMA_EXPERTS_ON_FUSED, SHORT_STEPS)
    assert tokens == baseline[: SHORT_STEPS + 1], sorted(TMA_EXPERTS_ON_FUSED)


@pytest.mark.interpreter
def test_all_cpu_switches_together_keep_tokens(trimmed: FastLingWorkload, baseline: list[int]) -> None:
    # no_readback with graph_metadata puts the on-device advance inside the step body: its own combination.
    steps = SHORT_STEPS
    # norm_epilogue has its own module (test_norm_epilogue.py: logits, tokens, launches); here with the rest.
    together = frozenset(CPU_SWITCHES) | {"early_shared", "norm_epilogue"}
    assert decode(trimmed, together, steps) == baseline[: steps + 1]


@pytest.mark.interpreter
def test_prepare_restores_the_baseline_after_switches(trimmed: FastLingWorkload, baseline: list[int]) -> None:
    decode(trimmed, frozenset({"bf16_gate", "fused_moe"}), 2)
    assert decode(trimmed, frozenset(), 4) == baseline[:5]


# 3 does not divide V (ragged last slice) and runs in the default suite; the even split under `slow`.
@pytest.mark.interpreter
@pytest.mark.parametrize("splits", [pytest.param(2, marks=pytest.mark.slow), 3])
def test_split_kda_decode_keeps_greedy_tokens(
    trimmed: FastLingWorkload, baseline: list[int], splits: int
) -> None:
    # The GPU default splits each KDA head's V over programs (decoder.auto_kda_v_splits); the
    # interpreter keeps 1, so the split step is forced here.
    steps = SHORT_STEPS
    decoder = trimmed.decoder
    assert decoder is not None and decoder.kda_v_splits == 1
    try:
        decoder.kda_v_splits = splits
        assert decode(trimmed, frozenset(), steps) == baseline[: steps + 1], f"v_splits={splits}"
        assert decoder.forward is not None and decoder.forward.opts.kda_v_splits == splits
    finally:
        decoder.kda_v_splits = 1
        trimmed.prepare(frozenset())


def test_auto_kda_v_splits_reaches_the_program_target() -> None:
    assert [auto_kda_v_splits(heads, True) for heads in (2, 16, 32, 64, 128, 256)] == [8, 8, 4, 2, 1, 1]
    assert auto_kda_v_splits(16, False) == 1


@pytest.mark.interpreter
def test_fast_path_matches_eager_reference_on_debug() -> None:
    steps = 3
    fast = make_workload("debug", device="cpu", seed=3, prompt_len=8, max_steps=steps, path="fast")
    eager = make_workload("debug", device="cpu", seed=3, prompt_len=8, max_steps=steps, path="eager")
    for _ in range(steps):
        fast.step()
        eager.step()
    assert fast.tokens() == eager.tokens()


def _first_step_logits(workload: FastLingWorkload) -> tuple[torch.Tensor, torch.Tensor]:
    """(fast, eager) logits of the first decode step after the same prefill.

    The eager reference runs on the packed (re-pointed) weights, which serve both paths.
    """
    from bubblescope.reference_model.generate import decode_step, prefill

    workload.step()
    fast_logits = workload.decoder.forward.logits.clone()
    cache = workload.cache
    cache.reset()
    first = prefill(workload.model, workload.prompt_ids, cache)[0].argmax()
    return fast_logits, decode_step(workload.model, first.view(1, 1), cache)


@pytest.mark.interpreter
def test_fast_logits_match_eager_decode_step() -> None:
    workload = FastLingWorkload(TRIMMED, "cpu", seed=1, prompt_len=5, max_steps=2)
    fast_logits, eager_logits = _first_step_logits(workload)
    diff = (fast_logits - eager_logits).abs().max().item()
    scale = eager_logits.abs().max().item()
    assert diff <= 1e-4 * scale, f"max abs diff {diff:.3e} vs logit scale {scale:.3e}"
    assert int(fast_logits.argmax()) == workload.tokens()[1]
    assert torch.isfinite(fast_logits).all()


@pytest.mark.interpreter
@pytest.mark.parametrize("enabled", [(), tuple(CPU_SWITCHES)], ids=["all_off", "cpu_switches_on"])
def test_bf16_q_lora_variant_tracks_the_eager_model(enabled: tuple[str, ...]) -> None:
    # bf16 activations and a q LoRA (ling3-tiny's MLA query form): the mixed-dtype paths the GPU runs.
    config = TRIMMED.with_(dtype="bfloat16", q_lora_rank=16)
    workload = FastLingWorkload(config, "cpu", seed=1, prompt_len=5, max_steps=2)
    workload.prepare(frozenset(enabled))
    fast_logits, eager_logits = _first_step_logits(workload)
    error = float((fast_logits.double() - eager_logits.double()).norm() / eager_logits.double().norm())
    # bf16 roundings sit in different places (fused norms, fp32 GEMV outputs): ~1 % measured.
    assert error <= 3e-2, f"relative RMS {error:.2e}"
    assert int(fast_logits.argmax()) == int(eager_logits.argmax())


# fused_mla_glue replaces the MLA head products' PyTorch ops with two launches that round where they
# did: in bf16 the on/off logits can differ only where an fp32 sum's order flips a rounding, in fp32
# by the sums' order and the sigmoid's last bit. Stated tolerance: relative RMS of the first step's
# logits (measured on the CPU interpreter: see the assertion message).
GLUE_TOLERANCE = {"float32": 1e-5, "bfloat16": 1e-3}


def first_step_logits(workload: FastLingWorkload, enabled: frozenset[str]) -> torch.Tensor:
    workload.prepare(enabled)
    workload.step()
    return workload.decoder.forward.logits.clone()


@pytest.mark.interpreter
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fused_mla_glue_keeps_first_step_logits(trimmed: FastLingWorkload, dtype: str) -> None:
    # bf16 with a q LoRA: the query then comes from a bf16 GEMV, not the fp32 projection rows.
    workload = (
        trimmed
        if dtype == "float32"
        else FastLingWorkload(
            TRIMMED.with_(dtype=dtype, q_lora_rank=16), "cpu", seed=1, prompt_len=5, max_steps=2
        )
    )
    off = first_step_logits(workload, frozenset())
    on = first_step_logits(workload, frozenset({"fused_mla_glue"}))
    error = float((on.double() - off.double()).norm() / off.double().norm())
    assert error <= GLUE_TOLERANCE[dtype], f"{dtype}: relative RMS {error:.2e} on vs off"
    assert int(on.argmax()) == int(off.argmax())
    print(f"fused_mla_glue {dtype}: relative RMS {error:.2e}, bit-identical {torch.equal(on, off)}")
