"""Real traces and records the fuzzer starts from.

Records: a RunRecord measured on CPU by `bubblescope run` (tests/data/hostile/cpu_debug_run).
Traces: the H200 probe trace in ../shared/data (recorded on an H200 by this project's probe script;
see /work/shared/notes) when present, else tests/data/h200_recorded (a real H200 recording kept in the
repo, provenance in its manifest.json), plus tests/data/gate/base_cpu.trace.json.gz (a real CPU
torch.profiler trace). The fast profile cuts a trace to its first steps (the events are unchanged, only
fewer), so one analysis takes a fraction of a second on a 2-core box.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
# ../shared beside the checkout; BUBBLESCOPE_SHARED_DIR points elsewhere (e.g. from a git worktree).
SHARED_DIR = Path(os.environ.get("BUBBLESCOPE_SHARED_DIR", REPO_ROOT.parent / "shared"))
SHARED_H200_TRACE = SHARED_DIR / "data" / "h200_probe_trace.json.gz"
REPO_H200_TRACE = REPO_ROOT / "tests" / "data" / "h200_recorded" / "trace.json.gz"
CPU_TRACE = REPO_ROOT / "tests" / "data" / "gate" / "base_cpu.trace.json.gz"
GATE_DIR = REPO_ROOT / "tests" / "data" / "gate"
# Synthetic (tests/data/gate/build_fixtures.py): a known shape for the validator's unit tests.
BASELINE_RECORD = GATE_DIR / "baseline.json"
# Measured (tests/data/hostile/cpu_debug_run/PROVENANCE.md): what the fuzzer damages.
REAL_RECORD = REPO_ROOT / "tests" / "data" / "hostile" / "cpu_debug_run" / "record.json"


def read_json(path: Path) -> Any:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)


def h200_trace_path() -> Path:
    """The shared H200 probe trace when this checkout sits beside ../shared, else the repo's recording."""
    return SHARED_H200_TRACE if SHARED_H200_TRACE.is_file() else REPO_H200_TRACE


def _step_ends_us(events: list[dict[str, Any]]) -> list[float]:
    ends = []
    for event in events:
        if event.get("cat") == "user_annotation" and event.get("ph") == "X":
            ends.append(float(event["ts"]) + float(event.get("dur", 0)))
    return sorted(ends)


def cut_to_steps(trace: dict[str, Any], steps: int) -> dict[str, Any]:
    """The trace with only the events that start before the end of its `steps`-th step annotation
    (metadata events kept). Whole trace when it has fewer step annotations."""
    events = trace["traceEvents"]
    ends = _step_ends_us(events)
    if len(ends) <= steps:
        return trace
    cutoff_us = ends[steps - 1]
    kept = [e for e in events if e.get("ph") == "M" or float(e.get("ts", 0)) <= cutoff_us]
    return {**trace, "traceEvents": kept}


def seed_traces(fast: bool) -> dict[str, dict[str, Any]]:
    """Name -> trace dict. Fast: the H200 trace cut to 2 steps and the CPU trace cut to 2 steps."""
    h200 = read_json(h200_trace_path())
    cpu = read_json(CPU_TRACE)
    if fast:
        return {"h200_2steps": cut_to_steps(h200, 2), "cpu_2steps": cut_to_steps(cpu, 2)}
    return {"h200": h200, "h200_2steps": cut_to_steps(h200, 2), "cpu": cpu}


def seed_record() -> dict[str, Any]:
    """The synthetic gate baseline (validator unit tests)."""
    return read_json(BASELINE_RECORD)


def real_record() -> dict[str, Any]:
    """The measured CPU RunRecord (the fuzzer's seed)."""
    return read_json(REAL_RECORD)
