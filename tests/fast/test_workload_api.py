"""The ling3 workload's two paths: switches offered, clear errors, GPU-only switches on the CPU."""

from __future__ import annotations

import pytest
from bubblescope.reference_model.fast.decoder import FastDecoder
from bubblescope.reference_model.fast.workload import FastLingWorkload
from bubblescope.reference_model.workload import FAST_SWITCHES, LingWorkload, make_workload

from bubblescope.capture.setup import check_usable
from bubblescope.errors import ConfigError
from bubblescope.workload import Workload, parse_toggles

from .helpers import TRIMMED


@pytest.fixture(scope="module")
def fast() -> FastLingWorkload:
    return FastLingWorkload(TRIMMED, "cpu", seed=0, prompt_len=4, max_steps=2)


@pytest.mark.interpreter
def test_fast_workload_offers_every_fast_switch(fast: FastLingWorkload) -> None:
    assert isinstance(fast, Workload)
    assert [info.name for info in fast.switches()] == list(FAST_SWITCHES)
    described = fast.describe()
    assert described["path"] == "fast" and described["cuda_graphs"] is False


@pytest.mark.interpreter
def test_fast_workload_refuses_unknown_and_speculative_switches(fast: FastLingWorkload) -> None:
    with pytest.raises(ConfigError, match="unknown switch nope"):
        fast.prepare(frozenset({"nope"}))
    with pytest.raises(ConfigError, match="staged_kda is not implemented by ling3's fast path"):
        fast.prepare(frozenset({"staged_kda"}))


@pytest.mark.interpreter
def test_fast_workload_stops_at_max_steps(fast: FastLingWorkload) -> None:
    fast.prepare(frozenset())
    fast.step()
    fast.step()
    with pytest.raises(ConfigError, match="call reset"):
        fast.step()
    fast.reset()
    assert len(fast.tokens()) == 1


@pytest.mark.interpreter
def test_fast_path_on_cpu_needs_the_interpreter(
    fast: FastLingWorkload, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ConfigError, match="needs a CUDA device, or TRITON_INTERPRET=1"):
        FastDecoder(fast.model, fast.cache)


def test_unknown_path_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="unknown path 'turbo'"):
        make_workload("debug", device="cpu", path="turbo")


def test_cpu_eager_workload_reports_gpu_only_switches_as_needing_a_gpu() -> None:
    eager = make_workload("debug", device="cpu", prompt_len=2, max_steps=2)
    assert isinstance(eager, LingWorkload) and not isinstance(eager, FastLingWorkload)
    infos = eager.switches()
    by_name = {info.name: info for info in infos}
    assert {"pdl", "no_readback", "fused_moe", "graph_metadata"} <= set(by_name)
    assert all(by_name[name].needs_gpu for name in ("pdl", "no_readback", "fused_moe", "graph_metadata"))
    enabled = parse_toggles("pdl", infos)
    with pytest.raises(ConfigError, match="pdl needs a CUDA device"):
        check_usable(enabled, infos, on_cuda=False)
    with pytest.raises(ConfigError, match="pdl is not implemented by ling3's eager path"):
        eager.prepare(enabled)
