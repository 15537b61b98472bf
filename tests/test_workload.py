"""The ling3 workload satisfies bubblescope's Workload protocol; switches dataclass rules."""

from __future__ import annotations

import pytest
import torch
from bubblescope.reference_model import switches as switches_module
from bubblescope.reference_model.switches import SWITCH_INFO, LingSwitches
from bubblescope.reference_model.workload import IMPLEMENTED_SWITCHES, LingWorkload, make_workload

from bubblescope.errors import ConfigError
from bubblescope.workload import Workload, parse_toggles


@pytest.fixture(scope="module")
def workload() -> LingWorkload:
    return make_workload("debug", device="cpu", prompt_len=8, max_steps=64, path="eager")


def test_conforms_to_the_protocol(workload: LingWorkload) -> None:
    assert isinstance(workload, Workload)
    assert workload.name == "ling3"
    offered = {info.name: info for info in workload.switches()}
    assert set(IMPLEMENTED_SWITCHES) <= set(offered)
    # Anything else offered on the CPU must be marked GPU-only, so a run reports it unusable.
    assert all(info.needs_gpu for name, info in offered.items() if name not in IMPLEMENTED_SWITCHES)
    described = workload.describe()
    assert described["preset"] == "debug" and described["device"] == "cpu" and described["params"] > 0


def test_step_emits_one_token_and_reset_replays_the_same_tokens(workload: LingWorkload) -> None:
    workload.prepare(frozenset())
    assert [workload.step() for _ in range(6)] == [1] * 6
    first = workload.tokens()
    assert len(first) == 7
    workload.reset()
    assert workload.tokens() == first[:1]
    for _ in range(6):
        workload.step()
    assert workload.tokens() == first


@pytest.mark.parametrize("switch", IMPLEMENTED_SWITCHES)
def test_each_switch_keeps_tokens_and_lowers_bytes(workload: LingWorkload, switch: str) -> None:
    workload.prepare(frozenset())
    for _ in range(8):
        workload.step()
    baseline, baseline_bytes = workload.tokens(), workload.bytes_per_token(frozenset())
    workload.prepare(frozenset({switch}))
    for _ in range(8):
        workload.step()
    assert workload.tokens() == baseline
    assert workload.bytes_per_token(frozenset({switch})) < baseline_bytes
    both = frozenset(IMPLEMENTED_SWITCHES)
    assert workload.bytes_per_token(both) < workload.bytes_per_token(frozenset({switch}))
    workload.prepare(frozenset())
    assert workload.model.lm_head.weight.dtype == workload._lm_head_master.dtype
    assert all(router.weight.dtype == torch.float32 for router in workload._routers)


def test_fallback_byte_estimate_agrees_with_accounting(workload: LingWorkload) -> None:
    workload.reset()
    accounted = workload.bytes_per_token(frozenset())
    estimated = workload._bytes_from_tensors(LingSwitches(), workload.cache.length)
    assert abs(estimated - accounted) / accounted < 0.02, f"{estimated} vs {accounted}"


def test_unimplemented_or_unknown_switch_is_a_clear_error(workload: LingWorkload) -> None:
    with pytest.raises(ConfigError, match="pdl is not implemented"):
        workload.prepare(frozenset({"pdl"}))
    with pytest.raises(ConfigError, match="unknown switch nope"):
        parse_toggles("nope", workload.switches())


def test_running_past_max_steps_is_a_clear_error() -> None:
    small = make_workload("debug", device="cpu", prompt_len=2, max_steps=3)
    for _ in range(3):
        small.step()
    with pytest.raises(ConfigError, match="call reset"):
        small.step()
    small.reset()
    assert small.step() == 1


def test_unknown_preset_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="unknown preset"):
        make_workload("ling4")


def test_switches_dataclass_has_one_field_per_switch() -> None:
    names = [info.name for info in SWITCH_INFO]
    assert LingSwitches.from_names(names).enabled() == frozenset(names)
    assert LingSwitches.from_names([]) == LingSwitches()
    with pytest.raises(ConfigError, match="unknown switch bogus"):
        LingSwitches.from_names(["bogus"])


def test_incompatible_pair_fails_naming_both(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(switches_module, "INCOMPATIBLE_PAIRS", (("pdl", "graph_metadata", "test pair"),))
    assert LingSwitches.from_names(["pdl"]).pdl
    with pytest.raises(ConfigError, match="pdl and graph_metadata"):
        LingSwitches.from_names(["pdl", "graph_metadata"])


@pytest.mark.gpu
@pytest.mark.parametrize("preset", ["debug", "ling3-tiny"])
def test_workload_decodes_on_cuda_with_and_without_switches(preset: str) -> None:
    cuda = make_workload(preset, device="cuda", prompt_len=32, max_steps=64, path="eager")
    assert cuda.model.lm_head.weight.is_cuda
    cuda.prepare(frozenset())
    for _ in range(32):
        assert cuda.step() == 1
    baseline = cuda.tokens()
    cuda.prepare(frozenset(IMPLEMENTED_SWITCHES))
    for _ in range(32):
        cuda.step()
    switched = cuda.tokens()
    # Random weights have near-tied logits now and then; most of the greedy path must survive bf16.
    agree = next(
        (i for i, (a, b) in enumerate(zip(baseline, switched, strict=True)) if a != b), len(baseline)
    )
    assert agree >= 8, f"tokens diverge at step {agree}: {baseline[:12]} vs {switched[:12]}"
    assert cuda.bytes_per_token(frozenset(IMPLEMENTED_SWITCHES)) < cuda.bytes_per_token(frozenset())


@pytest.mark.gpu
def test_bf16_gemm_with_fp32_output_on_cuda() -> None:
    import torch
    from bubblescope.reference_model.norm import linear_wide_out

    generator = torch.Generator(device="cuda").manual_seed(0)
    hidden = torch.randn(1, 3, 256, device="cuda", generator=generator)
    weight = torch.randn(512, 256, device="cuda", generator=generator).bfloat16()
    out = linear_wide_out(hidden, weight)
    reference = hidden.bfloat16().double() @ weight.double().T
    assert out.dtype == torch.float32 and out.shape == (1, 3, 512)
    diff = (out.double() - reference).abs().max().item()
    assert diff < 1e-3, f"max abs diff {diff:.3e} vs fp64 of the same bf16 inputs"


def test_step_phases_are_named_in_a_profiler_trace(workload: LingWorkload) -> None:
    from torch.profiler import ProfilerActivity, profile

    workload.prepare(frozenset())
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        workload.step()
    names = {event.name for event in prof.events()}
    expected = {"ling3.embed", "ling3.layer0.kda", f"ling3.layer{workload.config.mla_layers[0]}.mla"}
    expected |= {"ling3.lm_head", "ling3.readback", "aten::item"}
    assert expected <= names, f"missing {sorted(expected - names)}"
