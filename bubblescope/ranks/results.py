"""`RankResult`: the compact part of one rank's analysis that the cross-rank dict is reduced from.

A `RankAnalysis` holds the rank's whole tables (hundreds of MB for a large trace); a `RankResult` holds
only what `rank_reduce.reduce_results` needs: the step rows, the device rows, the blocking reads, the
in-step kernel durations and the gaps that can make the top-gap list, already blamed. Workers of a
process pool or a Dask cluster return it (pickled, ~10-100 bytes per kernel and per read) and the
client reduces them, so the result is the same whichever machine analysed which rank.

Which gaps can make the list depends on every rank (the typical steps use the median over all ranks'
steps), so each rank keeps the `TOP_GAPS` largest gaps of each of its steps and of the whole rank: the
list's gaps inside any set of typical steps are among them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bubblescope.analysis.gap_blame import gap_blames
from bubblescope.analysis.host_ops import host_op_sums
from bubblescope.analysis.kernel_table import in_step_kernels
from bubblescope.detect.tracing_cost import profiler_share_ns
from bubblescope.ranks.analysis import RankAnalysis
from bubblescope.trace.steps import launch_steps_of, step_index_of

TOP_GAPS = 20
STEP_CLASSES = ("sync", "host", "launch", "dependency")
# Columns of a top-gap entry, in the order the analysis dict writes them.
GAP_COLUMNS = ("rank", "device", "start_ns", "dur_ns", "class", "step", "blame", "next_op")


@dataclass
class RankResult:
    """One rank's share of `bubblescope.analysis/1`, small enough to send between processes.

    Attributes:
        input: the rank's `inputs[]` entry.
        warnings: its warning lines.
        step_source: how its steps were found.
        gpu_measured: whether its GPU side is plausible.
        devices: its `devices[]` entries.
        steps: its `steps[]` entries.
        gap_candidates: [n] gaps that can make the top-gap list, in the rank's gap order, with the
            columns of `GAP_COLUMNS` (times relative to the rank's origin, blame text included).
        reads: [n_reads] blocking reads with bubble_ns, lost_lead_ns, drained and step (`read_table`).
        kernels: [n] in-step kernel launches: name, dur_ns.
        host_ops: in-step host ranges summed per (name, kind) (`host_ops.host_op_sums`).
        steps_total: number of steps (for per-step kernel counts).
    """

    input: dict
    warnings: list[str]
    step_source: str
    gpu_measured: bool
    devices: list[dict]
    steps: list[dict]
    gap_candidates: pd.DataFrame
    reads: pd.DataFrame
    kernels: pd.DataFrame
    host_ops: pd.DataFrame
    steps_total: int = 0


def summarize_rank(rank: RankAnalysis) -> RankResult:
    """The compact result of one analysed rank (see the module docstring)."""
    tables = rank.tables
    return RankResult(
        input={
            "path": str(tables.path),
            "rank": tables.rank,
            "events": tables.event_count,
            "format": tables.format,
        },
        warnings=list(rank.warnings),
        step_source=rank.steps.source,
        gpu_measured=rank.gpu_measured,
        devices=rank.devices,
        steps=step_entries(rank),
        gap_candidates=gap_candidates(rank),
        reads=read_table(rank),
        kernels=in_step_kernels(rank),
        host_ops=host_op_sums(rank),
        steps_total=len(rank.steps),
    )


def step_entries(rank: RankAnalysis) -> list[dict]:
    """The rank's `steps[]` entries: per step its host window, GPU interval, idle by class, reads and
    kernels."""
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
    op_steps = launch_steps_of(rank.gpu, steps)
    kernels_per_step = np.bincount(
        op_steps[(rank.gpu["kind"] == "kernel").to_numpy()] + 1, minlength=n_steps + 1
    )[1:]
    # Summed traced kernel durations per step (the kernel table's time, same launch attribution): under
    # PDL or concurrent streams kernels overlap, so this can exceed `gpu_busy_ns`.
    is_kernel = (rank.gpu["kind"] == "kernel").to_numpy()
    kernel_dur_ns = (rank.gpu["end_ns"].to_numpy() - rank.gpu["start_ns"].to_numpy())[is_kernel]
    kernel_ns_per_step = np.bincount(
        op_steps[is_kernel] + 1, weights=kernel_dur_ns.astype(np.float64), minlength=n_steps + 1
    )[1:]
    gpu_start, gpu_dur = _gpu_intervals(rank)
    # The profiler's estimated share of each step's host idle (an estimate: detect.tracing_cost).
    profiler = profiler_share_ns(rank, idle[:, STEP_CLASSES.index("host")])
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
                # GPU busy / the step's GPU interval (which under run-ahead tracks TPOT); null without GPU.
                "gpu_utilization": fraction(int(gpu_dur[i]) - idle_ns, int(gpu_dur[i])),
                "idle_ns": idle_ns,
                "idle_by_class_ns": {c: int(idle[i, k]) for k, c in enumerate(STEP_CLASSES)},
                "profiler_ns": int(profiler[i]),
                "blocking_reads": int(reads_per_step[i]),
                "kernels": int(kernels_per_step[i]),
                "kernel_ns": int(kernel_ns_per_step[i]),
            }
        )
    return out


def fraction(part: int, whole: int) -> float | None:
    """part / whole to 4 decimals; None (not measured) when whole is 0."""
    return round(part / whole, 4) if whole > 0 else None


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


def gap_candidates(rank: RankAnalysis) -> pd.DataFrame:
    """The gaps that can make the top-gap list, blamed, in the rank's gap order (`RankResult`)."""
    gaps = rank.gaps.reset_index(drop=True)
    n_gaps = len(gaps)
    keep = np.zeros(n_gaps, dtype=bool)
    keep[gaps.nlargest(TOP_GAPS, "dur_ns", keep="first").index.to_numpy()] = True
    if n_gaps:
        step = gaps["step"].to_numpy().astype(np.int64)
        dur = gaps["dur_ns"].to_numpy().astype(np.int64)
        # Within each step: longest first, earlier rows first on ties (nlargest's keep="first").
        order = np.lexsort((np.arange(n_gaps), -dur, step))
        sorted_step = step[order]
        first = np.concatenate(([True], sorted_step[1:] != sorted_step[:-1]))
        group_start = np.maximum.accumulate(np.where(first, np.arange(n_gaps), 0))
        in_step_top = (np.arange(n_gaps) - group_start < TOP_GAPS) & (sorted_step >= 0)
        keep[order[in_step_top]] = True
    chosen = gaps[keep]
    origin = rank.tables.origin_ns
    return pd.DataFrame(
        {
            "rank": np.full(len(chosen), rank.tables.rank, dtype=np.int64),
            "device": chosen["device"].to_numpy().astype(np.int64),
            "start_ns": (chosen["start_ns"].to_numpy() - origin).astype(np.int64),
            "dur_ns": chosen["dur_ns"].to_numpy().astype(np.int64),
            "class": chosen["class"].to_numpy().astype(object),
            "step": chosen["step"].to_numpy().astype(np.int64),
            "blame": np.asarray(gap_blames(rank)(chosen), dtype=object),
            "next_op": chosen["next_op"].to_numpy().astype(object),
        }
    )


def read_table(rank: RankAnalysis) -> pd.DataFrame:
    """The rank's blocking reads (`detect.host_syncs` columns) with what each cost: `bubble_ns` (its
    sync idle), `lost_lead_ns`, `drained` and `step` (the step it started in, -1 outside every step)."""
    reads = rank.reads.copy()
    bubble = rank.gaps[rank.gaps["class"] == "sync"].groupby("read_id")["dur_ns"].sum()
    reads["bubble_ns"] = reads["read_id"].map(bubble).fillna(0).astype(np.int64)
    reads["lost_lead_ns"] = reads["read_id"].map(rank.lost_lead_ns).fillna(0).astype(np.int64)
    reads["drained"] = reads["lost_lead_ns"] > 0
    reads["step"] = step_index_of(reads["start_ns"].to_numpy().astype(np.int64), rank.steps)
    return reads
