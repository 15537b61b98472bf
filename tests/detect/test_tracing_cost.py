"""The per-call tracing model (issue 23 §1): a step's profiler share is min(added host time, host idle)."""

from __future__ import annotations

from pathlib import Path

from bubblescope.analysis.traces import analyze_traces
from bubblescope.detect import tracing_cost as tc
from tests.trace.builder import US, TraceBuilder


def _graph_step(host_gap_us: int) -> TraceBuilder:
    """One step [0, 1000): an ATen op and a Python frame on the host, then a graph of 3 kernels launched
    at 10 + host_gap_us (the device idles from 5 until the launch returns: host-bound idle)."""
    b = TraceBuilder()
    b.annotation("bubblescope.step", 0, 1000 * US)
    b.kernel("k0", (1 * US, 2 * US), (3 * US, 5 * US))
    b.frame("/home/u/app.py(3): step", 0, 999 * US)
    b.op("aten::add", 6 * US, 8 * US)
    launch = 10 * US + host_gap_us * US
    b.graph_replay(
        (launch, launch + 5 * US),
        [
            (launch + 6 * US, launch + 8 * US),
            (launch + 9 * US, launch + 11 * US),
            (launch + 12 * US, launch + 14 * US),
        ],
    )
    return b


def _expected_added_ns() -> int:
    return (
        tc.ANNOTATION_ADDED_NS  # bubblescope.step
        + tc.KERNEL_LAUNCH_ADDED_NS
        + tc.PYTHON_FRAME_ADDED_NS
        + tc.CPU_OP_ADDED_NS
        + tc.GRAPH_LAUNCH_ADDED_NS
        + 3 * tc.GRAPH_NODE_ADDED_NS
    )


def test_profiler_share_is_the_added_host_time_when_the_host_idle_holds_it(tmp_path: Path) -> None:
    result = analyze_traces([_graph_step(host_gap_us=900).write(tmp_path / "t.json.gz")])
    (step,) = result["steps"]
    assert step["idle_by_class_ns"]["host"] > _expected_added_ns()
    assert step["profiler_ns"] == _expected_added_ns()
    assert result["summary"]["profiler_ns_per_step"] == _expected_added_ns()


def test_profiler_share_never_exceeds_the_host_idle(tmp_path: Path) -> None:
    result = analyze_traces([_graph_step(host_gap_us=1).write(tmp_path / "t.json.gz")])
    (step,) = result["steps"]
    assert step["profiler_ns"] == min(_expected_added_ns(), step["idle_by_class_ns"]["host"])
    assert step["profiler_ns"] < _expected_added_ns()
