"""`analyze_traces`: trace files in, the `bubblescope.analysis/1` dict (docs/SCHEMAS.md) out.

Pipeline per file (one file = one rank): load -> tables -> correlate launches -> steps -> detectors
(plausibility, host-blocking reads, idle gaps, per-stream HTA view) -> JSON-ready dict. Never imports
torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bubblescope.detect.host_blame import HostBlame, queued_blame
from bubblescope.detect.idle_gaps import (
    GAP_CLASSES,
    device_busy_intervals,
    stream_wait_calls,
    unlaunched_lead_ns,
)
from bubblescope.detect.registry import detector
from bubblescope.errors import TraceError
from bubblescope.kernel_table import kernel_entries
from bubblescope.not_measured import null_unmeasured_analysis
from bubblescope.trace.correlate import correlate_launches, launch_counts
from bubblescope.trace.load import expand_trace_paths, gc_paused, stream_trace
from bubblescope.trace.steps import (
    StepWindows,
    find_steps,
    gpu_step_bounds,
    launch_times_ns,
    step_index_of,
)
from bubblescope.trace.tables import TraceTables, build_tables_streamed
from bubblescope.trace.timeline import build_rank_timelines, build_timeline

SCHEMA = "bubblescope.analysis/1"
TOP_GAPS = 20
STEP_CLASSES = ("sync", "host", "launch", "dependency")
# A step this many times the median is flagged as a likely warm-up step.
OUTLIER_STEP_FACTOR = 10
# The window's first step also runs what the host queued before the profiler started (run-ahead) and
# waits for the profiler's start-up; above this multiple of the median GPU step it is left out of the
# per-step means (its reads still count). Without this, one 6.6 ms first step among 3.9 ms steps made
# "GPU busy/step" exceed TPOT on the TP=2 H200 sample.
FIRST_STEP_FACTOR = 1.25


# What the read numbers mean (also in docs/analysis.md); written into every analysis dict.
DEFINITIONS = {
    "blocked_ns": "host time spent inside the read's blocking runtime calls",
    "lost_lead_ns": "GPU work the host had queued when the read began, lost because the device drained "
    "while the host waited (0 when the device was already idle or never drained); never more than "
    "blocked_ns",
    "bubble_ns": "expected saving if fixed: GPU idle (sync) that follows the read, at most its lost lead; "
    "bubble_ns <= lost_lead_ns <= blocked_ns",
    "drained": "how many of the reads drained the device",
}


@dataclass
class RankAnalysis:
    """Everything found in one rank's trace (tables kept for the annotated trace and timeline)."""

    tables: TraceTables
    gpu: pd.DataFrame
    steps: StepWindows
    reads: pd.DataFrame
    gaps: pd.DataFrame
    devices: list[dict]
    launches: dict[str, int]
    warnings: list[str] = field(default_factory=list)
    gpu_measured: bool = True
    host_tid: str = ""
    # device -> [n_steps + 1] GPU interval bounds of the steps (`trace.steps.gpu_step_bounds`).
    gpu_bounds: dict[int, np.ndarray] = field(default_factory=dict)
    # read_id -> lost lead L in ns (the largest over devices; 0 for a read that drained no device).
    lost_lead_ns: pd.Series = field(default_factory=lambda: pd.Series(dtype=np.int64))


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
    results = []
    files = expand_trace_paths(list(paths))
    for index, path in enumerate(files):
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
        results.append(analyze_rank(tables, step_marker))
        # What loading skipped or assumed (files of a folder, then this file's own notes) comes first.
        results[-1].warnings[:0] = (files.skipped if index == 0 else []) + [
            f"{path}: {w}" for w in tables.warnings
        ]
    return results


def analyze_rank(tables: TraceTables, step_marker: str | None = None) -> RankAnalysis:
    """Run every detector on one rank's tables."""
    gpu = correlate_launches(tables.gpu, tables.runtime)
    launches = launch_counts(tables.runtime)
    steps = find_steps(tables, step_marker)
    problems = detector("plausibility").run(gpu, launches)
    reads = detector("host_syncs").run(tables, gpu)
    waits = stream_wait_calls(tables.runtime, tables.waits)
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
            ops, reads, steps, int(device), span, bounds[int(device)], waits, spent
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
    ]
    frame = pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in ints})
    return frame.assign(
        **{
            "class": pd.Series(dtype=object),
            "next_op": pd.Series(dtype=object),
            "wait_api": pd.Series(dtype=object),
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


def analysis_dict(ranks: list[RankAnalysis]) -> dict:
    """Assemble the schema dict from per-rank analyses."""
    per_rank = [_step_entries(rank) for rank in ranks]
    steps_out = [s for entries in per_rank for s in entries]
    typical = typical_steps(steps_out)
    gaps_out, offset = [], 0
    for rank, entries in zip(ranks, per_rank, strict=True):
        gaps_out.extend(_top_gaps(rank, typical[offset : offset + len(entries)]))
        offset += len(entries)
    gaps_out.sort(key=lambda g: -g["dur_ns"])
    syncs = _sync_entries(ranks, n_steps=max(len(steps_out), 1))
    document = {
        "schema": SCHEMA,
        "inputs": [
            {
                "path": str(r.tables.path),
                "rank": r.tables.rank,
                "events": r.tables.event_count,
                "format": r.tables.format,
            }
            for r in ranks
        ],
        "warnings": [w for r in ranks for w in r.warnings],
        "step_source": ranks[0].steps.source if ranks else "whole-trace",
        "gpu_measured": all(r.gpu_measured for r in ranks),
        "devices": [d for r in ranks for d in r.devices],
        "steps": steps_out,
        "syncs": syncs,
        "definitions": DEFINITIONS,
        "gaps_top": gaps_out[:TOP_GAPS],
        "kernels": kernel_entries(ranks),
        "summary": _summary(steps_out),
        "timeline": build_timeline(ranks[0], lambda window: gap_blames(ranks[0], window)) if ranks else None,
        "rank_timelines": build_rank_timelines(ranks, gap_blames),
    }
    # A trace without GPU activity measured no GPU time: null there, never 0 (bubblescope.not_measured).
    return null_unmeasured_analysis(document)


def _step_entries(rank: RankAnalysis) -> list[dict]:
    steps, origin = rank.steps, rank.tables.origin_ns
    n_steps = len(steps)
    in_steps = rank.gaps[(rank.gaps["step"] >= 0).to_numpy()]
    # [n_steps, n_classes] idle ns, accumulated in one pass.
    idle = np.zeros((n_steps, len(STEP_CLASSES)), dtype=np.int64)
    class_index = in_steps["class"].map({c: i for i, c in enumerate(STEP_CLASSES)}).to_numpy()
    np.add.at(
        idle,
        (in_steps["step"].to_numpy().astype(np.int64), class_index.astype(np.int64)),
        in_steps["dur_ns"].to_numpy().astype(np.int64),
    )
    reads_per_step = np.bincount(read_steps_of(rank), minlength=n_steps + 1)[1:]
    op_steps = step_index_of(launch_times_ns(rank.gpu), steps)
    kernels_per_step = np.bincount(
        op_steps[(rank.gpu["kind"] == "kernel").to_numpy()] + 1, minlength=n_steps + 1
    )[1:]
    gpu_start, gpu_dur = _gpu_intervals(rank)
    out = []
    for i in range(n_steps):
        idle_ns = int(idle[i].sum())
        out.append(
            {
                "index": i,
                "rank": rank.tables.rank,
                "name": steps.names[i],
                "start_ns": int(steps.start_ns[i] - origin),
                "dur_ns": int(steps.end_ns[i] - steps.start_ns[i]),
                "gpu_start_ns": int(gpu_start[i] - origin),
                "gpu_dur_ns": int(gpu_dur[i]),
                # Busy and idle are summed over the rank's devices (one device per rank is the usual case).
                "gpu_busy_ns": int(gpu_dur[i]) - idle_ns,
                "idle_ns": idle_ns,
                "idle_by_class_ns": {c: int(idle[i, k]) for k, c in enumerate(STEP_CLASSES)},
                "blocking_reads": int(reads_per_step[i]),
                "kernels": int(kernels_per_step[i]),
            }
        )
    return out


def _gpu_intervals(rank: RankAnalysis) -> tuple[np.ndarray, np.ndarray]:
    """Each step's GPU interval: ([n_steps] earliest start over devices, [n_steps] length summed over
    devices), absolute ns. Without GPU ops: the host start and 0."""
    steps = rank.steps
    if not rank.gpu_bounds:
        return steps.start_ns.astype(np.int64), np.zeros(len(steps), dtype=np.int64)
    bounds = np.stack(list(rank.gpu_bounds.values()))  # [n_devices, n_steps + 1]
    return bounds[:, :-1].min(axis=0), np.diff(bounds, axis=1).sum(axis=0)


def read_steps_of(rank: RankAnalysis) -> np.ndarray:
    """Step index + 1 of each blocking read (0 = outside every step), for bincount. [n_reads]"""
    return step_index_of(rank.reads["start_ns"].to_numpy().astype(np.int64), rank.steps) + 1


def gap_blamer(rank: RankAnalysis, window_ns: tuple[int, int] | None = None):
    """Gap row -> blame text. `window_ns` limits host blame to ranges overlapping it (faster)."""
    many = gap_blames(rank, window_ns)

    def blame(row) -> str:
        return many(pd.DataFrame([row]))[0]

    return blame


def gap_blames(rank: RankAnalysis, window_ns: tuple[int, int] | None = None):
    """Gap rows (DataFrame) -> blame text of each, host blame done once for all of them (linear)."""
    blamers: dict[str, HostBlame] = {}
    sites = dict(zip(rank.reads["read_id"].tolist(), rank.reads["site"].tolist(), strict=True))
    origin = rank.tables.origin_ns

    def host_blame(tid: str) -> HostBlame:
        if tid not in blamers:
            tables = rank.tables
            blamers[tid] = HostBlame(tables.ops, tables.frames, tid, window_ns, tables.runtime)
        return blamers[tid]

    def blame_all(gaps: pd.DataFrame) -> list[str]:
        classes = gaps["class"].to_numpy()
        out = [""] * len(gaps)
        host_rows = np.flatnonzero((classes == "host") | (classes == "outside"))
        # Each host gap is blamed on the thread that launched its closing op (the launching thread
        # of the rank for a trailing gap or an unmatched op): backward runs on autograd's thread.
        tids = gaps["next_tid"].to_numpy()[host_rows] if "next_tid" in gaps else np.full(len(host_rows), "")
        tids = np.where(tids == "", rank.host_tid, tids).astype(str)
        for tid in np.unique(tids).tolist():
            rows = host_rows[tids == tid]
            texts = host_blame(tid).blame_many(
                gaps["start_ns"].to_numpy()[rows].astype(np.int64),
                gaps["end_ns"].to_numpy()[rows].astype(np.int64),
            )
            for j, text in zip(rows.tolist(), texts, strict=True):
                out[j] = text
        n = len(gaps)
        read_ids = gaps["read_id"].to_numpy()
        streams = gaps["next_stream"].to_numpy()
        graph = gaps["graph"].to_numpy() if "graph" in gaps else np.zeros(n, dtype=bool)
        wait_api = gaps["wait_api"].to_numpy() if "wait_api" in gaps else np.full(n, "", dtype=object)
        wait_ns = gaps["wait_call_ns"].to_numpy() if "wait_call_ns" in gaps else np.full(n, -1)
        for j in np.flatnonzero((classes != "host") & (classes != "outside")).tolist():
            if classes[j] == "sync":
                out[j] = sites.get(int(read_ids[j]), "blocking read")
                continue
            waited = int(wait_ns[j])
            out[j] = queued_blame(
                str(classes[j]),
                int(streams[j]),
                bool(graph[j]),
                str(wait_api[j] or ""),
                (waited - origin) / 1000 if waited >= 0 else None,
            )
        return out

    return blame_all


def _top_gaps(rank: RankAnalysis, typical_steps: np.ndarray | None = None) -> list[dict]:
    """The largest gaps of the rank inside its typical steps (no warm-up/outlier step, no `outside`
    idle), when any typical step has gaps; otherwise the largest of all."""
    gaps = rank.gaps
    if typical_steps is not None and len(typical_steps):
        step = gaps["step"].to_numpy()
        in_typical = (step >= 0) & typical_steps[np.clip(step, 0, len(typical_steps) - 1)]
        # Idle outside every step (profiler start-up, between windows) is in the device totals; the
        # list names what slows the steps.
        if in_typical.any():
            gaps = gaps[in_typical]
    top = gaps.nlargest(TOP_GAPS, "dur_ns", keep="first")
    blames = gap_blames(rank)(top)
    origin = rank.tables.origin_ns
    return [
        {
            "rank": rank.tables.rank,
            "device": int(row["device"]),
            "start_ns": int(row["start_ns"] - origin),
            "dur_ns": int(row["dur_ns"]),
            "class": row["class"],
            "step": int(row["step"]),
            "blame": text,
            "next_op": row["next_op"],
        }
        for row, text in zip(top.to_dict("records"), blames, strict=True)
    ]


def _sync_entries(ranks: list[RankAnalysis], n_steps: int) -> list[dict]:
    frames = []
    for rank in ranks:
        if not len(rank.reads):
            continue
        reads = rank.reads.copy()
        bubble = rank.gaps[rank.gaps["class"] == "sync"].groupby("read_id")["dur_ns"].sum()
        reads["bubble_ns"] = reads["read_id"].map(bubble).fillna(0).astype(np.int64)
        reads["lost_lead_ns"] = reads["read_id"].map(rank.lost_lead_ns).fillna(0).astype(np.int64)
        reads["drained"] = reads["lost_lead_ns"] > 0
        reads["in_step"] = step_index_of(reads["start_ns"].to_numpy().astype(np.int64), rank.steps) >= 0
        frames.append(reads)
    if not frames:
        return []
    reads = pd.concat(frames, ignore_index=True)
    keys = ["site", "op", "kind", "api"]
    grouped = (
        reads.groupby(keys, sort=False)
        .agg(
            count=("read_id", "size"),
            in_steps=("in_step", "sum"),
            blocked_ns=("blocked_ns", "sum"),
            bubble_ns=("bubble_ns", "sum"),
            lost_lead_ns=("lost_lead_ns", "sum"),
            drained=("drained", "sum"),
            wait_ns=("wait_ns", "sum"),
            hint=("hint", "first"),
            inner_op=("inner_op", "first"),
        )
        .reset_index()
    )
    grouped = grouped.sort_values(["bubble_ns", "blocked_ns"], ascending=False, kind="stable")
    return [
        {
            "site": r.site,
            "op": r.op,
            "kind": r.kind,
            "api": r.api,
            "inner_op": r.inner_op,
            "count": int(r.count),
            "per_step": round(float(r.in_steps) / n_steps, 4),
            "blocked_ns": int(r.blocked_ns),
            "bubble_ns": int(r.bubble_ns),
            "lost_lead_ns": int(r.lost_lead_ns),
            "drained": int(r.drained),
            "wait_ns": int(r.wait_ns),
            "hint": r.hint,
        }
        for r in grouped.itertuples(index=False)
    ]


def typical_steps(steps: list[dict]) -> np.ndarray:
    """[n_steps] bool: the steps per-step figures and the top-gap list use.

    Left out: a step whose host window or GPU interval is over OUTLIER_STEP_FACTOR x the median
    (warm-up: lazy init, compilation), and the window's first step when its GPU interval is over
    FIRST_STEP_FACTOR x the median (it also waited for the profiler's start-up). All steps are typical
    when that would leave none.
    """
    n_steps = len(steps)
    if not n_steps:
        return np.zeros(0, dtype=bool)
    median_ns = float(np.median([s["dur_ns"] for s in steps]))
    gpu_median_ns = float(np.median([s["gpu_dur_ns"] for s in steps]))
    first_is_ramp = n_steps >= 3 and steps[0]["gpu_dur_ns"] > FIRST_STEP_FACTOR * max(gpu_median_ns, 1.0)
    mask = np.asarray(
        [
            s["dur_ns"] <= OUTLIER_STEP_FACTOR * max(median_ns, 1.0)
            and s["gpu_dur_ns"] <= OUTLIER_STEP_FACTOR * max(gpu_median_ns, 1.0)
            and not (index == 0 and first_is_ramp)
            for index, s in enumerate(steps)
        ],
        dtype=bool,
    )
    return mask if mask.any() else np.ones(n_steps, dtype=bool)


def _summary(steps: list[dict]) -> dict:
    n_steps = len(steps)
    if not n_steps:
        return {
            "steps": 0,
            "blocking_reads_per_step": 0.0,
            "gpu_busy_ns_per_step": 0,
            "idle_ns_per_step": 0,
            "idle_by_class_ns_per_step": {c: 0 for c in STEP_CLASSES},
            "gpu_step_ns_per_step": 0,
            "gpu_step_ns_median": 0,
            "step_dur_ns_median": 0,
            "outlier_steps": 0,
        }
    # Reads are counted over every step (a read in a warm-up step is still a read the loop makes), but
    # per-step times average only the typical steps: one 75 ms warm-up step among 1 ms steps would
    # otherwise dominate every "per step" time. Means (not medians) keep the idle classes additive.
    # Under host run-ahead a slow step can show on the GPU side only, so both durations are checked.
    mask = typical_steps(steps)
    typical = [s for s, keep in zip(steps, mask.tolist(), strict=True) if keep]
    n_typical = len(typical)
    return {
        "steps": n_steps,
        "blocking_reads_per_step": round(sum(s["blocking_reads"] for s in steps) / n_steps, 4),
        "gpu_busy_ns_per_step": int(round(sum(s["gpu_busy_ns"] for s in typical) / n_typical)),
        "idle_ns_per_step": int(round(sum(s["idle_ns"] for s in typical) / n_typical)),
        "idle_by_class_ns_per_step": {
            c: int(round(sum(s["idle_by_class_ns"][c] for s in typical) / n_typical)) for c in STEP_CLASSES
        },
        "kernels_per_step": round(sum(s["kernels"] for s in typical) / n_typical, 2),
        # The GPU time per step (launch-attributed interval): under run-ahead this tracks TPOT, where the
        # host window (`step_dur_ns_median`) only shows how long the host took to enqueue a step.
        "gpu_step_ns_per_step": int(round(sum(s["gpu_dur_ns"] for s in typical) / n_typical)),
        # The first profiled step also carries the GPU's idle from the window's start (an empty queue,
        # profiler start-up): the median is the steady-state figure to set beside the timed TPOT.
        "gpu_step_ns_median": int(np.median([s["gpu_dur_ns"] for s in steps])),
        "outlier_steps": n_steps - n_typical,
        "step_dur_ns_median": int(np.median([s["dur_ns"] for s in steps])),
    }
