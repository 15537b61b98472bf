"""Detector helper: how much of a step's host-bound idle the profiler itself caused (an estimate).

Tracing slows the host: under the profiler `bubblescope run` uses (torch.profiler CPU + CUDA activities,
`with_stack`, `record_shapes`, CUDA sync events) every recorded ATen op, Python frame and annotation costs
the host extra time, and a CUDA graph launch costs extra per node of its graph (CUPTI records each node).
The per-event costs below come with their source next to each; `benchmarks/bench_profiler_overhead.py`
measures all of them on a GPU (the constants below: its run on the lent H200), and
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

from bubblescope.ranks.analysis import RankAnalysis
from bubblescope.trace import runtime_names as rt
from bubblescope.trace.steps import step_index_of
from bubblescope.trace.tables import category_mask

# Added host ns per recorded event under the profiler `run` uses, measured on the lent H200 (torch 2.11,
# 2026-12-03): `python benchmarks/bench_profiler_overhead.py OUT` (benchmarks/RESULTS.md, "Profiler
# overhead on the H200"), each the median of 5 bare/traced repeats of 1000 calls.
# An ATen op that launches a kernel (`add_` on a CUDA tensor: the op and its cudaLaunchKernel together)
# +3.21 us; the same op on a CPU tensor measured +7.13 us (no launch, more shape recording): the model
# charges the launching kind, the decode loop's common case, and nothing more for its runtime call.
CPU_OP_ADDED_NS = 3_210
PYTHON_FRAME_ADDED_NS = 290
ANNOTATION_ADDED_NS = 8_040
KERNEL_LAUNCH_ADDED_NS = 0
# A Triton launch (cuLaunchKernelEx through Triton's Python launcher, no ATen op around it): +15.67 us.
DRIVER_LAUNCH_ADDED_NS = 15_670
# A 4 KiB device copy_ (ATen op + cudaMemcpyAsync) +3.48 us: the copy call's own share over the op's.
MEMCPY_ADDED_NS = 270
# torch.cuda.synchronize() on an idle device (a Python call and cudaDeviceSynchronize, no ATen op).
SYNC_ADDED_NS = 11_880
OTHER_RUNTIME_ADDED_NS = 0
# CUDAGraph.replay() of 1, 8, 64, 512 kernel nodes: +0.17, +6.37, +36.4, +291.9 us: nothing per launch,
# 0.57 us per node (least squares). The traced launch's whole duration grows 1.23 us per node on the
# committed H200 traces (`benchmarks/validate_tracing_model.py --fit`), of which the bare launch's own
# 0.26 us per node (133 us for 512 nodes, bare) is not tracing.
GRAPH_LAUNCH_ADDED_NS = 0
GRAPH_NODE_ADDED_NS = 570


def _runtime_cost_ns(names: pd.Series) -> np.ndarray:
    """Per runtime call, its added host ns by kind (names tested once per distinct name). [n]"""
    graph = category_mask(names, rt.is_graph_launch)
    launch = category_mask(names, rt.is_kernel_launch) & ~graph
    driver = category_mask(names, lambda name: name.startswith("cuLaunchKernel"))
    copy = category_mask(names, rt.is_copy)
    sync = category_mask(names, rt.is_synchronize)
    cost = np.full(len(names), OTHER_RUNTIME_ADDED_NS, dtype=np.int64)
    cost[launch] = KERNEL_LAUNCH_ADDED_NS
    cost[driver] = DRIVER_LAUNCH_ADDED_NS
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
