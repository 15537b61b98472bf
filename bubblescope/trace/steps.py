"""Cut a trace into decode steps.

Order of preference: `bubblescope.step` annotations, then `ProfilerStep#N` (any N: under
`torch.profiler.schedule()` the recorded steps start at wait + warmup), then `--step-marker REGEX`,
else the whole trace as one step (with a warning). Step windows are host time ranges; GPU work they
launched may run past their end.

`--step-marker` is matched (fully) against each marker kind in this order; the first kind with a
match wins, and `step_source` names it:
  regex:RE           host ranges: `record_function` / user annotations, ATen ops, NVTX ranges
                     written as host annotations (the usual choice: host time, like ProfilerStep)
  frame:RE           Python frames, by function name (`execute_model`) or by the whole frame name
                     (`gpu_model_runner.py(1002): execute_model`): engines that mark steps only by
                     a function, as vLLM V1 does with `execute_model`
  gpu_annotation:RE  GPU-side user annotations (`gpu_user_annotation`), used only when no host range
                     matches; their windows are GPU time, so a step's launches may fall just before
                     its window: prefer a host marker when the trace has one
A marker nested inside a kept marker (a frame inside a same-named frame, the same range written twice)
is dropped silently; markers that overlap partly are dropped with a warning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bubblescope.errors import BubblescopeError
from bubblescope.trace.tables import TraceTables, category_mask

BUBBLESCOPE_STEP = "bubblescope.step"
_PROFILER_STEP = re.compile(r"ProfilerStep#\d+")
_FRAME_FUNCTION = re.compile(r"^.*?\(\d+\): (?P<func>.*)$")
# Launch time of an op queued before the trace began: before every step window (step windows can open
# before the trace's first GPU op or call). Only compared and searched, never subtracted from.
LAUNCHED_BEFORE_TRACE_NS = np.iinfo(np.int64).min


@dataclass
class StepWindows:
    """Step windows of one rank.

    Attributes:
        source: "bubblescope.step" | "ProfilerStep" | "regex:<RE>" | "frame:<RE>" |
            "gpu_annotation:<RE>" | "whole-trace".
        names: name of each step's marker.
        start_ns, end_ns: [n_steps] absolute ns, sorted by start, non-overlapping.
        warnings: what the user should know (no markers found, overlapping markers dropped).
    """

    source: str
    names: list[str]
    start_ns: np.ndarray
    end_ns: np.ndarray
    warnings: list[str]

    def __len__(self) -> int:
        return len(self.start_ns)


def find_steps(tables: TraceTables, step_marker: str | None = None) -> StepWindows:
    """Step windows of `tables` (see the module docstring for the order of preference).

    Args:
        tables: one rank's tables.
        step_marker: regex matched (fully) against host op/annotation names; used when neither
            `bubblescope.step` nor `ProfilerStep#N` is present. Default None.
    """
    names = tables.ops["name"]
    candidates: list[tuple[str, pd.DataFrame, np.ndarray]] = [
        (BUBBLESCOPE_STEP, tables.ops, category_mask(names, lambda n: n.startswith(BUBBLESCOPE_STEP))),
        ("ProfilerStep", tables.ops, category_mask(names, lambda n: _PROFILER_STEP.fullmatch(n) is not None)),
    ]
    if step_marker:
        try:
            pattern = re.compile(step_marker)
        except re.error as exc:
            raise BubblescopeError(f"--step-marker {step_marker!r} is not a valid regex ({exc})") from None
        candidates += [
            (
                f"regex:{step_marker}",
                tables.ops,
                category_mask(names, lambda n: pattern.fullmatch(n) is not None),
            ),
            (
                f"frame:{step_marker}",
                tables.frames,
                category_mask(tables.frames["name"], _frame_matcher(pattern)),
            ),
            (
                f"gpu_annotation:{step_marker}",
                tables.gpu_annotations,
                category_mask(tables.gpu_annotations["name"], lambda n: pattern.fullmatch(n) is not None),
            ),
        ]
    for source, table, mask in candidates:
        if mask.any():
            return _windows(table[mask], source)
    warning = "no step markers found (bubblescope.step, ProfilerStep#N"
    warning += (
        f", or {step_marker!r} as a host range, Python frame or GPU annotation)"
        if step_marker
        else ("; pass --step-marker REGEX)")
    )
    return _whole_trace(tables, warning + "; the whole trace is one step")


def _frame_matcher(pattern: re.Pattern[str]):
    """Frame name -> True when the pattern fully matches its function name or the whole name."""

    def matches(name: str) -> bool:
        if pattern.fullmatch(name):
            return True
        found = _FRAME_FUNCTION.match(name)
        return bool(found and pattern.fullmatch(found["func"]))

    return matches


def _windows(marks: pd.DataFrame, source: str) -> StepWindows:
    # Longest first among equal starts, so that an enclosing marker is seen before what it encloses.
    order = np.lexsort((-marks["end_ns"].to_numpy(), marks["start_ns"].to_numpy()))
    starts = marks["start_ns"].to_numpy()[order]
    ends = marks["end_ns"].to_numpy()[order]
    names = marks["name"].astype(str).to_numpy()[order].tolist()
    # Nested or repeated markers (a marker on two threads, a step inside a step) would double count:
    # keep a marker only if it starts after the previous kept one ended.
    keep = np.zeros(len(starts), dtype=bool)
    last_end = np.iinfo(np.int64).min
    partial = 0
    for i, (start, end) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        if start >= last_end:
            keep[i] = True
            last_end = end
        elif end > last_end:
            partial += 1
    warnings = []
    if partial:
        warnings.append(f"{partial} overlapping step markers ignored")
    return StepWindows(
        source=source,
        names=[n for n, k in zip(names, keep, strict=True) if k],
        start_ns=starts[keep],
        end_ns=ends[keep],
        warnings=warnings,
    )


def _whole_trace(tables: TraceTables, warning: str) -> StepWindows:
    # GPU activity bounds the window when there is any: profiler start-up before the first launch
    # is not part of the workload and would read as idle.
    if len(tables.gpu):
        start = int(min(tables.gpu["start_ns"].min(), _first_launch(tables)))
        end = int(tables.gpu["end_ns"].max())
    else:
        start, end = tables.origin_ns, tables.end_ns
    return StepWindows(
        source="whole-trace",
        names=["whole-trace"],
        start_ns=np.array([start], np.int64),
        end_ns=np.array([end], np.int64),
        warnings=[warning],
    )


def _first_launch(tables: TraceTables) -> int:
    corr = tables.gpu["correlation"].to_numpy()
    hits = tables.runtime["correlation"].isin(corr[corr >= 0]).to_numpy()
    starts = tables.runtime["start_ns"].to_numpy()[hits]
    return int(starts.min()) if len(starts) else int(tables.gpu["start_ns"].min())


def step_index_of(times_ns: np.ndarray, steps: StepWindows) -> np.ndarray:
    """Index of the step window containing each time, -1 when outside every window. [n] int64."""
    idx = np.searchsorted(steps.start_ns, times_ns, side="right") - 1
    safe = np.maximum(idx, 0)
    inside = (idx >= 0) & (times_ns < steps.end_ns[safe]) if len(steps) else np.zeros(len(times_ns), bool)
    return np.where(inside, idx, -1)


def launch_times_ns(gpu: pd.DataFrame) -> np.ndarray:
    """[n_ops] int64: when each correlated GPU op was launched (its launching call's start; the op's
    own start when no call matched). A graph replay's kernels all take their `cudaGraphLaunch`'s.

    Ops launched before the trace began (`before_trace`, from `correlate_launches`) take
    LAUNCHED_BEFORE_TRACE_NS: they belong to no step window, and count as launched before the first
    (so the first step's GPU interval opens when they are done). Placed by their own start, a replay
    queued before tracing, still running while the host sat in the first profiled windows, was charged
    to those steps (102/66/52/2 of 253 kernels in the issue-17 round-2 e256 H200 base run). Every
    per-step figure (kernels, GPU interval, busy and idle, launch path) takes its step from here.
    """
    launch = gpu["launch_start_ns"].to_numpy()
    times = np.where(launch >= 0, launch, gpu["start_ns"].to_numpy()).astype(np.int64)
    times[gpu["before_trace"].to_numpy()] = LAUNCHED_BEFORE_TRACE_NS
    return times


def launch_steps_of(gpu: pd.DataFrame, steps: StepWindows) -> np.ndarray:
    """[n_ops] int64: the step whose host window launched each GPU op (`correlate_launches` table),
    -1 for none (launched between windows, or before the trace began). The one step assignment that
    kernels per step, the kernel table, the timeline and the bandwidth block's launch path share."""
    return step_index_of(launch_times_ns(gpu), steps)


def gpu_step_bounds(
    launch_ns: np.ndarray, end_ns: np.ndarray, steps: StepWindows, not_before_ns: int | None = None
) -> np.ndarray:
    """Per-step GPU interval bounds of one device: [B_0, E_0, ..., E_last]. [n_steps + 1] int64.

    Step i's GPU interval is [bounds[i], bounds[i + 1]). E_i is the end of the last op launched before
    step i's host window ended (ops launched in steps <= i, or between windows before it; cumulative
    max, so under host run-ahead step k's kernels, running during later host windows, still count for
    k). B_0 = max(host start of step 0, end of the ops launched before step 0, `not_before_ns`).
    Empty steps get an empty interval.

        host   |--step 0--|--step 1--|--step 2--|
        GPU         |==k0==k0==|==k1==k1==|==k2==|
                    B_0        E_0        E_1    E_2

    Args:
        launch_ns: [n_ops] start of each op's launching call (its own start when unmatched).
        end_ns: [n_ops] end of each op.
        steps: this rank's step windows (host time).
        not_before_ns: no step's interval starts earlier (the start of a first op queued before
            tracing began: the idle before it belongs to no step). Default None.
    """
    n_steps = len(steps)
    if not n_steps:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(launch_ns, kind="stable")
    # Latest end among the first j ops by launch time: run_end[j]; run_end[0] = "nothing launched".
    run_end = np.concatenate(([np.iinfo(np.int64).min], np.maximum.accumulate(end_ns[order])))
    # Cuts: host start of step 0, then each window's end; ops launched strictly before each cut count.
    cuts = np.concatenate(([steps.start_ns[0]], steps.end_ns)).astype(np.int64)
    last_end = run_end[np.searchsorted(launch_ns[order], cuts, side="left")]
    first_ns = max(int(steps.start_ns[0]), int(last_end[0]))
    if not_before_ns is not None:
        first_ns = max(first_ns, int(not_before_ns))
    return np.maximum(last_end, first_ns).astype(np.int64)


def gpu_step_index_of(times_ns: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Step whose GPU interval [bounds[i], bounds[i + 1]) holds each time, -1 outside. [n] int64."""
    if len(bounds) < 2:
        return np.full(len(times_ns), -1, dtype=np.int64)
    idx = np.searchsorted(bounds, times_ns, side="right") - 1
    return np.where((idx >= 0) & (idx < len(bounds) - 1), idx, -1).astype(np.int64)
