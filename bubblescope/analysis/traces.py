"""`analyze_traces`: trace files in, the `bubblescope.analysis/1` dict (docs/SCHEMAS.md) out.

Pipeline per file (one file = one rank): load -> tables -> correlate launches -> steps -> detectors
(plausibility, host-blocking reads, idle gaps, per-stream HTA view) -> JSON-ready dict. Never imports
torch.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from bubblescope.analysis.gap_blame import gap_blamer, gap_blames
from bubblescope.detect.idle_gaps import (
    GAP_CLASSES,
    device_busy_intervals,
    device_sync_calls,
    stream_wait_calls,
    unlaunched_lead_ns,
)
from bubblescope.detect.registry import detector
from bubblescope.errors import TraceError
from bubblescope.ranks.analysis import RankAnalysis
from bubblescope.ranks.reduce import (
    DEFINITIONS,
    FIRST_STEP_FACTOR,
    OUTLIER_STEP_FACTOR,
    SCHEMA,
    reduce_results,
    sync_entries,
    top_gap_entries,
    typical_steps,
)
from bubblescope.ranks.reduce import summary as _summary  # noqa: F401 - the name tests use
from bubblescope.ranks.results import STEP_CLASSES, TOP_GAPS, read_table, summarize_rank
from bubblescope.trace.correlate import correlate_launches, launch_counts
from bubblescope.trace.load import expand_trace_paths, gc_paused, stream_trace
from bubblescope.trace.steps import StepWindows, find_steps, gpu_step_bounds, launch_times_ns
from bubblescope.trace.tables import TraceTables, build_tables_streamed

__all__ = [
    "DEFINITIONS",
    "FIRST_STEP_FACTOR",
    "OUTLIER_STEP_FACTOR",
    "SCHEMA",
    "STEP_CLASSES",
    "TOP_GAPS",
    "RankAnalysis",
    "analysis_dict",
    "analyze_file",
    "analyze_rank",
    "analyze_ranks",
    "analyze_traces",
    "gap_blamer",
    "gap_blames",
    "read_table",
    "typical_steps",
]


def analyze_traces(
    paths: list[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    step_marker: str | None = None,
    max_decompressed_bytes: int | None = None,
) -> dict:
    """Analyse one trace per rank and return the `bubblescope.analysis/1` dict.

    Args:
        paths: trace files (`.json` / `.json.gz`) or folders of them; one file per rank.
        step_marker: regex for step annotations when neither `bubblescope.step` nor
            `ProfilerStep#N` is present (e.g. `decode_step_.*`). Default None.
        max_decompressed_bytes: refuse a file whose JSON text is larger. Default None: the cap set by
            `trace_size_cap` (the CLI's --max-decompressed-mb), else 512 MiB.

    Raises:
        TraceError: a file is missing, malformed, truncated, too large or not a trace.
    """
    return analysis_dict(
        analyze_ranks(paths, step_marker=step_marker, max_decompressed_bytes=max_decompressed_bytes)
    )


def analyze_ranks(
    paths: list[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    step_marker: str | None = None,
    max_decompressed_bytes: int | None = None,
) -> list[RankAnalysis]:
    """Per-rank analyses (tables included), for callers that render more than the dict."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = expand_trace_paths(list(paths))
    results = [
        analyze_file(path, index, step_marker, max_decompressed_bytes) for index, path in enumerate(files)
    ]
    # What loading skipped (files of a folder) comes first.
    results[0].warnings[:0] = files.skipped
    return results


def analyze_file(
    path: os.PathLike[str],
    index: int,
    step_marker: str | None = None,
    max_decompressed_bytes: int | None = None,
) -> RankAnalysis:
    """Load and analyse one trace file; `index` is its rank when the trace names none."""
    streamed = stream_trace(path, max_decompressed_bytes)
    with gc_paused():
        tables = build_tables_streamed(streamed.chunks(), lambda s=streamed: s.meta, path, rank=index)
    del streamed
    # A damaged ts or dur (say ts -9e15 and +9e15 µs, or ts + dur past 9.2e15 µs, which wraps in int64
    # ns) would make the `end - start` and `start - origin` below overflow (numpy warnings, wrong
    # numbers). 2**62 ns is 146 years.
    tabled = (tables.ops, tables.frames, tables.runtime, tables.gpu, tables.waits, tables.gpu_annotations)
    wrapped = any(bool((t["end_ns"] < t["start_ns"]).any()) for t in tabled if len(t))
    if wrapped or tables.end_ns - tables.origin_ns > 2**62:
        raise TraceError(f"{path}: events span more than 146 years; a timestamp is damaged")
    rank = analyze_rank(tables, step_marker)
    # What loading assumed for this file comes before what the analysis found.
    rank.warnings[:0] = [f"{path}: {w}" for w in tables.warnings]
    return rank


def analyze_rank(tables: TraceTables, step_marker: str | None = None) -> RankAnalysis:
    """Run every detector on one rank's tables."""
    gpu = correlate_launches(tables.gpu, tables.runtime)
    launches = launch_counts(tables.runtime)
    steps = find_steps(tables, step_marker)
    problems = detector("plausibility").run(gpu, launches)
    reads = detector("host_syncs").run(tables, gpu, steps)
    waits = stream_wait_calls(tables.runtime, tables.waits)
    device_syncs = device_sync_calls(tables.runtime)
    devices, gap_parts, bounds, lead_parts = [], [], {}, []
    spent = pd.Series(dtype=np.int64)
    for device, ops in gpu.groupby("device", sort=True):
        ops = ops.reset_index(drop=True)
        span = (
            int(min(ops["start_ns"].iloc[0], steps.start_ns.min())),
            int(max(ops["end_ns"].max(), steps.end_ns.max())),
        )
        bounds[int(device)] = gpu_step_bounds(
            launch_times_ns(ops), ops["end_ns"].to_numpy(), steps, unlaunched_lead_ns(ops)
        )
        gaps, leads = detector("idle_gaps").run(
            ops, reads, steps, int(device), span, bounds[int(device)], waits, spent, device_syncs
        )
        lead_parts.append(leads)
        # With several devices per rank, a read's sync over all of them stays within its largest lead.
        sync_rows = gaps[(gaps["class"] == "sync").to_numpy()]
        spent = spent.add(sync_rows.groupby("read_id")["dur_ns"].sum(), fill_value=0)
        gaps["graph"] = ops["graph"].to_numpy()[np.maximum(gaps["next_row"].to_numpy(), 0)] & (
            gaps["next_row"].to_numpy() >= 0
        )
        # The thread that launched the gap's closing op is the one that was late: blame looks there.
        next_tid = ops["launch_tid"].astype(str).to_numpy()[np.maximum(gaps["next_row"].to_numpy(), 0)]
        gaps["next_tid"] = np.where(gaps["next_row"].to_numpy() >= 0, next_tid, "").astype(object)
        gap_parts.append(gaps)
        devices.append(_device_entry(tables, ops, gaps, span, int(device)))
    gaps = pd.concat(gap_parts, ignore_index=True) if gap_parts else _no_gaps()
    warnings = [f"{tables.path}: {w}" for w in steps.warnings + problems + _outlier_steps(steps)]
    return RankAnalysis(
        tables=tables,
        gpu=gpu,
        steps=steps,
        reads=reads,
        gaps=gaps,
        devices=devices,
        launches=launches,
        warnings=warnings,
        gpu_measured=not problems and len(gpu) > 0,
        host_tid=_host_tid(tables),
        gpu_bounds=bounds,
        lost_lead_ns=pd.concat(lead_parts).groupby(level=0).max()
        if lead_parts
        else pd.Series(dtype=np.int64),
    )


def _outlier_steps(steps: StepWindows) -> list[str]:
    """Warn about steps far longer than the median: usually warm-up (lazy CUDA/cuBLAS init, Triton
    compile) that skews per-step means."""
    if len(steps) < 3:
        return []
    durations = steps.end_ns - steps.start_ns
    median_ns = float(np.median(durations))
    slow = np.flatnonzero(durations > OUTLIER_STEP_FACTOR * median_ns)
    return [
        f"step {i} took {durations[i] / median_ns:.0f}x the median step (warm-up?); "
        "per-step times in the summary leave it out"
        for i in slow.tolist()
    ]


def _no_gaps() -> pd.DataFrame:
    ints = [
        "device",
        "start_ns",
        "end_ns",
        "dur_ns",
        "step",
        "read_id",
        "next_stream",
        "next_row",
        "wait_call_ns",
        "prev_stream",
    ]
    frame = pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in ints})
    return frame.assign(
        **{
            "class": pd.Series(dtype=object),
            "next_op": pd.Series(dtype=object),
            "wait_api": pd.Series(dtype=object),
            "evidence": pd.Series(dtype=object),
            "graph": pd.Series(dtype=bool),
            "next_tid": pd.Series(dtype=object),
        }
    )


def _device_entry(
    tables: TraceTables, ops: pd.DataFrame, gaps: pd.DataFrame, span: tuple[int, int], device: int
) -> dict:
    merged_starts, merged_ends = device_busy_intervals(ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy())
    busy_ns = int((merged_ends - merged_starts).sum())
    by_class = gaps.groupby("class")["dur_ns"].sum()
    kinds = ops["kind"]
    return {
        "device": device,
        "rank": tables.rank,
        "span_ns": span[1] - span[0],
        "busy_ns": busy_ns,
        "idle_ns": span[1] - span[0] - busy_ns,
        "idle_by_class_ns": {c: int(by_class.get(c, 0)) for c in GAP_CLASSES},
        "kernel_count": int((kinds == "kernel").sum()),
        "memcpy_count": int((kinds == "memcpy").sum()),
        "memset_count": int((kinds == "memset").sum()),
        "graph_launches": int(ops.loc[ops["graph"].to_numpy(), "launch_row"].nunique()),
        "streams": detector("stream_idle").run(ops),
    }


def _host_tid(tables: TraceTables) -> str:
    """The thread that launches GPU work (most runtime calls); '' when there are none."""
    if not len(tables.runtime):
        return ""
    return str(tables.runtime["tid"].value_counts().idxmax())


def analysis_dict(ranks: list[RankAnalysis], *, timeline: bool = True) -> dict:
    """Assemble the schema dict from per-rank analyses.

    Args:
        ranks: every rank's analysis, rank order.
        timeline: also build `timeline` / `rank_timelines` (the report's drawing of one step, ~80 %
            of a single-rank dict's bytes); False leaves them None / [].
    """
    result = reduce_results([summarize_rank(rank) for rank in ranks])
    if timeline and ranks:
        # Imported here: only the callers that draw pay for the timeline module.
        from bubblescope.trace.timeline import build_rank_timelines, build_timeline

        result["timeline"] = build_timeline(ranks[0], lambda window: gap_blames(ranks[0], window))
        result["rank_timelines"] = build_rank_timelines(ranks, gap_blames)
    return result


def _sync_entries(ranks: list[RankAnalysis], n_steps: int, typical: np.ndarray | None = None) -> list[dict]:
    """`syncs[]` of these ranks (`rank_reduce.sync_entries`; `typical`: `typical_steps` of the analysis'
    steps, so `per_step` leaves warm-up steps out as the analysis dict does)."""
    steps_per_rank = [len(rank.steps) for rank in ranks] if typical is not None else None
    return sync_entries([read_table(rank) for rank in ranks], n_steps, typical, steps_per_rank)


def _top_gaps(rank: RankAnalysis, typical: np.ndarray | None = None) -> list[dict]:
    """The rank's top-gap entries (`rank_reduce.top_gap_entries`)."""
    return top_gap_entries(summarize_rank(rank), typical)
