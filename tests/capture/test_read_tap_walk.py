"""The read tap's stack walk ends at the plumbing past the user's code (runpy, the CLI, `run`'s loop).

Under the profiler every frame walked costs; the frames past the first bubblescope or standard-library
frame that follows a user frame never name a read (profiling.read_sites ends the caller chain there too).
"""

from __future__ import annotations

import inspect

import pytest
import torch

from bubblescope.capture.timed import reset_if_possible, run_timed
from bubblescope.capture.user_reads import ReadTap

pytestmark = pytest.mark.cpu_only


class _OneRead:
    device = "cpu"

    def __init__(self) -> None:
        self.value = torch.ones(3)

    def step(self) -> int:
        _ = self.value.sum().item()
        return 1


def _read_line() -> int:
    lines, first = inspect.getsourcelines(_OneRead.step)
    (offset,) = [i for i, text in enumerate(lines) if ".item()" in text]
    return first + offset


def test_walk_stops_at_bubblescope_past_the_user_frame() -> None:
    workload = _OneRead()
    with ReadTap(cuda_run=False) as tap:
        tap.state.recording = True
        # run_timed (bubblescope) calls the user's step, as run's profiled window does.
        run_timed(workload, steps=1, warmup=0, repeats=1)
        reset_if_possible(workload)
    (call,) = tap.state.calls
    assert [(code.co_name, line) for code, line in call.frames] == [("step", _read_line())]


def test_walk_goes_on_through_user_callers() -> None:
    workload = _OneRead()

    def outer() -> int:
        return workload.step()

    with ReadTap(cuda_run=False) as tap:
        tap.state.recording = True
        outer()
    names = [code.co_name for code, _line in tap.state.calls[0].frames]
    assert names[:3] == ["step", "outer", "test_walk_goes_on_through_user_callers"]
