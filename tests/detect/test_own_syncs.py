"""Only the user's reads are the user's (issue 23 §4): bubblescope's own synchronizes and torch.profiler's
synchronize when a profile stops are never reads, with or without bubblescope's markers, with or
without Python stacks.

The real-trace cases name each synchronize by the timestamp read from the raw events (`ts`, µs, as
written in the file) and say why it is the profiler's or the user's from its enclosing events.
"""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import pytest

from bubblescope.analysis.traces import analyze_ranks, analyze_traces
from bubblescope.trace.markers import is_own_sync_frame
from tests.trace.builder import US, TraceBuilder


def _sync_apis(result: dict) -> list[tuple[str, str, int]]:
    return [(s["api"], s["site"], s["count"]) for s in result["syncs"]]


def test_session_step_close_without_its_marker_is_the_tools(tmp_path: Path) -> None:
    """A profile session's step close synchronizes under `_close_step` of a bubblescope module (here
    under the package it is moving to, `bubblescope/profile/`) and no `bubblescope.own_sync` marker;
    the user's own `torch.cuda.synchronize()` in app.py stays a read."""
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 100 * US)
    b.kernel("k", (1 * US, 2 * US), (3 * US, 10 * US))
    user = b.frame("/home/user/app.py(30): main", 0, 300 * US)
    b.frame("/home/user/app.py(40): drain", 20 * US, 30 * US, parent=user)
    b.device_synchronize(21 * US, 29 * US)
    close = b.frame(
        "/venv/site-packages/bubblescope/profile/session.py(190): _close_step", 100 * US, 140 * US
    )
    b.frame("torch/cuda/__init__.py(1000): synchronize", 105 * US, 135 * US, parent=close)
    b.device_synchronize(110 * US, 130 * US)
    result = analyze_traces([b.write(tmp_path / "t.json.gz")])
    assert _sync_apis(result) == [("cudaDeviceSynchronize", "drain (app.py, def line 40)", 1)]


def test_torch_profiler_stop_with_stack_is_the_profilers(tmp_path: Path) -> None:
    """`prof.step()` -> `_transit_action` -> `stop_trace` -> autograd profiler `__exit__` ->
    `torch.cuda.synchronize()`: the profiler's, although the user's loop frame encloses it."""
    b = TraceBuilder()
    b.annotation("ProfilerStep#3", 0, 100 * US)
    b.kernel("k", (1 * US, 2 * US), (3 * US, 10 * US))
    loop = b.frame("/home/user/train.py(161): worker", 0, 300 * US)
    step = b.frame("torch/profiler/profiler.py(811): step", 110 * US, 200 * US, parent=loop)
    stop = b.frame("torch/profiler/profiler.py(235): stop_trace", 111 * US, 199 * US, parent=step)
    exit_ = b.frame("torch/autograd/profiler.py(363): __exit__", 112 * US, 198 * US, parent=stop)
    b.frame("torch/cuda/__init__.py(975): synchronize", 113 * US, 197 * US, parent=exit_)
    b.device_synchronize(114 * US, 196 * US)
    result = analyze_traces([b.write(tmp_path / "t.json.gz")])
    assert result["syncs"] == []


def _stop_without_stack(launch_after: bool, inside_step: bool) -> TraceBuilder:
    """Two steps, a device synchronize after them with no frame and no op around it."""
    b = TraceBuilder()
    b.annotation("ProfilerStep#1", 0, 50 * US)
    b.kernel("k1", (1 * US, 2 * US), (3 * US, 10 * US))
    b.annotation("ProfilerStep#2", 50 * US, 100 * US if not inside_step else 200 * US)
    b.kernel("k2", (51 * US, 52 * US), (53 * US, 60 * US))
    b.device_synchronize(120 * US, 130 * US)
    if launch_after:
        b.kernel("k3", (140 * US, 141 * US), (142 * US, 150 * US))
    return b


@pytest.mark.parametrize(
    ("launch_after", "inside_step", "is_read"),
    [(False, False, False), (True, False, True), (False, True, True)],
    ids=["profiler-stop", "work-launched-after", "inside-a-step"],
)
def test_trailing_device_sync_without_stack(
    tmp_path: Path, launch_after: bool, inside_step: bool, is_read: bool
) -> None:
    """Without Python stacks, the last device synchronize after every step with nothing launched after
    it is the profiler stopping; one inside a step, or followed by more work, is the user's."""
    result = analyze_traces([_stop_without_stack(launch_after, inside_step).write(tmp_path / "t.json.gz")])
    assert [s["api"] for s in result["syncs"]] == (["cudaDeviceSynchronize"] if is_read else [])


def test_own_sync_frames() -> None:
    assert is_own_sync_frame("torch/autograd/profiler.py(375): __exit__")
    assert is_own_sync_frame("/usr/lib/python3/site-packages/torch/profiler/profiler.py(867): stop")
    assert is_own_sync_frame("/r/bubblescope/capture/profiled.py(95): profile_window")
    assert is_own_sync_frame("bubblescope/profile/session.py(221): _stop_profiler")
    # The user's code, even in a function of the same name, and bubblescope's example workloads are not.
    assert not is_own_sync_frame("/home/u/app.py(3): _close_step")
    assert not is_own_sync_frame("/r/bubblescope/examples/loop.py(9): run_timed")
    assert not is_own_sync_frame("torch/cuda/__init__.py(975): synchronize")


# (trace, raw `ts` of torch.profiler's stop synchronize, why; raw `ts` of the user's synchronizes kept).
REAL_STOPS = [
    (
        "tl_hf_qwen05_h100",
        "1428625779112.345",
        "cudaDeviceSynchronize 2167 us under torch/profiler/profiler.py(811) step > _transit_action > "
        "stop_trace > torch/autograd/profiler.py(363) __exit__ > torch/cuda synchronize",
        ["1428625731997.011"],  # the moca harness' own torch.cuda.synchronize() (profile.py(34))
    ),
    (
        "tm_vllm_h100",
        "3676600192679.372",
        "cudaDeviceSynchronize 2636 us under torch/profiler/profiler.py(806) stop > _transit_action > "
        "stop_trace > torch/autograd/profiler.py(363) __exit__",
        [],
    ),
    (
        "tl_resnet_ckpt_ddp_mi300x",
        "3743411271613.755",
        "hipDeviceSynchronize 37.9 ms under train_ddp.py(161) ddp_worker > torch/profiler/profiler.py(811) "
        "step > stop_trace > torch/autograd/profiler.py(363) __exit__",
        [],
    ),
    (
        "hta_mi250_minitoy_rocm",
        "4203669612702.707",
        "hipDeviceSynchronize with no Python stack in the trace and no op around it, after ProfilerStep#2 "
        "ended (4203669612561.8), nothing recorded after it",
        [],
    ),
    (
        "hta_a100_param_alexnet",
        "1695835585939612",
        "cudaDeviceSynchronize with no stack and no step markers, after every annotation ended "
        "([param|cuda] ends 1695835585939544), nothing recorded after it",
        # The PARAM harness' four torch.cuda.synchronize() calls inside [param|cuda].
        ["1695835573040618", "1695835585783845", "1695835585827832", "1695835585862981"],
    ),
]


def _raw_event(path: Path, ts: str) -> dict:
    with gzip.open(path, "rt") as handle:
        events = json.load(handle, parse_float=Decimal)["traceEvents"]
    (event,) = [
        e for e in events if e.get("ph") == "X" and str(e.get("ts")) == ts and "ynchronize" in e["name"]
    ]
    return event


@pytest.mark.parametrize(("name", "stop_ts", "why", "user_ts"), REAL_STOPS, ids=[r[0] for r in REAL_STOPS])
def test_profiler_stop_sync_in_real_traces(
    shared_dir: Path, name: str, stop_ts: str, why: str, user_ts: list[str]
) -> None:
    path = shared_dir / "data" / "real_traces" / f"{name}.json.gz"
    stop = _raw_event(path, stop_ts)
    (rank,) = analyze_ranks([path])
    origin_us = Decimal(rank.tables.origin_ns) / 1000

    def listed(event: dict) -> bool:
        start_ns = int((Decimal(event["ts"]) - origin_us) * 1000) + rank.tables.origin_ns
        end_ns = start_ns + int(Decimal(event["dur"]) * 1000)
        reads = rank.reads
        return bool(((reads["start_ns"] <= end_ns) & (reads["end_ns"] >= start_ns)).any())

    assert not listed(stop), f"listed as a read: {why}"
    for ts in user_ts:
        assert listed(_raw_event(path, ts)), f"the user's synchronize at {ts} must stay a read"
