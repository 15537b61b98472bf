"""Detector helper: how much of a step's host-bound idle the profiler itself caused (an estimate).

Tracing slows the host: under the profiler `bubblescope run` uses (torch.profiler CPU + CUDA activities,
`with_stack`, `record_shapes`, CUDA sync events) every recorded ATen op, Python frame, annotation and
runtime call costs the host extra time. The per-event costs below were measured on the H200 by
`benchmarks/bench_profiler_overhead.py` (benchmarks/RESULTS.md, "Profiler overhead", 2026-12-03: each a
median of 5 bare/traced repeats); the runtime-call costs are net of the ATen op / Python frames that
wrap them in that benchmark, so a trace's events are each counted once.

Model, per step: the traced host cost is the sum over the events recorded on the launching thread in
the step's host window of their per-event cost (a graph launch also costs per node of the graph). In a
host-bound step every extra host microsecond delays the next launch, so it shows as idle; in a step the
host runs ahead of, it hides in the queue. So the profiler's share of a step's idle is estimated as
min(traced host cost, the step's `host` idle). It is an estimate (another GPU, driver or torch version
costs differently): `timed_idle.bound_idle` uses it only when no timed step exists, and says so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bubblescope.rank_analysis import RankAnalysis
from bubblescope.trace import runtime_names as rt
from bubblescope.trace.steps import step_index_of
from bubblescope.trace.tables import category_mask

# Added host ns per recorded event, H200, torch 2.11 (source: module docstring).
CPU_OP_ADDED_NS = 4_000
PYTHON_FRAME_ADDED_NS = 200
ANNOTATION_ADDED_NS = 2_000
KERNEL_LAUNCH_ADDED_NS = 2_000
MEMCPY_ADDED_NS = 2_000
SYNC_ADDED_NS = 2_000
GRAPH_LAUNCH_ADDED_NS = 5_000
GRAPH_NODE_ADDED_NS = 1_000
OTHER_RUNTIME_ADDED_NS = 1_000


def _runtime_cost_ns(names: pd.Series) -> np.ndarray:
    """Per runtime call, its added host ns by kind (names tested once per distinct name). [n]"""
    graph = category_mask(names, rt.is_graph_launch)
    launch = category_mask(names, rt.is_kernel_launch) & ~graph
    copy = category_mask(names, rt.is_copy)
    sync = category_mask(names, rt.is_synchronize)
    cost = np.full(len(names), OTHER_RUNTIME_ADDED_NS, dtype=np.int64)
    cost[launch] = KERNEL_LAUNCH_ADDED_NS
    cost[copy] = MEMCPY_ADDED_NS
    cost[sync] = SYNC_ADDED_NS
    cost[graph] = GRAPH_LAUNCH_ADDED_NS
    return cost


def traced_host_ns_per_step(rank: RankAnalysis) -> np.ndarray:
    """[n_steps] the model's added host ns of each step (events on the launching thread, by start)."""
    steps, tables = rank.steps, rank.tables
    n_steps = len(steps)
    total = np.zeros(n_steps + 1, dtype=np.int64)
    if not n_steps or not rank.host_tid:
        return total[1:]

    def add(table: pd.DataFrame, cost: np.ndarray | int) -> None:
        on_thread = (table["tid"].astype(str) == rank.host_tid).to_numpy()
        where = step_index_of(table["start_ns"].to_numpy()[on_thread].astype(np.int64), steps) + 1
        each = np.broadcast_to(np.asarray(cost, dtype=np.int64), (len(table),))[on_thread]
        np.add.at(total, where, each)

    ops = tables.ops
    is_op = (ops["cat"].astype(str) == "cpu_op").to_numpy()
    add(ops[is_op], CPU_OP_ADDED_NS)
    add(ops[~is_op], ANNOTATION_ADDED_NS)
    add(tables.frames, PYTHON_FRAME_ADDED_NS)
    add(tables.runtime, _runtime_cost_ns(tables.runtime["name"]))
    gpu = rank.gpu
    if GRAPH_NODE_ADDED_NS and len(gpu):
        nodes = gpu[(gpu["graph"].to_numpy() & (gpu["launch_row"].to_numpy() >= 0))]
        where = step_index_of(nodes["launch_start_ns"].to_numpy().astype(np.int64), steps) + 1
        np.add.at(total, where, GRAPH_NODE_ADDED_NS)
    return total[1:]


def profiler_share_ns(rank: RankAnalysis, host_idle_ns: np.ndarray) -> np.ndarray:
    """[n_steps] the estimated profiler share of each step's idle: min(traced host ns, host idle)."""
    return np.minimum(traced_host_ns_per_step(rank), np.asarray(host_idle_ns, dtype=np.int64))
