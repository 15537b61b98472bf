"""Invariants on random decode-like traces: busy + idle = span, classes partition idle, no gap overlaps
a GPU op, HTA buckets partition each stream's idle, step GPU intervals tile [B_0, E_last) and each
step's busy + idle = its GPU interval, the rest of the span being `outside`. Read blame is bounded:
per read bubble_ns <= lost lead <= blocked_ns, a read that begins on a drained device has none, and
no host-bound idle (host/sync) lies after its closing op's launch returned."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bubblescope.analysis.traces import analysis_dict, analyze_rank
from bubblescope.detect.idle_gaps import device_busy_intervals
from bubblescope.trace.steps import launch_times_ns, step_index_of
from bubblescope.trace.tables import build_tables
from tests.trace.builder import US, TraceBuilder

kernel_specs = st.lists(
    st.tuples(
        # 9: a graph replay of three kernels on stream 7.
        st.sampled_from([7, 8, 9]),
        st.integers(0, 40 * US),
        st.integers(1, 10 * US),
        st.integers(0, 6 * US),
        st.integers(1, 60 * US),
        st.booleans(),
    ),
    min_size=1,
    max_size=30,
)


def _random_trace(
    specs, step_cuts: list[int], margin_ns: int = US, queued_before_ns: int = 0
) -> TraceBuilder:
    b = TraceBuilder()
    host_ns = 0
    stream_free = {7: 0, 8: 0}
    if queued_before_ns:
        # An op already queued when tracing began: no launch call in the trace.
        b.gpu_op("k_queued", queued_before_ns, queued_before_ns + 5 * US, corr=b.next_correlation())
        stream_free[7] = queued_before_ns + 5 * US
    for stream, think_ns, launch_ns, latency_ns, run_ns, then_sync in specs:
        launch = (host_ns + think_ns, host_ns + think_ns + launch_ns)
        graph = stream == 9
        stream = 7 if graph else stream
        # A kernel may start before its launch call returns (the call still unwinding).
        start = max(launch[0] + latency_ns, stream_free[stream] + latency_ns // 3)
        if graph:
            runs = [
                (start + i * (run_ns + latency_ns), start + i * (run_ns + latency_ns) + run_ns)
                for i in range(3)
            ]
            b.graph_replay(launch, runs, stream=stream)
            stream_free[stream] = runs[-1][1]
        else:
            b.kernel(f"k{stream}", launch, (start, start + run_ns), stream=stream)
            stream_free[stream] = start + run_ns
        host_ns = launch[1]
        if then_sync:
            # A stream sync returns when that stream is done: the host waits. The read's ATen op
            # starts before its blocking call (Python, allocation): r0 < the call's start.
            sync_end = max(host_ns + 1000, stream_free[stream] + 500)
            b.op("aten::item", host_ns, sync_end + 200)
            b.runtime(
                "cudaStreamSynchronize",
                host_ns + 100 + think_ns // 4,
                max(sync_end, host_ns + 200 + think_ns // 4),
            )
            host_ns = max(sync_end, host_ns + 200 + think_ns // 4) + 200
    end_ns = max(host_ns, *stream_free.values()) + 5 * US
    cuts = sorted({min(c, end_ns) for c in step_cuts} | {0, end_ns})
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        if hi - lo > 2 * margin_ns:
            # Room between windows: `outside`, and launches made between two steps.
            b.annotation("bubblescope.step", lo + margin_ns, hi - margin_ns)
    return b


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=kernel_specs,
    step_cuts=st.lists(st.integers(0, 2000 * US), max_size=4),
    margin_ns=st.integers(1, 40).map(lambda us: us * US),
    queued_before_ns=st.sampled_from([0, 0, 2 * US, 30 * US]),
)
def test_accounting_invariants(specs, step_cuts, margin_ns, queued_before_ns) -> None:
    trace = _random_trace(specs, step_cuts, margin_ns, queued_before_ns).trace()
    tables = build_tables(trace["traceEvents"], {}, Path("random.json"), rank=0)
    rank = analyze_rank(tables)
    result = analysis_dict([rank])
    for device in result["devices"]:
        assert device["busy_ns"] + device["idle_ns"] == device["span_ns"]
        assert sum(device["idle_by_class_ns"].values()) == device["idle_ns"]
        for stream in device["streams"]:
            assert stream["busy_ns"] + stream["idle_ns"] == stream["span_ns"]
            assert stream["host_wait_ns"] + stream["kernel_wait_ns"] + stream["other_ns"] == stream["idle_ns"]
    gaps = rank.gaps
    assert (gaps["dur_ns"] > 0).all()
    starts, ends = rank.gpu["start_ns"].to_numpy(), rank.gpu["end_ns"].to_numpy()
    for gap_start, gap_end in zip(gaps["start_ns"].to_numpy(), gaps["end_ns"].to_numpy(), strict=True):
        assert not np.any((starts < gap_end) & (ends > gap_start)), "a gap overlaps a GPU op"
    outside = gaps["step"] < 0
    assert set(gaps.loc[outside, "class"]) <= {"outside"}
    assert "outside" not in set(gaps.loc[~outside, "class"])
    for step in result["steps"]:
        assert step["gpu_busy_ns"] + step["idle_ns"] == step["gpu_dur_ns"]
        assert sum(step["idle_by_class_ns"].values()) == step["idle_ns"]
    _check_step_intervals(rank, result)
    sync_bubbles = sum(s["bubble_ns"] for s in result["syncs"])
    assert sync_bubbles == sum(d["idle_by_class_ns"]["sync"] for d in result["devices"])
    _check_read_blame(rank)


def _check_read_blame(rank) -> None:
    """Bounded read blame, checked against the raw ops rather than the analysis' own pieces."""
    gaps, reads, gpu = rank.gaps, rank.reads, rank.gpu
    bubble = gaps[(gaps["class"] == "sync").to_numpy()].groupby("read_id")["dur_ns"].sum()
    starts, ends = gpu["start_ns"].to_numpy(), gpu["end_ns"].to_numpy()
    launch_end = gpu["launch_end_ns"].to_numpy()
    for read in reads.itertuples(index=False):
        spent = int(bubble.get(read.read_id, 0))
        lead = int(rank.lost_lead_ns.get(read.read_id, 0))
        assert spent <= lead <= read.blocked_ns, (read, spent, lead)
        r0 = read.hold_start_ns
        running = (starts <= r0) & (ends > r0)
        later = np.flatnonzero(starts > r0)
        if not running.any() and len(later):
            first = later[np.argmin(starts[later])]
            # Nothing ran at r0 and the next op's launch had not returned by r0: the device had no
            # queued work when the read began.
            if gpu["launch_row"].to_numpy()[first] >= 0 and launch_end[first] > r0:
                assert spent == 0 and lead == 0, (read, spent, lead)
    # A host-bound piece never lies after its closing op's launch returned; a gap whose closing op was
    # launched before the gap began is never host/sync (nor one with no launch in the trace).
    host_bound = gaps[gaps["class"].isin(["host", "sync"]).to_numpy() & (gaps["next_row"] >= 0).to_numpy()]
    rows = host_bound["next_row"].to_numpy()
    assert (gpu["launch_row"].to_numpy()[rows] >= 0).all()
    assert (host_bound["end_ns"].to_numpy() <= launch_end[rows]).all()


def _check_step_intervals(rank, result: dict) -> None:
    """Recompute each step's GPU interval and busy time from the ops, independently of the analysis."""
    (device,) = result["devices"]
    steps = result["steps"]
    origin = rank.tables.origin_ns
    bounds = [steps[0]["gpu_start_ns"]] + [s["gpu_start_ns"] + s["gpu_dur_ns"] for s in steps]
    # The intervals tile [B_0, E_last): each starts where the previous one ended.
    assert [s["gpu_start_ns"] for s in steps[1:]] == bounds[1:-1]
    assert all(s["gpu_dur_ns"] >= 0 for s in steps)
    gpu = rank.gpu
    starts, ends = gpu["start_ns"].to_numpy() - origin, gpu["end_ns"].to_numpy() - origin
    op_steps = step_index_of(launch_times_ns(gpu), rank.steps)
    for i in range(len(steps)):
        mine = op_steps == i
        # E_i is the latest end of the work launched in steps <= i (and between their windows).
        launched_by_then = launch_times_ns(gpu) < rank.steps.end_ns[i]
        if mine.any():
            assert ends[mine].max() <= bounds[i + 1]
        if launched_by_then.any():
            assert bounds[i + 1] == max(ends[launched_by_then].max(), bounds[0])
    merged_starts, merged_ends = device_busy_intervals(starts, ends)
    for i, step in enumerate(steps):
        lo, hi = bounds[i], bounds[i + 1]
        busy = np.clip(merged_ends, lo, hi) - np.clip(merged_starts, lo, hi)
        assert int(busy.sum()) == step["gpu_busy_ns"]
    span_start = min(int(starts.min()), int(rank.steps.start_ns[0] - origin))
    assert bounds[0] >= span_start and bounds[-1] <= span_start + device["span_ns"]
    outside_busy = device["busy_ns"] - sum(s["gpu_busy_ns"] for s in steps)
    outside_span = device["span_ns"] - (bounds[-1] - bounds[0])
    assert outside_span == device["idle_by_class_ns"]["outside"] + outside_busy
