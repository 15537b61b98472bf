"""Merge the read tap's stacks into a trace's analysis: each blocking read named at its exact line.

The tap wraps every intercepted call in a `bubblescope.read#<id>` annotation. On CUDA, a blocking read
the analysis found (a runtime call that waited) is tied to the innermost such annotation enclosing it
on the same thread, and takes that call's stack; a read with no enclosing annotation (made inside C++
or a compiled graph) keeps the trace's `def`-line site and says so (`line: "def"`). On CPU nothing
blocks, so the annotations themselves are the reads: each is a call that reads the device when the
same code runs on a GPU; they are counted per step, with no blocked time or bubble.

Each syncs[] row then carries `site` and `line_exact` (both the innermost frame outside torch, libraries
and bubblescope: the user's line; `run`/`ablate` keep `site` as the trace's, see `profiling.run_sites`),
`read_at` (the innermost frame outside torch and bubblescope, which may be in a library
such as transformers), `stack` (the caller chain, innermost first) and `line` ("exact" or "def").
No torch import.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd

from bubblescope.analysis.traces import analysis_dict, analyze_rank, analyze_ranks
from bubblescope.detect.host_syncs import HINTS
from bubblescope.trace.markers import OWN_SYNC_MARKER, READ_MARKER_PREFIX
from bubblescope.trace.steps import BUBBLESCOPE_STEP, step_index_of

CHAIN_FRAMES = 12
CPU_WARNING = (
    "CPU run: blocking reads are the calls that read a device value when the same code runs on a GPU, "
    "counted per step at their exact lines; blocked time and GPU bubbles are not measured on CPU"
)
COVERAGE = (
    "eager Python calls of Tensor.item/tolist/cpu/numpy/to(cpu)/copy_/__bool__/__int__/__float__/"
    "__index__/__format__, nonzero, masked_select, unique, where(cond), repeat_interleave without "
    "output_size, equal, allclose, torch.cuda.synchronize/empty_cache, Stream/Event.synchronize; reads "
    "inside C++ ops or compiled graphs keep the trace's def-line site"
)


def describe_call(call: dict[str, Any]) -> dict[str, Any]:
    """Site, read_at and caller chain of one recorded call.

    Args:
        call: {"read_id", "op", "kind", "step", "frames": [{"file", "line", "function", "class"}]}
            innermost frame first (`bubblescope.profiling.outputs.call_dicts`).
    Returns:
        {"site", "read_at", "stack", "display"}; site/read_at are `file.py(LINE): function`.
    """
    from bubblescope.capture.user_frames import short_path

    frames = call["frames"]
    user = next((f for f in frames if f["class"] == "user"), None)
    outside_torch = next((f for f in frames if f["class"] not in ("torch", "compiler", "bubblescope")), None)
    site = _frame_text(user, os.path.basename(user["file"])) if user else "(no user frame)"
    read_at = _frame_text(outside_torch, short_path(outside_torch["file"])) if outside_torch else site
    chain = [_frame_text(f, short_path(f["file"]), qualified=True) for f in _caller_chain(frames)]
    display = site if read_at == site else f"{site} → {read_at}"
    return {"site": site, "read_at": read_at, "stack": chain, "display": display}


def _caller_chain(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """User and library frames, innermost first, up to where plumbing starts: past the first user
    frame, a standard-library or bubblescope frame (runpy, the CLI) ends the chain."""
    chain: list[dict[str, Any]] = []
    seen_user = False
    for frame in frames:
        if seen_user and frame["class"] in ("stdlib", "bubblescope"):
            break
        if frame["class"] in ("user", "library"):
            chain.append(frame)
            seen_user = seen_user or frame["class"] == "user"
    return chain[:CHAIN_FRAMES]


def _frame_text(frame: dict[str, Any], path: str, qualified: bool = False) -> str:
    name = frame.get("qualname") if qualified and frame.get("qualname") else frame["function"]
    return f"{path}({frame['line']}): {name}"


def analyze_with_read_sites(
    trace_path: str | os.PathLike[str],
    calls: list[dict[str, Any]],
    *,
    cuda_run: bool,
    step_marker: str | None = None,
    drop_last_step: bool = False,
) -> dict[str, Any]:
    """`bubblescope.analysis/1` of one trace, with the tap's exact lines merged in (module docstring).

    Args:
        trace_path: the profiled trace.
        calls: the tap's recorded calls (see `describe_call`).
        cuda_run: the workload ran on CUDA (reads come from the trace's blocking calls).
        step_marker: regex for step annotations when there is no `bubblescope.step`. Default None.
        drop_last_step: leave the last `bubblescope.step` out (it ran until the session closed, so it
            also holds what followed the loop). Default False.
    """
    ranks = analyze_ranks([trace_path], step_marker=step_marker)
    if drop_last_step:
        ranks = [_without_last_step(ranks[0], step_marker)]
    rank = ranks[0]
    described = {int(c["read_id"]): {**describe_call(c), "op": c["op"], "kind": c["kind"]} for c in calls}
    markers = read_markers(rank.tables.ops)
    own = _named_ranges(rank.tables.ops, OWN_SYNC_MARKER)
    stats = {"source": "bubblescope read tap", "tapped_calls": len(calls), "covered": COVERAGE}
    if cuda_run:
        stats.update(_merge_trace_reads(rank, markers, own, described))
    analysis = analysis_dict(ranks)
    if not cuda_run:
        _add_cpu_reads(analysis, rank, markers, described)
        analysis["warnings"].append(CPU_WARNING)
        stats["matched_reads"] = int(len(markers))
    _annotate_syncs(analysis, described)
    analysis["read_sites"] = stats
    return analysis


def _without_last_step(rank: Any, step_marker: str | None) -> Any:
    """Re-run the rank's analysis without its last `bubblescope.step` annotation (if it has two or more)."""
    ops = rank.tables.ops
    is_step = (ops["name"].astype(str) == BUBBLESCOPE_STEP).to_numpy()
    if is_step.sum() < 2:
        return rank
    last = int(np.flatnonzero(is_step)[np.argmax(ops["start_ns"].to_numpy()[is_step])])
    rank.tables.ops = ops.drop(index=ops.index[last]).reset_index(drop=True)
    analysed = analyze_rank(rank.tables, step_marker)
    analysed.warnings.append(
        f"{rank.tables.path}: the last step ran until the session closed (it also holds what followed "
        "the loop) and is left out; `with prof.step():` marks the end of each step exactly"
    )
    return analysed


def read_markers(ops: pd.DataFrame) -> pd.DataFrame:
    """`bubblescope.read#<id>` annotations: read_id, tid (str), start_ns, end_ns."""
    names = ops["name"].astype(str)
    marks = ops[names.str.startswith(READ_MARKER_PREFIX).to_numpy()]
    return pd.DataFrame(
        {
            "read_id": marks["name"].astype(str).str.slice(len(READ_MARKER_PREFIX)).astype(np.int64),
            "tid": marks["tid"].astype(str).to_numpy(),
            "start_ns": marks["start_ns"].to_numpy().astype(np.int64),
            "end_ns": marks["end_ns"].to_numpy().astype(np.int64),
        }
    ).sort_values("start_ns", kind="stable")


def _named_ranges(ops: pd.DataFrame, name: str) -> pd.DataFrame:
    """Annotations called `name`, as read_id (-1), tid (str), start_ns, end_ns."""
    marks = ops[(ops["name"].astype(str) == name).to_numpy()]
    return pd.DataFrame(
        {
            "read_id": np.full(len(marks), -1, dtype=np.int64),
            "tid": marks["tid"].astype(str).to_numpy(),
            "start_ns": marks["start_ns"].to_numpy().astype(np.int64),
            "end_ns": marks["end_ns"].to_numpy().astype(np.int64),
        }
    )


def _merge_trace_reads(
    rank: Any, markers: pd.DataFrame, own: pd.DataFrame, described: dict[int, dict]
) -> dict[str, Any]:
    """Rename each trace read's site to its call's display site (in place); drop bubblescope's own
    synchronizes (profiler start/stop); counts and the tapped calls that never blocked, for the stats."""
    reads = rank.reads.copy()
    sites = reads["site"].astype(str).tolist()
    keep = np.ones(len(reads), dtype=bool)
    matched = 0
    by_tid = {tid: group for tid, group in markers.groupby("tid", sort=False)}
    own_by_tid = {tid: group for tid, group in own.groupby("tid", sort=False)}
    blocked_ids: set[int] = set()
    # The profiler's own stop synchronises after bubblescope's last marked drain: nothing of the loop
    # runs between them, so an unmatched read from there on is the session's, not the loop's.
    stop_ns = int(own["start_ns"].max()) if len(own) else None
    for row, (tid, start, end) in enumerate(
        zip(reads["tid"].astype(str), reads["start_ns"].tolist(), reads["end_ns"].tolist(), strict=True)
    ):
        read_id = enclosing_marker(by_tid.get(tid), int(start), int(end))
        info = described.get(read_id) if read_id is not None else None
        if info is not None:
            sites[row] = info["display"]
            matched += 1
            blocked_ids.add(int(read_id))
        elif enclosing_marker(own_by_tid.get(tid), int(start), int(end)) is not None or (
            stop_ns is not None and int(start) >= stop_ns
        ):
            keep[row] = False
    reads["site"] = sites
    rank.reads = reads[keep].reset_index(drop=True)
    return {
        "trace_reads": int(keep.sum()),
        "matched_reads": matched,
        "unmatched_trace_reads": int(keep.sum()) - matched,
        "not_blocking": _not_blocking(markers, blocked_ids, described),
    }


def _not_blocking(markers: pd.DataFrame, blocked_ids: set[int], described: dict[int, dict]) -> list[dict]:
    """Recorded calls that could read the device but made no blocking call in the trace (a non_blocking
    copy, an empty_cache with nothing to free): where they are, so a user does not hunt them."""
    rows: dict[tuple[str, str], dict] = {}
    for read_id in markers["read_id"].tolist():
        info = described.get(int(read_id))
        if info is None or int(read_id) in blocked_ids:
            continue
        row = rows.setdefault(
            (info["display"], info["op"]),
            {"site": info["site"], "read_at": info["read_at"], "op": info["op"], "count": 0},
        )
        row["count"] += 1
    return sorted(rows.values(), key=lambda r: -r["count"])


def enclosing_marker(group: pd.DataFrame | None, start_ns: int, end_ns: int) -> int | None:
    if group is None:
        return None
    inside = group[(group["start_ns"].to_numpy() <= start_ns) & (group["end_ns"].to_numpy() >= end_ns)]
    if not len(inside):
        return None
    return int(inside["read_id"].iloc[int(np.argmax(inside["start_ns"].to_numpy()))])


def _add_cpu_reads(analysis: dict, rank: Any, markers: pd.DataFrame, described: dict[int, dict]) -> None:
    """On CPU the annotations are the reads: syncs rows, per-step counts and the summary from them."""
    steps = step_index_of(markers["start_ns"].to_numpy(), rank.steps)
    n_steps = max(len(analysis["steps"]), 1)
    per_step = np.bincount(steps + 1, minlength=len(analysis["steps"]) + 1)[1:]
    for entry, count in zip(analysis["steps"], per_step.tolist(), strict=True):
        entry["blocking_reads"] = int(count)
    analysis["summary"]["blocking_reads_per_step"] = round(float(per_step.sum()) / n_steps, 4)
    rows: dict[tuple[str, str], dict] = {}
    for read_id, step in zip(markers["read_id"].tolist(), steps.tolist(), strict=True):
        info = described.get(int(read_id))
        if info is None:
            continue
        row = rows.setdefault(
            (info["display"], info["op"]),
            {
                "site": info["display"],
                "op": info["op"],
                "kind": info["kind"],
                "api": "none (CPU run)",
                "inner_op": "",
                "count": 0,
                "in_steps": 0,
                # A CPU run blocks on nothing: not measured, null (bubblescope.analysis.not_measured).
                "blocked_ns": None,
                "bubble_ns": None,
                "wait_ns": None,
                "hint": HINTS.get(info["kind"], HINTS["other"]),
            },
        )
        row["count"] += 1
        row["in_steps"] += int(step >= 0)
    syncs = []
    for row in sorted(rows.values(), key=lambda r: -r["count"]):
        row["per_step"] = round(row.pop("in_steps") / n_steps, 4)
        syncs.append(row)
    analysis["syncs"] = syncs


def _annotate_syncs(analysis: dict, described: dict[int, dict]) -> None:
    """Split each row's display site back into site / read_at, and add the caller chain."""
    by_display = {}
    for info in described.values():
        by_display.setdefault(info["display"], info)
    for row in analysis.get("syncs") or []:
        info = by_display.get(row["site"])
        if info is None:
            row.update({"line_exact": None, "read_at": None, "stack": None, "line": "def"})
            continue
        row.update(
            {
                "site": info["site"],
                "line_exact": info["site"],
                "read_at": info["read_at"],
                "stack": info["stack"],
                "line": "exact",
            }
        )
