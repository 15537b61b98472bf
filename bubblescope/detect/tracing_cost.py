"""Detector helper: how much of a step's host-bound idle the profiler itself caused (an estimate).

Tracing slows the host: under the profiler `bubblescope run` uses (torch.profiler CPU + CUDA activities,
`with_stack`, `record_shapes`, CUDA sync events) every recorded ATen op, Python frame and annotation costs
the host extra time, and a CUDA graph launch costs extra per node of its graph (CUPTI records each node).
The per-event costs below come with their source next to each; `benchmarks/bench_profiler_overhead.py`
measures all of them on a GPU (it could not run on the H200 in this session: no machine was lent), and
`benchmarks/validate_tracing_model.py` checks the model against committed H200 runs, where a timed step
gives the true share (benchmarks/RESULTS.md, "Profiler overhead").

Model, per step: the traced host cost is the sum over the events recorded on the launching thread in
the step's host window of their per-event cost, plus the per-node cost of each graph node launched in it.
In a host-bound step every extra host microsecond delays the next launch, so it shows as idle; in a step
the host runs ahead of, it hides in the queue. So the profiler's share of a step's idle is estimated as
min(traced host cost, the step's `host` idle). It is an estimate (another GPU, driver or torch version
costs differently, and the H200 runs show it low for steps that block on reads):
`timed_idle.bound_idle` uses it only when no timed step exists, and every surface says so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bubblescope.rank_analysis import RankAnalysis
from bubblescope.trace import runtime_names as rt
from bubblescope.trace.steps import step_index_of
from bubblescope.trace.tables import category_mask

# Added host ns per recorded event under the profiler `run` uses.
# Measured on this session's CPU box (2 shared cores, torch 2.13 CPU), not on the H200:
# `python benchmarks/bench_profiler_overhead.py OUT --no-decode --calls 2000 --repeats 5`, medians of 5
# bare/traced repeats (benchmarks/RESULTS.md, "Profiler overhead"): aten_cpu +2.97 us, python_frame
# +0.18 us, record_function +6.66 us.
CPU_OP_ADDED_NS = 2_970
PYTHON_FRAME_ADDED_NS = 180
ANNOTATION_ADDED_NS = 6_660
# Runtime calls (kernel launch, copy, synchronize, other): not measured (the H200 run of the benchmark
# did not happen); counted through the ATen op or Python frame that wraps them, nothing of their own.
KERNEL_LAUNCH_ADDED_NS = 0
MEMCPY_ADDED_NS = 0
SYNC_ADDED_NS = 0
OTHER_RUNTIME_ADDED_NS = 0
GRAPH_LAUNCH_ADDED_NS = 0
# Per node of a launched CUDA graph: the slope of the traced cudaGraphLaunch duration over the graph's node
# count, least squares over the 328 graph launches (23 to 2 462 nodes) of the committed H200 traces in
# reports/samples/ (1.23 us per node, intercept 131 us); a bare launch's own per-node cost is taken as
# negligible against it (not measured here). `benchmarks/validate_tracing_model.py` prints the fit.
GRAPH_NODE_ADDED_NS = 1_230


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
