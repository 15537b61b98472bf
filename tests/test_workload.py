"""The ling3 workload satisfies bubblescope's Workload protocol; switches dataclass rules."""

from __future__ import annotations

import pytest
from bubblescope.reference_model import switches as switches_module
from bubblescope.reference_model.switches import SWITCH_INFO, LingSwitches
from bubblescope.reference_model.workload import IMPLEMENTED_SWITCHES, LingWorkload, make_workload

from bubblescope.errors import ConfigError
from bubblescope.workload import Workload, parse_toggles


@pytest.fixture(scope="module")
def workload() -> LingWorkload:
    return make_workload("debug", device="cpu", prompt_len=8, max_steps=64)


def test_conforms_to_the_protocol(workload: LingWorkload) -> None:
    assert isinstance(workload, Workload)
    assert workload.name == "ling3"
    assert [info.name for info in workload.switches()] == list(IMPLEMENTED_SWITCHES)
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


def test_switches_keep_tokens_and_lower_bytes(workload: LingWorkload) -> None:
    workload.prepare(frozenset())
    for _ in range(8):
        workload.step()
    baseline, baseline_bytes = workload.tokens(), workload.bytes_per_token(frozenset())
    both = frozenset(IMPLEMENTED_SWITCHES)
    workload.prepare(both)
    for _ in range(8):
        workload.step()
    assert workload.tokens() == baseline
    assert workload.bytes_per_token(both) < baseline_bytes
    workload.prepare(frozenset())
    assert workload.model.lm_head.weight.dtype == workload._lm_head_master.dtype


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
