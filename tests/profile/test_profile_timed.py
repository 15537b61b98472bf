"""`bubblescope.profile(timed=N)`: N steps timed before the profiled window, their TPOT with the two-level
interval in profile.json, re-rendered by `report`, compared by `diff` and gated by `gate`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import bubblescope
from bubblescope.diff import run_diff
from bubblescope.errors import ConfigError
from bubblescope.gate import run_gate
from bubblescope.profiling.timing import ONE_BLOCK_LABEL, TIMED_BLOCKS, timed_block
from bubblescope.stats import INTERVAL_LABEL

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.cpu_only


def _read(values: torch.Tensor) -> float:
    return values.sum().item()


READ_LINE = _read.__code__.co_firstlineno + 1


def _loop(out: Path, *, steps: int, timed: int = 16, with_blocks: bool = False) -> bubblescope.profile:
    values = torch.ones(4)
    with bubblescope.profile(out=out, timed=timed, warmup=1, active=2, progress=False) as prof:
        for _ in range(steps):
            if with_blocks:
                with prof.step():
                    _read(values)
            else:
                prof.step()
                _read(values)
    return prof


@pytest.fixture(scope="module")
def timed_profile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bubblescope.profile]:
    out = tmp_path_factory.mktemp("timed")
    # 1 untimed + 16 timed + 1 profiler warm-up + 2 recorded, and two more the loop runs unprofiled.
    return out, _loop(out, steps=22)


def test_timed_steps_come_before_the_profiled_window(timed_profile) -> None:
    out, prof = timed_profile
    record = json.loads((out / "profile.json").read_text())
    timed = record["timed"]
    assert timed["steps"] == 16 and [len(b) for b in timed["samples_ns"]] == [4] * TIMED_BLOCKS
    assert timed["timing"] == "host-perf-counter" and "CPU" in timed["note"]
    assert timed["interval"].startswith(INTERVAL_LABEL)
    lo, hi = timed["tpot_ci95_ms"]
    assert lo <= timed["tpot_ms"] <= hi
    assert record["steps"] == {"started": 22, "recorded": 2, "trailing_step_dropped": False}
    # The read tap is put in after the timed steps and takes the 2 recorded steps' reads only.
    assert record["reads"][0]["site"] == f"{Path(__file__).name}({READ_LINE}): _read"
    assert json.loads((out / "analysis.json").read_text())["read_sites"]["tapped_calls"] == 2
    assert prof.timed_samples is not None and len(prof.timed_samples[0]) == 16


def test_the_analysis_carries_the_timed_tpot_for_calibration(timed_profile) -> None:
    out, _ = timed_profile
    analysis = json.loads((out / "analysis.json").read_text())
    record = json.loads((out / "profile.json").read_text())
    assert analysis["timed"]["tpot_ms"] == record["timed"]["tpot_ms"]
    # Not measured on CPU (no GPU step to compare): null, never 0.
    assert analysis["profiled_step_over_timed"] is None


def test_report_shows_the_timed_tpot(timed_profile) -> None:
    from typer.testing import CliRunner

    from bubblescope.cli import app

    out, _ = timed_profile
    result = CliRunner().invoke(app, ["report", str(out), "--format", "markdown"])
    assert result.exit_code == 0, result.output
    assert "### Timed TPOT" in result.output and "host clock (CPU)" in result.output
    assert "CPU run: times are host (CPU) wall times" in result.output


def test_a_loop_ending_during_the_timed_steps_keeps_what_ran(tmp_path: Path) -> None:
    prof = _loop(tmp_path, steps=6, with_blocks=True)
    record = json.loads((tmp_path / "profile.json").read_text())
    # 1 untimed step, then 5 timed ones: the last ended at its `with` block, so all 5 count.
    assert record["timed"]["steps"] == 5 and record["timed"]["interval"] == ONE_BLOCK_LABEL
    assert "only 5 of 16 timed steps ran before the end" in record["notices"]
    assert record["files"]["trace"] is None and prof.result is None


def test_timed_block_cuts_blocks_only_with_enough_steps() -> None:
    few = timed_block([1000] * 15, [1000] * 15, on_cuda=True)
    assert len(few["samples_ns"]) == 1 and few["note"] is None and few["timing"] == "cuda-events"
    many = timed_block(list(range(1000, 1017)), [1] * 17, on_cuda=False)
    assert [len(b) for b in many["samples_ns"]] == [5, 4, 4, 4]
    assert timed_block([], [], on_cuda=False) is None


def test_timed_needs_live_step_boundaries() -> None:
    with pytest.raises(ConfigError, match="step boundaries"):
        bubblescope.profile(out="unused", timed=8, record_all=True)


def _with_tpot(source: Path, folder: Path, scale: float) -> Path:
    """A copy of the profile whose 16 timed steps took 1.00..1.15 ms x `scale` (measured CPU times on a
    shared box are too noisy to compare in a unit test)."""
    shutil.copytree(source, folder)
    record = json.loads((folder / "profile.json").read_text())
    steps_ns = [int((1_000_000 + 10_000 * i) * scale) for i in range(16)]
    record["timed"] = timed_block(steps_ns, steps_ns, on_cuda=False)
    (folder / "profile.json").write_text(json.dumps(record))
    return folder


def test_gate_and_diff_compare_the_timed_tpot(timed_profile, tmp_path: Path) -> None:
    out, _ = timed_profile
    base = _with_tpot(out, tmp_path / "base", 1.0)
    slower = _with_tpot(out, tmp_path / "slower", 1.5)
    verdict = run_gate(str(base), str(slower), "10%")
    tpot = verdict["checks"][1]
    assert tpot["status"] == "fail" and tpot["ratio"]["lo"] > 1.1
    assert verdict["checks"][0]["status"] == "pass"
    assert run_diff(base, slower)["tpot"]["change"] == "regression"
    same = run_gate(str(base), str(_with_tpot(out, tmp_path / "same", 1.0)), "10%")
    assert same["exit_code"] == 0 and same["checks"][1]["status"] == "pass"


class _FakeEvent:
    """A CUDA event stand-in: `record()` keeps a fake device time; `elapsed_time` returns ms."""

    clock_ms = 0.0

    def __init__(self, enable_timing: bool) -> None:
        assert enable_timing
        self.at_ms: float | None = None

    def record(self) -> None:
        _FakeEvent.clock_ms += 1.5
        self.at_ms = _FakeEvent.clock_ms

    def elapsed_time(self, end: _FakeEvent) -> float:
        assert self.at_ms is not None and end.at_ms is not None, "elapsed_time on an unrecorded event"
        return end.at_ms - self.at_ms


class _FakeCuda:
    Event = _FakeEvent
    synchronized = 0

    @classmethod
    def synchronize(cls) -> None:
        cls.synchronized += 1


class _FakeTorch:
    cuda = _FakeCuda


@pytest.mark.parametrize("ends_at_close", [False, True])
def test_step_timer_on_cuda_events_synchronises_once(ends_at_close: bool) -> None:
    from bubblescope.capture.timed import StepTimer

    timer = StepTimer(_FakeTorch, on_cuda=True, steps=3)
    for _ in range(3):
        timer.mark()
    if ends_at_close:
        timer.mark_close()
    else:
        timer.mark()
    before = _FakeCuda.synchronized
    device_ns, host_ns = timer.finish()
    assert _FakeCuda.synchronized == before + 1
    assert device_ns == [1_500_000] * 3 and len(host_ns) == 3
