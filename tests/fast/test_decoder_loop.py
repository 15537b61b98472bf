"""The fast decoder's host loop: late token collection (no_readback) and what forces a recapture."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from bubblescope.reference_model.fast.decoder import FastDecoder
from bubblescope.reference_model.fast.workload import FastLingWorkload
from bubblescope.reference_model.switches import LingSwitches

from .helpers import TRIMMED


class FakeEvent:
    """A CUDA event stand-in that completes when told to; counts blocking waits."""

    def __init__(self) -> None:
        self.done = False
        self.waits = 0

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        self.waits += 1
        self.done = True


def loop_state(events: list[FakeEvent], tokens: list[int]) -> SimpleNamespace:
    slots = torch.tensor(tokens + [0], dtype=torch.int64)
    return SimpleNamespace(_events=events, _slots=slots, _emitted=[], _harvested=0)


def test_collect_takes_only_finished_tokens_in_order_without_waiting() -> None:
    events = [FakeEvent(), FakeEvent(), FakeEvent()]
    state = loop_state(events, [11, 12, 13])
    events[0].done = events[2].done = True
    FastDecoder._collect(state, wait=False)
    # Step 2 finished but step 1 did not: tokens stay in order, nothing blocks.
    assert state._emitted == [11] and all(e.waits == 0 for e in events)
    events[1].done = True
    FastDecoder._collect(state, wait=False)
    assert state._emitted == [11, 12, 13]


def test_collect_with_wait_blocks_only_for_unfinished_steps() -> None:
    events = [FakeEvent(), FakeEvent()]
    events[0].done = True
    state = loop_state(events, [5, 6])
    FastDecoder._collect(state, wait=True)
    assert state._emitted == [5, 6] and [e.waits for e in events] == [0, 1]


@pytest.fixture(scope="module")
def fast() -> FastLingWorkload:
    return FastLingWorkload(TRIMMED, "cpu", seed=2, prompt_len=3, max_steps=2)


@pytest.mark.interpreter
def test_host_loop_only_switch_keeps_the_step_other_switches_rebuild_it(fast: FastLingWorkload) -> None:
    fast.prepare(frozenset())
    step = fast.decoder.forward
    fast.prepare(frozenset({"no_readback"}))
    assert fast.decoder.forward is step and fast.decoder.switches.no_readback
    # With graph_metadata the on-device advance is part of the captured step: a new step.
    fast.prepare(frozenset({"no_readback", "graph_metadata"}))
    assert fast.decoder.forward is not step
    options = {
        "pdl": "use_pdl",
        "fused_moe": "fused_moe",
        "fast_topk": "fast_topk",
        "early_shared": "early_shared",
        "deep_experts": "deep_experts",
        "fused_mla_glue": "fused_mla_glue",
        "norm_epilogue": "norm_epilogue",
        "bf16_gate": "bf16_gate",
        "bf16_lm_head": "bf16_lm_head",
    }
    for switch, option in options.items():
        before = fast.decoder.forward
        fast.prepare(frozenset({switch}))
        assert fast.decoder.forward is not before, switch
        chosen = {name for name in options.values() if getattr(fast.decoder.forward.opts, name)}
        assert chosen == {option}, f"{switch} set options {chosen}"


def test_graph_key_separates_every_graph_relevant_switch() -> None:
    keys = {
        FastDecoder.graph_key(LingSwitches.from_names([name]))
        for name in (
            "pdl",
            "fused_moe",
            "fast_topk",
            "early_shared",
            "deep_experts",
            "fused_mla_glue",
            "norm_epilogue",
            "bf16_gate",
            "bf16_lm_head",
            "graph_metadata",
        )
    }
    assert len(keys) == 10 and FastDecoder.graph_key(LingSwitches(no_readback=True)) == FastDecoder.graph_key(
        LingSwitches()
    )
