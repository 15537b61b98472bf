"""Timed runs, the profiled window and CPU readback counting with the toy workload."""

from __future__ import annotations

from pathlib import Path

import pytest

from bubblescope.analysis.readbacks import count_readbacks
from bubblescope.capture.measure import RunSettings
from bubblescope.capture.profiled import profile_window
from bubblescope.capture.setup import check_usable
from bubblescope.capture.timed import run_timed
from bubblescope.errors import ConfigError, TraceError
from bubblescope.examples.toy_workload import make_workload


@pytest.fixture
def toy():
    return make_workload("tiny", device="cpu")  # these tests describe the host-timed CPU run


def test_timed_run_shapes_and_tokens(toy) -> None:
    toy.prepare(frozenset())
    timed = run_timed(toy, steps=5, warmup=2, repeats=3)
    assert timed.timing == "host-perf-counter"
    assert [len(r) for r in timed.samples_ns] == [5, 5, 5]
    assert timed.tokens_per_step == [[1] * 5] * 3
    assert all(ns > 0 for r in timed.samples_ns for ns in r)
    assert len(timed.tokens) == 7, "first repeat's ids: warmup + timed steps"
    assert all(sum(r) <= wall for r, wall in zip(timed.samples_ns, timed.repeat_wall_ns, strict=True))


def test_switches_change_behaviour_not_tokens(toy) -> None:
    toy.prepare(frozenset())
    plain = run_timed(toy, steps=6, warmup=0, repeats=1).tokens
    toy.prepare(frozenset({"no_readback", "planted_sync"}))
    switched = run_timed(toy, steps=6, warmup=0, repeats=1).tokens
    assert plain == switched and len(plain) == 6


def test_bad_step_return_is_a_config_error(toy) -> None:
    toy.step = lambda: None
    with pytest.raises(ConfigError, match="token count"):
        run_timed(toy, steps=1, warmup=0, repeats=1)


def test_settings_are_validated() -> None:
    with pytest.raises(ConfigError):
        RunSettings(steps=0)
    with pytest.raises(ConfigError):
        RunSettings(profile_steps=-1)


@pytest.mark.parametrize(
    ("enabled", "reads"),
    [((), 1.0), (("no_readback",), 0.0), (("planted_sync",), 2.0), (("no_readback", "planted_sync"), 1.0)],
)
def test_readbacks_per_step_counted_from_cpu_trace(toy, tmp_path: Path, enabled, reads: float) -> None:
    toy.prepare(frozenset(enabled))
    trace = profile_window(toy, steps=3, warmup=1, trace_path=tmp_path / "trace.json.gz")
    counted = count_readbacks(trace)
    assert counted["steps"] == 3
    assert counted["blocking_reads_per_step"] == reads, "aten::item inside aten::item must count once"
    if reads:
        assert all(s["site"].startswith("toy_workload.py(") for s in counted["syncs"])


def test_readback_count_rejects_bad_traces(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text('{"traceEvents": []}')
    # Read by the analysis' streamed loader since issue 18, which refuses an empty events list itself.
    with pytest.raises(TraceError, match="'traceEvents' is empty"):
        count_readbacks(tmp_path / "t.json")
    (tmp_path / "t.json").write_text(
        '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::item", "ts": 1}]}'
    )
    with pytest.raises(TraceError, match="bubblescope.step"):
        count_readbacks(tmp_path / "t.json")
    (tmp_path / "junk.json.gz").write_bytes(b"\x1f\x8bnot gzip")
    with pytest.raises(TraceError):
        count_readbacks(tmp_path / "junk.json.gz")


def test_gpu_switch_is_refused_on_cpu(toy) -> None:
    with pytest.raises(ConfigError, match="graph_replay needs a CUDA device"):
        check_usable(frozenset({"graph_replay"}), toy.switches(), on_cuda=False)
    check_usable(frozenset({"graph_replay"}), toy.switches(), on_cuda=True)
