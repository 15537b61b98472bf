"""The profiler's `USDT:` lines stay off the console; other stderr output is kept (issue 16 §5)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bubblescope.capture.profiled import profile_window
from bubblescope.capture.quiet_stderr import without_profiler_noise
from bubblescope.examples.toy_workload import make_workload


def test_filter_drops_usdt_lines_and_keeps_the_rest(capfd: pytest.CaptureFixture[str]) -> None:
    with without_profiler_noise():
        os.write(2, b"USDT:2026-12-01 12:00:00 1:1 SyncActivityProfilerHandler.cpp:52] profiler_start\n")
        os.write(2, b"a real warning\n")
    err = capfd.readouterr().err
    assert "USDT:" not in err and "a real warning" in err


def test_profiled_window_prints_no_usdt_lines(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    toy = make_workload("tiny", device="cpu")
    profile_window(toy, steps=2, warmup=1, trace_path=tmp_path / "trace.json.gz")
    assert "USDT:" not in capfd.readouterr().err
