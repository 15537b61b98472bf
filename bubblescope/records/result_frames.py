"""The tables of an analysis as pandas DataFrames (`bubblescope.AnalysisResult`'s frames).

Two sources, never a second analysis:
- the `bubblescope.analysis/1` dict (docs/SCHEMAS.md): steps, read sites, top gaps, kernels, devices,
  streams and the fix-first findings; the same whether the dict was just computed or read from disk;
- the per-rank analyses (`analysis.RankAnalysis`) kept when traces were analysed in this process:
  every gap and every single blocking read, which the JSON does not hold.

Units are in the column names (`_ns`: integer nanoseconds, relative to the rank's first trace event
for `start_ns`). Integer columns use pandas' nullable `Int64` and float columns `Float64`, so a value
that was not measured is `<NA>`, never 0. Column meanings: docs/api.md. Never imports torch.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

STEP_IDLE_CLASSES = ("sync", "host", "launch", "dependency")
DEVICE_IDLE_CLASSES = ("sync", "host", "launch", "dependency", "outside")

STEP_COLUMNS = [
    "rank",
    "index",
    "name",
    "start_ns",
    "dur_ns",
    "gpu_start_ns",
    "gpu_dur_ns",
    "gpu_busy_ns",
    "gpu_utilization",
    "idle_ns",
    *(f"idle_{c}_ns" for c in STEP_IDLE_CLASSES),
    "blocking_reads",
    "kernels",
    "typical",
]
READ_SITE_COLUMNS = [
    "site",
    "op",
    "kind",
    "api",
    "inner_op",
    "count",
    "per_step",
    "blocked_ns",
    "bubble_ns",
    "lost_lead_ns",
    "drained",
    "wait_ns",
    "hint",
]
TOP_GAP_COLUMNS = ["rank", "device", "step", "class", "start_ns", "dur_ns", "blame", "next_op"]
KERNEL_COLUMNS = [
    "name",
    "short_name",
    "category",
    "count",
    "total_ns",
    "mean_ns",
    "p50_ns",
    "max_ns",
    "share",
    "count_per_step",
    "ns_per_step",
]
KERNEL_CATEGORY_COLUMNS = [
    "category",
    "kernels",
    "count",
    "total_ns",
    "share",
    "count_per_step",
    "ns_per_step",
]
HOST_OP_COLUMNS = [
    "name",
    "kind",
    "calls",
    "self_ns",
    "total_ns",
    "calls_per_step",
    "self_ns_per_step",
    "total_ns_per_step",
    "self_share",
]
DEVICE_COLUMNS = [
    "rank",
    "device",
    "span_ns",
    "busy_ns",
    "idle_ns",
    *(f"idle_{c}_ns" for c in DEVICE_IDLE_CLASSES),
    "kernel_count",
    "memcpy_count",
    "memset_count",
    "graph_launches",
]
STREAM_COLUMNS = [
    "rank",
    "device",
    "stream",
    "span_ns",
    "busy_ns",
    "idle_ns",
    "host_wait_ns",
    "kernel_wait_ns",
    "other_ns",
    "ops",
]
RANK_COLUMNS = [
    "rank",
    "steps",
    "blocking_reads_per_step",
    "gpu_step_ns_median",
    "step_dur_ns_median",
    "gpu_busy_ns_per_step",
    *(f"idle_{c}_ns_per_step" for c in STEP_IDLE_CLASSES),
    "vs_median_rank",
    "straggler",
]
FINDING_COLUMNS = [
    "order",
    "kind",
    "what",
    "site",
    "saving_ns_per_token",
    "hint",
    "bound",
    "estimate",
    "cut_from_ns_per_token",
]
GAP_COLUMNS = [
    "rank",
    "device",
    "step",
    "class",
    "start_ns",
    "end_ns",
    "dur_ns",
    "read_id",
    "next_op",
    "next_stream",
    "graph",
    "blame",
]
READ_EVENT_COLUMNS = [
    "rank",
    "read_id",
    "step",
    "site",
    "op",
    "inner_op",
    "kind",
    "api",
    "tid",
    "start_ns",
    "end_ns",
    "blocked_ns",
    "wait_ns",
    "bubble_ns",
    "lost_lead_ns",
    "drained",
    "calls",
]


def _frame(rows: Iterable[dict[str, Any]], columns: Sequence[str]) -> pd.DataFrame:
    """Rows -> DataFrame with `columns` first (always present, even with no rows), then any extra keys
    the rows carry (a profile's read sites add `line_exact`, `read_at`, `stack`, ...), nullable dtypes."""
    rows = list(rows)
    extra = [k for k in dict.fromkeys(k for row in rows for k in row) if k not in columns]
    frame = pd.DataFrame(rows, columns=[*columns, *extra])
    return _nullable(frame)


def _nullable(frame: pd.DataFrame) -> pd.DataFrame:
    """Numbers and booleans as pandas' nullable dtypes (`<NA>` for not measured), decided by the values'
    Python types: a float column stays `Float64` even when every value is whole (`per_step` 1.0), which
    `DataFrame.convert_dtypes` would turn into integers. Other columns keep their dtype."""
    dtypes = {}
    for column in frame.columns:
        values = [v for v in frame[column].tolist() if v is not None and not _is_nan(v)]
        if not values:
            continue
        if all(isinstance(v, (bool, np.bool_)) for v in values):
            dtypes[column] = "boolean"
        elif any(isinstance(v, (bool, np.bool_)) for v in values):
            continue
        elif all(isinstance(v, (int, np.integer)) for v in values):
            dtypes[column] = "Int64"
        elif all(isinstance(v, (int, float, np.number)) for v in values):
            dtypes[column] = "Float64"
    return frame.astype(dtypes)


def _is_nan(value: Any) -> bool:
    return isinstance(value, (float, np.floating)) and value != value


def _items(analysis: dict[str, Any], key: str) -> list[dict[str, Any]]:
    return [row for row in analysis.get(key) or [] if isinstance(row, dict)]


def _flat_classes(row: dict[str, Any], classes: Sequence[str]) -> dict[str, Any]:
    """`idle_by_class_ns: {sync: …}` -> `idle_sync_ns`, … columns."""
    by_class = row.get("idle_by_class_ns")
    by_class = by_class if isinstance(by_class, dict) else {}
    flat = {k: v for k, v in row.items() if k != "idle_by_class_ns"}
    flat.update({f"idle_{c}_ns": by_class.get(c) for c in classes})
    return flat


# Columns that need a GPU timeline: `<NA>` when the analysis says `gpu_measured: false` (a CPU run, or a
# GPU timeline the plausibility check refused), where the JSON keeps 0 and the reports print "not
# measured" (report/reads_and_gaps_rows.py, report/profile_sections.py).
STEP_GPU_COLUMNS = [
    "gpu_start_ns",
    "gpu_dur_ns",
    "gpu_busy_ns",
    "gpu_utilization",
    "idle_ns",
    *(f"idle_{c}_ns" for c in STEP_IDLE_CLASSES),
]
READ_GPU_COLUMNS = ["blocked_ns", "bubble_ns", "lost_lead_ns", "drained", "wait_ns"]


def _unmeasured(frame: pd.DataFrame, analysis: dict[str, Any], columns: Sequence[str]) -> pd.DataFrame:
    if analysis.get("gpu_measured") is not False or not len(frame):
        return frame
    return frame.assign(
        **{
            c: pd.array([pd.NA] * len(frame), dtype="Float64" if c == "gpu_utilization" else "Int64")
            for c in columns
        }
    )


def steps_frame(analysis: dict[str, Any]) -> pd.DataFrame:
    """One row per step and rank; `typical` is False for the warm-up / outlier steps that per-step
    figures leave out (`analysis.typical_steps`)."""
    from bubblescope.analysis.traces import typical_steps

    steps = _items(analysis, "steps")
    complete = all(isinstance(s.get("dur_ns"), int) and isinstance(s.get("gpu_dur_ns"), int) for s in steps)
    typical = typical_steps(steps).tolist() if complete else [None] * len(steps)
    rows = [
        {**_flat_classes(step, STEP_IDLE_CLASSES), "typical": keep}
        for step, keep in zip(steps, typical, strict=True)
    ]
    return _unmeasured(_frame(rows, STEP_COLUMNS), analysis, STEP_GPU_COLUMNS)


def reads_frame(analysis: dict[str, Any]) -> pd.DataFrame:
    """One row per blocking-read site (the JSON's `syncs[]`), largest GPU bubble first."""
    return _unmeasured(_frame(_items(analysis, "syncs"), READ_SITE_COLUMNS), analysis, READ_GPU_COLUMNS)


def top_gaps_frame(analysis: dict[str, Any]) -> pd.DataFrame:
    """The JSON's `gaps_top[]`: the largest GPU idle gaps inside typical steps, each blamed."""
    return _frame(_items(analysis, "gaps_top"), TOP_GAP_COLUMNS)


def kernels_frame(analysis: dict[str, Any]) -> pd.DataFrame:
    """One row per kernel name launched inside the steps (`kernels[]`), largest total time first."""
    return _frame(_items(analysis, "kernels"), KERNEL_COLUMNS)


def kernel_categories_frame(analysis: dict[str, Any]) -> pd.DataFrame:
    """Kernel time by category (GEMM, attention, norm, …; `kernel_categories[]`), largest first."""
    return _frame(_items(analysis, "kernel_categories"), KERNEL_CATEGORY_COLUMNS)


def host_ops_frame(analysis: dict[str, Any]) -> pd.DataFrame:
    """Host-side ops and runtime calls inside the steps (`host_ops[]`), self and total time."""
    return _frame(_items(analysis, "host_ops"), HOST_OP_COLUMNS)


def devices_frame(analysis: dict[str, Any]) -> pd.DataFrame:
    """One row per device of every rank: span, busy and idle time by class, op counts."""
    rows = [
        {k: v for k, v in _flat_classes(d, DEVICE_IDLE_CLASSES).items() if k != "streams"}
        for d in _items(analysis, "devices")
    ]
    return _frame(rows, DEVICE_COLUMNS)


def streams_frame(analysis: dict[str, Any]) -> pd.DataFrame:
    """One row per stream of every device, idle split in HTA's terms (host wait, kernel wait, other)."""
    rows = [
        {"rank": device.get("rank"), "device": device.get("device"), **stream}
        for device in _items(analysis, "devices")
        for stream in device.get("streams") or []
        if isinstance(stream, dict)
    ]
    return _frame(rows, STREAM_COLUMNS)


def ranks_frame(analysis: dict[str, Any], steps: pd.DataFrame) -> pd.DataFrame:
    """One row per rank, from the steps table and the JSON's cross-rank view (`rank_summary`):
    `steps`, `blocking_reads_per_step` (over all its steps), `gpu_step_ns_median`, `step_dur_ns_median`,
    the per-step means over its typical steps of `gpu_busy_ns` and each idle class, and
    `vs_median_rank` (its median GPU step over the median rank's) and `straggler` (over the 1.05x the
    analysis flags), both `<NA>` with one rank."""
    if not len(steps):
        return _frame([], RANK_COLUMNS)
    typical = steps[steps["typical"].fillna(True).astype(bool)]
    means = typical.groupby("rank")[["gpu_busy_ns", *(f"idle_{c}_ns" for c in STEP_IDLE_CLASSES)]].mean()
    grouped = steps.groupby("rank")
    table = pd.DataFrame(
        {
            "steps": grouped.size(),
            "blocking_reads_per_step": grouped["blocking_reads"].mean(),
            "gpu_step_ns_median": grouped["gpu_dur_ns"].median(),
            "step_dur_ns_median": grouped["dur_ns"].median(),
        }
    ).join(means.add_suffix("_per_step"))
    cross = analysis.get("rank_summary") if isinstance(analysis.get("rank_summary"), dict) else None
    overall = cross.get("gpu_step_ns_median") if cross else None
    stragglers = {int(s["rank"]) for s in (cross or {}).get("stragglers") or [] if isinstance(s, dict)}
    rows = []
    for rank, row in table.iterrows():
        median_ns = row["gpu_step_ns_median"]
        rows.append(
            {
                "rank": int(rank),
                **row.to_dict(),
                "vs_median_rank": float(median_ns) / overall if overall and pd.notna(median_ns) else None,
                "straggler": int(rank) in stragglers if cross else None,
            }
        )
    return _frame(rows, RANK_COLUMNS).astype({"vs_median_rank": "Float64", "straggler": "boolean"})


def findings_frame(analysis: dict[str, Any], tokens_per_step: float = 1.0) -> pd.DataFrame:
    """Every finding of the fix-first list (`report.findings.fix_first`), largest saving first;
    `order` is its place in that list, `saving_ns_per_token` is `<NA>` where no GPU was measured."""
    from bubblescope.report.findings import fix_first

    findings = fix_first(analysis, tokens_per_step=tokens_per_step, limit=sys.maxsize)
    rows = [{"order": f.get("rank"), **{k: v for k, v in f.items() if k != "rank"}} for f in findings]
    frame = _frame(rows, FINDING_COLUMNS)
    # All-None savings (a CPU run) would otherwise stay an object column.
    return frame.astype({"saving_ns_per_token": "Float64"})


def gaps_frame(ranks: Sequence[Any]) -> pd.DataFrame:
    """Every GPU idle gap of every rank (not only the top ones), each blamed like the JSON's top gaps;
    `read_id` is the blocking read a `sync` gap follows (`<NA>` for other classes)."""
    from bubblescope.analysis.gap_blame import gap_blames

    parts = []
    for rank in ranks:
        gaps = rank.gaps
        if not len(gaps):
            continue
        origin = rank.tables.origin_ns
        read_id = gaps["read_id"].to_numpy()
        parts.append(
            pd.DataFrame(
                {
                    "rank": rank.tables.rank,
                    "device": gaps["device"].to_numpy(),
                    "step": gaps["step"].to_numpy(),
                    "class": gaps["class"].to_numpy(),
                    "start_ns": gaps["start_ns"].to_numpy() - origin,
                    "end_ns": gaps["end_ns"].to_numpy() - origin,
                    "dur_ns": gaps["dur_ns"].to_numpy(),
                    "read_id": pd.array(np.where(read_id >= 0, read_id, 0), dtype="Int64"),
                    "next_op": gaps["next_op"].to_numpy(),
                    "next_stream": gaps["next_stream"].to_numpy(),
                    "graph": gaps["graph"].to_numpy(),
                    "blame": gap_blames(rank)(gaps),
                }
            )
        )
        parts[-1].loc[read_id < 0, "read_id"] = pd.NA
    if not parts:
        return _frame([], GAP_COLUMNS)
    return _typed(pd.concat(parts, ignore_index=True)[GAP_COLUMNS])


def read_events_frame(ranks: Sequence[Any]) -> pd.DataFrame:
    """Every blocking read the traces show, one row each (the JSON only keeps them grouped by site)."""
    from bubblescope.ranks.results import read_table

    parts = []
    for rank in ranks:
        reads = read_table(rank)
        if not len(reads):
            continue
        origin = rank.tables.origin_ns
        parts.append(
            reads.assign(
                rank=rank.tables.rank,
                start_ns=reads["start_ns"] - origin,
                end_ns=reads["end_ns"] - origin,
            )
        )
    if not parts:
        return _frame([], READ_EVENT_COLUMNS)
    return _typed(pd.concat(parts, ignore_index=True)[READ_EVENT_COLUMNS])


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """Numpy-typed columns (no None in them) as the nullable dtypes the other tables use, vectorised."""
    dtypes = {}
    for column, dtype in frame.dtypes.items():
        if pd.api.types.is_bool_dtype(dtype):
            dtypes[column] = "boolean"
        elif pd.api.types.is_integer_dtype(dtype):
            dtypes[column] = "Int64"
        elif pd.api.types.is_float_dtype(dtype):
            dtypes[column] = "Float64"
    return frame.astype(dtypes)
