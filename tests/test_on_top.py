"""The on-top workload: new switches ablated with the earlier ones fixed on (no model needed)."""

from __future__ import annotations

import pytest
from bubblescope.reference_model.on_top import (
    FIXED_ON,
    ROUND2,
    ROUND2_FIXED_ON,
    ROUND3,
    ROUND3_FIXED_ON,
    ROUND4,
    ROUND4_FIXED_ON,
    ROUND4_HELD_OFF,
    SPEC_FIXED_ON,
    SPEC_ROUND4,
    SPEC_ROUND4_FIXED_ON,
    SPEC_STUDIED,
    STUDIED,
    OnTopWorkload,
)
from bubblescope.reference_model.spec.workload import SPEC_SWITCHES
from bubblescope.reference_model.switches import SWITCH_INFO
from bubblescope.reference_model.workload import FAST_SWITCHES

from bubblescope.errors import ConfigError


class FakeFastWorkload:
    name = "ling3"
    device = "cuda"

    def __init__(self) -> None:
        self.prepared: list[frozenset[str]] = []

    def switches(self):
        return [info for info in SWITCH_INFO if info.name in FAST_SWITCHES]

    def prepare(self, enabled: frozenset[str]) -> None:
        self.prepared.append(enabled)

    def step(self) -> int:
        return 1

    def bytes_per_token(self, enabled: frozenset[str]) -> int:
        return 1000 + len(enabled)

    def describe(self) -> dict[str, object]:
        return {"preset": "debug"}


def test_offers_only_the_studied_switches_and_holds_the_rest_on() -> None:
    inner = FakeFastWorkload()
    workload = OnTopWorkload(inner)
    assert [info.name for info in workload.switches()] == list(STUDIED)
    workload.prepare(frozenset())
    workload.prepare(frozenset({"fast_topk"}))
    assert inner.prepared == [FIXED_ON, FIXED_ON | {"fast_topk"}]
    # Later rounds are held off, so the baseline stays the pre-issue-17 all-on step.
    assert FIXED_ON | set(STUDIED) | set(ROUND2) | set(ROUND3) | set(ROUND4) == set(FAST_SWITCHES)
    assert not FIXED_ON & set(STUDIED + ROUND2 + ROUND3 + ROUND4)
    assert workload.bytes_per_token(frozenset()) == 1000 + len(FIXED_ON)
    assert workload.describe()["fixed_on"] == sorted(FIXED_ON)
    # Everything else is the inner workload's.
    assert workload.device == "cuda" and workload.step() == 1


def test_refuses_to_turn_a_fixed_switch_on_or_off() -> None:
    with pytest.raises(ConfigError, match="pdl is fixed by"):
        OnTopWorkload(FakeFastWorkload()).prepare(frozenset({"pdl"}))


def test_round2_studies_its_switches_with_every_other_one_on() -> None:
    inner = FakeFastWorkload()
    workload = OnTopWorkload(inner, studied=ROUND2, fixed_on=ROUND2_FIXED_ON)
    assert [info.name for info in workload.switches()] == list(ROUND2)
    workload.prepare(frozenset())
    assert inner.prepared == [ROUND2_FIXED_ON] and {"fast_topk", "early_shared"} <= ROUND2_FIXED_ON
    assert ROUND2_FIXED_ON | set(ROUND2) | set(ROUND3) | set(ROUND4) == set(FAST_SWITCHES)
    assert not ROUND2_FIXED_ON & set(ROUND3 + ROUND4)
    # The second round's switches are held off in the first round's workload (its old all-on baseline).
    assert {"deep_experts", "fused_mla_glue"} <= set(ROUND2) and not {"fused_mla_glue"} & FIXED_ON
    with pytest.raises(ConfigError, match="fast_topk is fixed by"):
        workload.prepare(frozenset({"fast_topk"}))


def test_round3_studies_its_switches_with_every_other_one_on() -> None:
    inner = FakeFastWorkload()
    workload = OnTopWorkload(inner, studied=ROUND3, fixed_on=ROUND3_FIXED_ON)
    assert [info.name for info in workload.switches()] == list(ROUND3) and "norm_epilogue" in ROUND3
    workload.prepare(frozenset(ROUND3))
    assert inner.prepared == [set(FAST_SWITCHES) - set(ROUND4)]
    assert (
        ROUND3_FIXED_ON | set(ROUND3) | set(ROUND4) == set(FAST_SWITCHES) and set(ROUND2) <= ROUND3_FIXED_ON
    )
    with pytest.raises(ConfigError, match="deep_experts is fixed by"):
        workload.prepare(frozenset({"deep_experts"}))


def test_round4_builds_on_the_fastest_round3_step() -> None:
    # Round 4's baseline: every switch on but its own and the ones measured slower (norm_epilogue).
    assert ROUND4_FIXED_ON | set(ROUND4) | set(ROUND4_HELD_OFF) == set(FAST_SWITCHES)
    assert not ROUND4_FIXED_ON & set(ROUND4 + ROUND4_HELD_OFF) and not set(ROUND4) & set(ROUND4_HELD_OFF)
    assert "routing_in_experts" in ROUND4_FIXED_ON and "norm_epilogue" not in ROUND4_FIXED_ON
    inner = FakeFastWorkload()
    workload = OnTopWorkload(inner, studied=ROUND4, fixed_on=ROUND4_FIXED_ON)
    workload.prepare(frozenset(ROUND4))
    assert inner.prepared == [set(FAST_SWITCHES) - set(ROUND4_HELD_OFF)]
    with pytest.raises(ConfigError, match="norm_epilogue is fixed by"):
        workload.prepare(frozenset({"norm_epilogue"}))


def test_spec_round_holds_every_other_speculative_switch_on() -> None:
    # Round 2's study holds round 4's verify switches off; round 4's holds every other one on.
    assert SPEC_FIXED_ON | set(SPEC_STUDIED) == set(SPEC_SWITCHES) - set(SPEC_ROUND4)
    assert not SPEC_FIXED_ON & set(SPEC_STUDIED + SPEC_ROUND4)
    assert {"staged_kda", "fused_kda_verify", "no_readback", "pdl", "fast_topk"} <= SPEC_FIXED_ON
    assert SPEC_ROUND4_FIXED_ON | set(SPEC_ROUND4) == set(SPEC_SWITCHES)
    assert set(SPEC_STUDIED) <= SPEC_ROUND4_FIXED_ON and not SPEC_ROUND4_FIXED_ON & set(SPEC_ROUND4)


def test_studied_switches_are_usable_on_the_cpu_interpreter_only(monkeypatch) -> None:
    # `ablate --preset debug` under TRITON_INTERPRET=1 smoke-tests the GPU command: the interpreter runs
    # every studied kernel; without it (or on CUDA) the switches keep their needs_gpu.
    inner = FakeFastWorkload()
    inner.device = "cpu"
    workload = OnTopWorkload(inner, studied=ROUND3, fixed_on=ROUND3_FIXED_ON)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert all(info.needs_gpu for info in workload.switches())
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert [(info.name, info.needs_gpu) for info in workload.switches()] == [(n, False) for n in ROUND3]
    inner.device = "cuda"
    assert all(info.needs_gpu for info in workload.switches())
